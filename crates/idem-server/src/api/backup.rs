//! `idem.v1.Backup`: online backups of a live node, streamed to the operator.
//!
//! Why on the API port and not a file on the node: the operator (or a cron job) runs
//! `idemctl snapshot save` from anywhere with an admin token; nothing has to be copied off
//! the node's disk and the node keeps serving. The cut is taken after a read barrier, so
//! the backup holds every write acknowledged before the call began, wherever it was
//! acknowledged; any node can serve it.
//!
//! Bounds: one backup at a time per node (a second is refused with `OVERLOADED`), messages
//! of at most [`CHUNK`] bytes, a channel of [`IN_FLIGHT`] messages between the blocking
//! writer and the stream (a slow reader slows the writer, memory stays bounded), and the
//! writer stops when the client goes away or the node shuts down. A backup pins a RocksDB
//! snapshot (old versions of every record it covers stay on disk) and the one-at-a-time
//! slot while it streams, so a reader that stalls must not hold them forever: the writer
//! gives up when the reader takes no message for [`StreamBounds::idle`]
//! (`limits.backup_idle_timeout`) or the backup runs past [`StreamBounds::total`]
//! (`limits.backup_max_duration`), ending the stream with `DEADLINE_EXCEEDED`.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::placement::GroupId;
use idem_proto::v1::backup_server::Backup;
use idem_proto::v1::save_snapshot_response::Part;
use idem_proto::v1::{
    BackupGroup, BackupHeader as WireHeader, BackupMember, BackupTrailer, SaveSnapshotRequest,
    SaveSnapshotResponse,
};
use idem_proto::{reason, status};
use idem_store::{
    hex_digest, write_backup, BackupCut, BackupError, BackupOrigin, StateReader, StoreError,
};
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::{observe, ApiContext};
use crate::auth::{Principal, Role};
use crate::backend::RequestError;
use crate::groups::{Group, GroupSet};

/// Largest `chunk` message.
pub const CHUNK: usize = 1 << 20;
/// Messages queued between the writer and the stream.
const IN_FLIGHT: usize = 4;
/// When a refused second backup may be retried.
const RETRY_AFTER: Duration = Duration::from_secs(5);

type Messages = ReceiverStream<Result<SaveSnapshotResponse, Status>>;
type Tx = mpsc::Sender<Result<SaveSnapshotResponse, Status>>;

/// How long a backup stream may wait on its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamBounds {
    /// Longest wait for the reader to take one message (`limits.backup_idle_timeout`).
    pub idle: Duration,
    /// Longest a whole backup may stream (`limits.backup_max_duration`).
    pub total: Duration,
}

/// Why a backup stream gave up on its reader.
#[derive(Debug, thiserror::Error)]
enum Stalled {
    /// The reader took no message for the idle bound.
    #[error("the reader took no data for {0:?} (limits.backup_idle_timeout)")]
    Idle(Duration),
    /// The backup ran longer than the total bound.
    #[error("the backup streamed for longer than {0:?} (limits.backup_max_duration)")]
    Total(Duration),
}

/// The `idem.v1.Backup` service of a node.
pub struct BackupService {
    ctx: Arc<ApiContext>,
    groups: GroupSet,
    node_id: u64,
    bounds: StreamBounds,
    running: Arc<Semaphore>,
}

impl BackupService {
    /// The service over this node's groups, streaming within `bounds`.
    pub fn new(ctx: Arc<ApiContext>, groups: GroupSet, node_id: u64, bounds: StreamBounds) -> Self {
        BackupService {
            ctx,
            groups,
            node_id,
            bounds,
            running: Arc::new(Semaphore::new(1)),
        }
    }

    async fn start(
        &self,
        caller: Result<Principal, RequestError>,
    ) -> Result<Messages, RequestError> {
        // A backup reads every tenant's records.
        caller?.require_all_tenants(Role::Admin)?;
        let permit = Arc::clone(&self.running).try_acquire_owned().map_err(|_| {
            RequestError::exhausted(
                reason::OVERLOADED,
                "another backup is streaming from this node",
                Some(RETRY_AFTER),
            )
        })?;
        let sources = self.sources()?;
        for (group, _) in &sources {
            group.backend().read_barrier().await?;
        }
        let sources: Vec<Source> = sources
            .into_iter()
            .map(|(group, region)| Source {
                group: group.id(),
                region,
                reader: group.backend().reader().clone(),
            })
            .collect();
        let taken_at_ms = idem_core::Timestamp::now().millis() as i64;
        let node_id = self.node_id;
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let outbox = Outbox {
            tx,
            runtime: tokio::runtime::Handle::current(),
            idle: self.bounds.idle,
            total: self.bounds.total,
            deadline: Instant::now() + self.bounds.total,
            shutdown: self.ctx.shutdown.clone(),
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            if let Err(error) = stream_backup(&sources, node_id, taken_at_ms, &outbox) {
                tracing::warn!(%error, "backup stream ended early");
                outbox.fail(status_of(error));
            }
        });
        Ok(ReceiverStream::new(rx))
    }

    /// Every group the backup covers, with its region (empty for the global group): the
    /// global group and each region group the configuration names, by id.
    fn sources(&self) -> Result<Vec<(Arc<Group>, String)>, RequestError> {
        let global = self.groups.global();
        let mut sources = vec![(global.clone(), String::new())];
        let mut regions: Vec<(GroupId, String)> = global
            .placement()
            .cluster
            .regions
            .iter()
            .map(|(region, id)| (*id, region.clone()))
            .collect();
        regions.sort_unstable();
        for (id, region) in regions {
            let group = self.groups.get(id).ok_or_else(|| {
                RequestError::refused(
                    reason::BACKUP_UNSUPPORTED,
                    format!(
                        "this node does not run region {region}'s group ({id}) yet; retry \
                         shortly or take the backup from another node"
                    ),
                )
            })?;
            sources.push((group, region));
        }
        Ok(sources)
    }
}

/// A group to back up: its id, region and reader.
struct Source {
    group: GroupId,
    region: String,
    reader: StateReader,
}

/// Writes the header message, the file's bytes and the trailer message to `outbox`.
fn stream_backup(
    sources: &[Source],
    node_id: u64,
    taken_at_ms: i64,
    outbox: &Outbox,
) -> Result<(), BackupError> {
    // Region groups first, the global group (first in the file) last.
    let mut cuts = sources
        .iter()
        .rev()
        .map(|source| {
            source.reader.backup_cut(BackupOrigin {
                group: source.group,
                node_id,
                taken_at_ms,
            })
        })
        .collect::<Result<Vec<BackupCut<'_>>, _>>()?;
    cuts.reverse();
    let header = wire_header(&cuts, sources);
    outbox.send(Part::Header(header))?;
    let mut out = Chunks {
        outbox,
        buf: Vec::with_capacity(CHUNK),
    };
    let summary = write_backup(cuts, &mut out)?;
    let indexes: Vec<(GroupId, u64)> = summary
        .headers
        .iter()
        .map(|header| (header.group, header.index()))
        .collect();
    tracing::info!(
        groups = ?indexes,
        version = summary.version,
        bytes = summary.length,
        "backup streamed"
    );
    outbox.send(Part::Trailer(BackupTrailer {
        length: summary.length,
        sha256: hex_digest(&summary.digest),
    }))?;
    Ok(())
}

/// The stream's side of the channel, for the blocking writer: every message waits for room
/// at most the idle bound (and never past the total deadline), and not at all once the
/// node shuts down.
struct Outbox {
    tx: Tx,
    runtime: tokio::runtime::Handle,
    idle: Duration,
    total: Duration,
    deadline: Instant,
    shutdown: CancellationToken,
}

impl Outbox {
    /// Queues one message for the reader (blocking: call it from the blocking pool).
    fn send(&self, part: Part) -> io::Result<()> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let (wait, stalled) = if self.idle < remaining {
            (self.idle, Stalled::Idle(self.idle))
        } else {
            (remaining, Stalled::Total(self.total))
        };
        let message = Ok(SaveSnapshotResponse { part: Some(part) });
        self.runtime.block_on(async {
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    "the node is shutting down",
                )),
                sent = tokio::time::timeout(wait, self.tx.send(message)) => match sent {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) => Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the client went away",
                    )),
                    Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, stalled)),
                },
            }
        })
    }

    /// Ends the stream with `status`, once the reader makes room for it within the idle
    /// bound; the writer does not wait for that (its snapshot and slot are released now).
    fn fail(self, status: Status) {
        let Outbox {
            tx, runtime, idle, ..
        } = self;
        runtime.spawn(async move {
            let _ = tokio::time::timeout(idle, tx.send(Err(status))).await;
        });
    }
}

/// A writer that sends what it is given as `chunk` messages of at most [`CHUNK`] bytes.
struct Chunks<'t> {
    outbox: &'t Outbox,
    buf: Vec<u8>,
}

impl Write for Chunks<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = bytes.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&bytes[..n]);
        if self.buf.len() == CHUNK {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.outbox.send(Part::Chunk(chunk))
    }
}

/// The header as the wire carries it: the global group's cut (`cuts[0]`), and every
/// group's index.
fn wire_header(cuts: &[BackupCut<'_>], sources: &[Source]) -> WireHeader {
    let header = cuts[0].header();
    let groups = cuts
        .iter()
        .zip(sources)
        .map(|(cut, source)| BackupGroup {
            group: cut.header().group,
            applied_index: cut.header().index(),
            applied_term: cut.header().term(),
            region: source.region.clone(),
        })
        .collect();
    let membership = header.membership.membership();
    let members = membership
        .nodes()
        .map(|(id, node)| BackupMember {
            id: *id,
            raft_addr: node.raft_addr.clone(),
            api_addr: node.api_addr.clone(),
            region: node.region.clone(),
            zone: node.zone.clone(),
            voter: membership.voter_ids().any(|v| v == *id),
        })
        .collect();
    WireHeader {
        format_version: idem_store::backup_version(cuts.len()),
        group: header.group,
        applied_index: header.index(),
        applied_term: header.term(),
        node_id: header.node_id,
        members,
        taken_at_ms: header.taken_at_ms,
        groups,
    }
}

/// The status a failed backup ends its stream with.
fn status_of(error: BackupError) -> Status {
    let error = match error {
        BackupError::Installing => RequestError::exhausted(
            reason::OVERLOADED,
            "a snapshot install is under way on this node; retry shortly",
            Some(Duration::from_secs(1)),
        ),
        BackupError::Store(StoreError::Io(io)) if io.kind() == io::ErrorKind::TimedOut => {
            return status::error(reason::DEADLINE_EXCEEDED, format!("backup: {io}"), []);
        }
        other => RequestError::Internal(format!("backup: {other}")),
    };
    error.into()
}

#[tonic::async_trait]
impl Backup for BackupService {
    type SaveSnapshotStream = Messages;

    async fn save_snapshot(
        &self,
        request: Request<SaveSnapshotRequest>,
    ) -> Result<Response<Self::SaveSnapshotStream>, Status> {
        let caller = self.ctx.caller(&request);
        observe(
            &self.ctx.metrics,
            "backup",
            "save_snapshot",
            self.start(caller),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    //! The writer's side of the stream against readers that stall, leave or outlast the
    //! node; the whole service against real nodes is in tests/backup_limits.rs.

    use super::*;

    /// An outbox of `capacity` messages, with its reader (not reading).
    fn outbox(
        capacity: usize,
        idle: Duration,
        total: Duration,
    ) -> (Outbox, mpsc::Receiver<Result<SaveSnapshotResponse, Status>>) {
        let (tx, rx) = mpsc::channel(capacity);
        let outbox = Outbox {
            tx,
            runtime: tokio::runtime::Handle::current(),
            idle,
            total,
            deadline: Instant::now() + total,
            shutdown: CancellationToken::new(),
        };
        (outbox, rx)
    }

    fn chunk() -> Part {
        Part::Chunk(vec![7; 16])
    }

    /// Sends `parts` from the blocking pool, as the writer does; the first failure.
    async fn send_all(outbox: Outbox, parts: usize) -> (Outbox, io::Result<()>) {
        tokio::task::spawn_blocking(move || {
            let result = (0..parts).try_for_each(|_| outbox.send(chunk()));
            (outbox, result)
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_reader_that_stops_reading_is_given_up_after_the_idle_bound() {
        let idle = Duration::from_millis(100);
        let (outbox, rx) = outbox(2, idle, Duration::from_secs(3600));
        let started = Instant::now();
        let (outbox, result) = send_all(outbox, 3).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("backup_idle_timeout"), "{error}");
        assert!(started.elapsed() >= idle);
        // The reader that resumes gets what was queued, then why the stream ended.
        outbox.fail(status_of(error.into()));
        let mut rx = rx;
        for _ in 0..2 {
            assert!(rx.recv().await.unwrap().is_ok());
        }
        let status = rx.recv().await.unwrap().unwrap_err();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert!(rx.recv().await.is_none(), "then the stream ends");
    }

    #[tokio::test]
    async fn a_backup_past_its_total_bound_is_given_up_even_while_the_reader_keeps_up() {
        let (outbox, mut rx) = outbox(1, Duration::from_secs(3600), Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut taken = 0;
            while rx.recv().await.is_some() {
                taken += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            taken
        });
        let (outbox, result) = send_all(outbox, usize::MAX).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("backup_max_duration"), "{error}");
        drop(outbox);
        assert!(
            reader.await.unwrap() > 1,
            "the reader took messages meanwhile"
        );
    }

    #[tokio::test]
    async fn a_reader_that_went_away_ends_the_writer() {
        let (outbox, rx) = outbox(1, Duration::from_secs(3600), Duration::from_secs(3600));
        drop(rx);
        let (_, result) = send_all(outbox, 1).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[tokio::test]
    async fn a_shutdown_ends_the_writer_even_when_the_reader_has_room() {
        let (outbox, _rx) = outbox(8, Duration::from_secs(3600), Duration::from_secs(3600));
        outbox.shutdown.cancel();
        let (_, result) = send_all(outbox, 1).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::Interrupted);
    }

    #[test]
    fn a_stalled_reader_is_told_deadline_exceeded() {
        let stalled = io::Error::new(
            io::ErrorKind::TimedOut,
            Stalled::Idle(Duration::from_secs(60)),
        );
        let status = status_of(stalled.into());
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(
            idem_proto::status::reason_of(&status).as_deref(),
            Some(reason::DEADLINE_EXCEEDED)
        );
        let other = status_of(io::Error::other("disk on fire").into());
        assert_eq!(
            idem_proto::status::reason_of(&other).as_deref(),
            Some(reason::INTERNAL)
        );
    }
}
