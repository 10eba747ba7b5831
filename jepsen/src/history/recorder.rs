//! A thread-safe history recorder for a running test.
//!
//! Workers and the nemesis share one `Recorder` (behind an `Arc`). Each entry gets its `:index`
//! and `:time` under one lock, so index order, time order and the order in which outcomes were
//! learned agree: that order is the real-time order the checkers rely on. Entries can also be
//! streamed to a file as they are recorded, so a harness that dies mid-test still leaves the
//! history up to that point.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::error::HistoryError;
use super::op::{Op, OpType, F};
use super::value::Value;
use super::History;

/// Records operations from many threads into one history.
pub struct Recorder {
    start: Instant,
    inner: Mutex<Inner>,
}

struct Inner {
    ops: Vec<Op>,
    sink: Option<Box<dyn Write + Send>>,
    sink_error: Option<std::io::Error>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A recorder that keeps entries in memory; time 0 is now.
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            inner: Mutex::new(Inner {
                ops: Vec::new(),
                sink: None,
                sink_error: None,
            }),
        }
    }

    /// A recorder that also writes each entry as one EDN line to `sink` as it is recorded.
    pub fn streaming_to(sink: impl Write + Send + 'static) -> Recorder {
        let recorder = Recorder::new();
        recorder.lock().sink = Some(Box::new(sink));
        recorder
    }

    /// A recorder streaming to a new file at `path` (for example `store/.../history.edn`).
    pub fn create_file(path: &Path) -> Result<Recorder, HistoryError> {
        let file = File::create(path).map_err(|source| HistoryError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Recorder::streaming_to(BufWriter::new(file)))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Nanoseconds since the recorder was created (the history's time base).
    pub fn now(&self) -> i64 {
        i64::try_from(self.start.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }

    /// Appends `op`, setting its `:index` and its `:time` to now; returns the stored entry.
    pub fn record(&self, op: Op) -> Op {
        let mut inner = self.lock();
        let time = self.now();
        inner.append(op.at(time))
    }

    /// Appends `op` keeping its `:time` (replays, tests); sets only its `:index`.
    pub fn record_at(&self, op: Op) -> Op {
        self.lock().append(op)
    }

    /// Records the invocation of `f` with argument `value` by client `process`.
    pub fn invoke(&self, process: u64, f: F, value: Value) -> Op {
        self.record(Op::invoke(process, f, value))
    }

    /// Records that `invoke` took effect, observing `value`.
    pub fn ok(&self, invoke: &Op, value: Value) -> Op {
        self.record(invoke.complete(OpType::Ok, value))
    }

    /// Records that `invoke` certainly did not take effect (a definite refusal such as
    /// `:stale-fence`). Never use this for a timeout: see [`Recorder::info`].
    pub fn fail(&self, invoke: &Op, value: Value, error: Value) -> Op {
        self.record(invoke.complete(OpType::Fail, value).with_error(error))
    }

    /// Records that the outcome of `invoke` is unknown (timeout, lost connection, crash). The
    /// process must not be reused afterwards: continue under a fresh process number.
    pub fn info(&self, invoke: &Op, value: Value, error: Option<Value>) -> Op {
        let op = invoke.complete(OpType::Info, value);
        self.record(match error {
            Some(e) => op.with_error(e),
            None => op,
        })
    }

    /// Records a nemesis entry (`:start-partition`, `:kill`, ...) with a description.
    pub fn nemesis(&self, f: &str, value: Value) -> Op {
        self.record(Op::nemesis(f, value))
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> History {
        History::from_ops(self.lock().ops.clone())
    }

    /// Flushes the stream (if any) and returns the history; reports the first write error.
    pub fn finish(self) -> Result<History, HistoryError> {
        let mut inner = self
            .inner
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(sink) = inner.sink.as_mut() {
            if let Err(e) = sink.flush() {
                inner.sink_error.get_or_insert(e);
            }
        }
        match inner.sink_error {
            Some(e) => Err(HistoryError::Write(e)),
            None => Ok(History::from_ops(inner.ops)),
        }
    }
}

impl Inner {
    fn append(&mut self, mut op: Op) -> Op {
        op.index = self.ops.len() as u64;
        if let Some(sink) = self.sink.as_mut() {
            if let Err(e) = writeln!(sink, "{}", op.to_edn()) {
                self.sink_error.get_or_insert(e);
            }
        }
        self.ops.push(op.clone());
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn concurrent_recording_keeps_index_and_time_in_order() {
        let rec = Arc::new(Recorder::new());
        let threads: Vec<_> = (0..4u64)
            .map(|p| {
                let rec = Arc::clone(&rec);
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let inv = rec.invoke(p, F::Read, Value::map([("key", "k".into())]));
                        rec.ok(&inv, Value::Nil);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let h = Arc::try_unwrap(rec).ok().unwrap().finish().unwrap();
        assert_eq!(h.len(), 400);
        for (i, w) in h.ops().windows(2).enumerate() {
            assert_eq!(w[0].index, i as u64);
            assert!(w[0].time <= w[1].time);
        }
        assert_eq!(h.operations().operations.len(), 200);
    }

    #[test]
    fn streams_edn_lines_that_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.edn");
        let rec = Recorder::create_file(&path).unwrap();
        let inv = rec.invoke(0, F::Claim, Value::map([("key", "k".into())]));
        rec.info(&inv, Value::Nil, Some(Value::kw("timeout")));
        rec.nemesis("start-partition", Value::str("majority"));
        let h = rec.finish().unwrap();
        assert_eq!(History::read(&path).unwrap().ops(), h.ops());
    }
}
