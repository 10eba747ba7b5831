//! The log writer: one thread that performs every write of the log store, in order, and
//! reports appends as flushed only after the WAL is fsynced.
//!
//! openraft asks two things of `append`: the entries must be readable when it returns, and
//! the flush callback may fire only once they are on disk. It also asks that every log-store
//! write (append, vote, truncate, purge) be applied in submission order. A single thread
//! gives the order for free. Each append is written to RocksDB without sync (readable at
//! once, `append` returns), and its callback waits in a queue; when the thread has no more
//! work at hand (or after a bounded number of jobs) it fsyncs the WAL once and completes
//! every queued callback. That is group commit: under load, many appends share one fsync.
//! An append submitted during a sync waits for it, and meanwhile the Raft core gathers more
//! client writes into its next append: writing appends on the caller's thread instead was
//! tried, and it cut single-client latency (-10 %) but cost 11 % of the throughput at 64
//! clients, through smaller batches (see performance.md).
//!
//! Votes and purges are written with `sync` and answered after the fsync. The committed
//! index is written detached: queued in order, not waited for (it only ever names entries
//! already written; a failure is logged, and fails the next sync too, which shares the WAL).

use std::io;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use openraft::storage::IOFlushed;
use rocksdb::WriteBatch;
use tokio::sync::oneshot;

use crate::db::Db;
use crate::error::StoreError;
use crate::types::TypeConfig;

/// Most jobs handled between two WAL syncs.
const MAX_GROUP: usize = 256;

/// A write submitted to the writer thread.
enum Job {
    /// Log entries: write, answer `written`, then complete `flushed` after the WAL sync.
    Append {
        batch: WriteBatch,
        written: oneshot::Sender<Result<(), StoreError>>,
        flushed: IOFlushed<TypeConfig>,
    },
    /// Any other write; answered once written (and fsynced when `sync`), unless detached
    /// (`done` is `None`).
    Write {
        batch: WriteBatch,
        sync: bool,
        done: Option<oneshot::Sender<Result<(), StoreError>>>,
    },
}

/// Handle of the writer thread; dropping the last handle stops and joins the thread.
pub(crate) struct LogWriter {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl LogWriter {
    /// Starts the writer thread.
    pub(crate) fn spawn(db: Arc<Db>) -> Result<Self, StoreError> {
        if cfg!(feature = "unsafe-unsynced-log") {
            tracing::error!("built with the test-only feature unsafe-unsynced-log: acknowledged writes are NOT durable");
        }
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("idem-log-writer".into())
            .spawn(move || run(&db, &queue))?;
        Ok(LogWriter {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Writes log entries; returns once they are readable. `flushed` is completed after
    /// the WAL holding them is fsynced.
    pub(crate) async fn append(
        &self,
        batch: WriteBatch,
        flushed: IOFlushed<TypeConfig>,
    ) -> Result<(), StoreError> {
        let (written, answer) = oneshot::channel();
        self.submit(Job::Append {
            batch,
            written,
            flushed,
        })?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Writes `batch` after every earlier job; with `sync`, returns after the fsync.
    pub(crate) async fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.submit(Job::Write {
            batch,
            sync,
            done: Some(done),
        })?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Queues `batch` (not synced) after every earlier job, without waiting for it.
    pub(crate) fn write_detached(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.submit(Job::Write {
            batch,
            sync: false,
            done: None,
        })
    }

    fn submit(&self, job: Job) -> Result<(), StoreError> {
        let jobs = self.jobs.as_ref().ok_or(StoreError::WriterStopped)?;
        jobs.send(job).map_err(|_| StoreError::WriterStopped)
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the jobs already submitted.
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the log writer thread panicked");
            }
        }
    }
}

/// The thread's loop: take a group of jobs, write each, sync once, complete callbacks.
fn run(db: &Db, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut unflushed = Vec::new();
        handle(db, first, &mut unflushed);
        for _ in 1..MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => handle(db, job, &mut unflushed),
                Err(_) => break,
            }
        }
        if !unflushed.is_empty() {
            complete(db, unflushed, sync_log(db));
        }
    }
}

/// Syncs the WAL before the appends are reported flushed — except in a build with the
/// test-only feature `unsafe-unsynced-log`, which reports them flushed without any sync: a
/// deliberately broken build that acknowledges writes a power loss can take back. It exists
/// so that the jepsen harness can show its `power-loss` nemesis catches that bug (plain
/// kills cannot: the page cache survives them). Never ship it.
fn sync_log(db: &Db) -> Result<(), StoreError> {
    if cfg!(feature = "unsafe-unsynced-log") {
        return Ok(());
    }
    db.sync_wal()
}

fn handle(db: &Db, job: Job, unflushed: &mut Vec<IOFlushed<TypeConfig>>) {
    match job {
        Job::Append {
            batch,
            written,
            flushed,
        } => match db.write(batch, false) {
            Ok(()) => {
                unflushed.push(flushed);
                let _ = written.send(Ok(()));
            }
            Err(e) => {
                tracing::error!(
                    operation = "write of raft log entries",
                    path = %db.raw().path().display(),
                    error = %e,
                    "storage failure: this node's raft stops and the node serves nothing \
                     until it is restarted (docs/guarantees.md)"
                );
                flushed.io_completed(Err(io::Error::other(e.to_string())));
                let _ = written.send(Err(e));
            }
        },
        Job::Write { batch, sync, done } => {
            let result = db.write(batch, sync);
            match done {
                Some(done) => {
                    let _ = done.send(result);
                }
                None => {
                    if let Err(e) = result {
                        tracing::error!(error = %e, "a detached log-store write failed");
                    }
                }
            }
        }
    }
}

fn complete(db: &Db, callbacks: Vec<IOFlushed<TypeConfig>>, synced: Result<(), StoreError>) {
    if let Err(e) = &synced {
        tracing::error!(
            operation = "fsync of the write-ahead log",
            path = %db.raw().path().display(),
            error = %e,
            "storage failure: the raft log could not be made durable; nothing it held is \
             acknowledged and the fsync is not retried: this node's raft stops and the node \
             serves nothing until it is restarted (docs/guarantees.md)"
        );
    }
    for callback in callbacks {
        let result = match &synced {
            Ok(()) => Ok(()),
            Err(e) => Err(io::Error::other(e.to_string())),
        };
        callback.io_completed(result);
    }
}
