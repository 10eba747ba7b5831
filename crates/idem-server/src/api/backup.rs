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
//! writer stops when the client goes away or the node shuts down.
//!
//! Region groups: in region-affinity mode a tenant's records live in its home region's
//! group, which this node may not even host; one file could not be a consistent cut of
//! several groups. Such clusters are refused with `BACKUP_UNSUPPORTED`
//! (docs/operations.md, "Backup and restore").

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use idem_core::placement::GLOBAL_GROUP;
use idem_proto::reason;
use idem_proto::v1::backup_server::Backup;
use idem_proto::v1::save_snapshot_response::Part;
use idem_proto::v1::{
    BackupHeader as WireHeader, BackupMember, BackupTrailer, SaveSnapshotRequest,
    SaveSnapshotResponse,
};
use idem_store::{hex_digest, BackupError, BackupHeader, BackupOrigin, StateReader};
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::{observe, ApiContext};
use crate::auth::{Principal, Role};
use crate::backend::RequestError;
use crate::groups::GroupSet;

/// Largest `chunk` message.
pub const CHUNK: usize = 1 << 20;
/// Messages queued between the writer and the stream.
const IN_FLIGHT: usize = 4;
/// When a refused second backup may be retried.
const RETRY_AFTER: Duration = Duration::from_secs(5);

type Messages = ReceiverStream<Result<SaveSnapshotResponse, Status>>;

/// The `idem.v1.Backup` service of a node.
pub struct BackupService {
    ctx: Arc<ApiContext>,
    groups: GroupSet,
    node_id: u64,
    running: Arc<Semaphore>,
}

impl BackupService {
    /// The service over this node's groups.
    pub fn new(ctx: Arc<ApiContext>, groups: GroupSet, node_id: u64) -> Self {
        BackupService {
            ctx,
            groups,
            node_id,
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
        let global = self.groups.global();
        if !global.placement().cluster.regions.is_empty() || self.groups.all().len() > 1 {
            return Err(RequestError::refused(
                reason::BACKUP_UNSUPPORTED,
                "this cluster has region groups; a backup covers the global group only",
            ));
        }
        global.backend().read_barrier().await?;
        let reader = global.backend().reader().clone();
        let origin = BackupOrigin {
            group: GLOBAL_GROUP,
            node_id: self.node_id,
            taken_at_ms: idem_core::Timestamp::now().millis() as i64,
        };
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let shutdown = self.ctx.shutdown.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            if let Err(error) = stream_backup(&reader, origin, &tx, shutdown) {
                tracing::warn!(%error, "backup stream ended early");
                let _ = tx.blocking_send(Err(status_of(error)));
            }
        });
        Ok(ReceiverStream::new(rx))
    }
}

/// Writes the header message, the file's bytes and the trailer message to `tx`.
fn stream_backup(
    reader: &StateReader,
    origin: BackupOrigin,
    tx: &mpsc::Sender<Result<SaveSnapshotResponse, Status>>,
    shutdown: CancellationToken,
) -> Result<(), BackupError> {
    let cut = reader.backup_cut(origin)?;
    let header = wire_header(cut.header());
    send(tx, Part::Header(header))?;
    let mut out = Chunks {
        tx,
        buf: Vec::with_capacity(CHUNK),
        shutdown,
    };
    let summary = cut.write(&mut out)?;
    tracing::info!(
        index = summary.header.index(),
        term = summary.header.term(),
        bytes = summary.length,
        "backup streamed"
    );
    send(
        tx,
        Part::Trailer(BackupTrailer {
            length: summary.length,
            sha256: hex_digest(&summary.digest),
        }),
    )?;
    Ok(())
}

fn send(tx: &mpsc::Sender<Result<SaveSnapshotResponse, Status>>, part: Part) -> io::Result<()> {
    tx.blocking_send(Ok(SaveSnapshotResponse { part: Some(part) }))
        .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
}

/// A writer that sends what it is given as `chunk` messages of at most [`CHUNK`] bytes.
struct Chunks<'t> {
    tx: &'t mpsc::Sender<Result<SaveSnapshotResponse, Status>>,
    buf: Vec<u8>,
    shutdown: CancellationToken,
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
        if self.shutdown.is_cancelled() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "the node is shutting down",
            ));
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        send(self.tx, Part::Chunk(chunk))
    }
}

/// The header as the wire carries it.
fn wire_header(header: &BackupHeader) -> WireHeader {
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
        format_version: idem_store::BACKUP_VERSION,
        group: header.group,
        applied_index: header.index(),
        applied_term: header.term(),
        node_id: header.node_id,
        members,
        taken_at_ms: header.taken_at_ms,
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
