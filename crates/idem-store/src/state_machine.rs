//! openraft's state machine: applies committed entries through the core's deterministic
//! `apply`, and owns snapshots.
//!
//! A batch of entries is applied over an [`Overlay`] of the RocksDB state, so each command
//! sees the effects of the ones before it; the overlay's merged write set, the last applied
//! log id and the last membership then go to RocksDB as ONE `WriteBatch` (docs/design.md §4).
//! Responses are sent, and the applied index (and any new placement) is published to
//! readers, only after that write.
//!
//! The batch skips RocksDB's WAL (`Db::write_state`): the entries are already durable in
//! the log, so writing their effects to a second log would only cost CPU and disk. The
//! state reaches disk when RocksDB flushes its memtables, all column families at one point,
//! so the state on disk is always that of one applied id. A crash loses the batches since
//! that flush, and the restart rebuilds them (openraft's start, `get_initial_state`):
//! - when the current snapshot is newer than the state recovered, it is installed first
//!   (the log may have been purged up to it, never past it);
//! - then the entries after the applied id are applied again, up to the committed id the
//!   log store keeps.
//!
//! Any storage error during apply is returned to openraft, which stops the node: a replica
//! never continues from a state that might differ from the others' (docs/design.md §6).
//!
//! Snapshots live on disk (the `snapshot` module); whether one is worth building when
//! openraft's floor policy asks is decided by the `snapshot_policy` module, so that the
//! cost of snapshots per applied entry stays O(1) as the state grows.

use std::io;
use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use idem_core::apply::AppliedMembership;
use idem_core::store::Overlay;
use idem_core::Placement;
use openraft::entry::RaftEntry;
use openraft::storage::{ApplyResponder, EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};
use rocksdb::WriteBatch;
use tokio::sync::watch;

use crate::builder::SnapshotBuilder;
use crate::codec::{APPLIED, MEMBERSHIP};
use crate::db::{blocking, Cf, Db};
use crate::error::StoreError;
use crate::snapshot::SnapshotStore;
use crate::snapshot_policy;
use crate::state::RocksState;
use crate::types::{
    Entry, LogId, NodeInfo, Response, Snapshot, SnapshotData, SnapshotMeta, StoredMembership,
    TypeConfig,
};

/// Most entries applied in one `WriteBatch`.
const MAX_BATCH: usize = 1024;

/// What the state machine publishes to the node's [`StateReader`](crate::StateReader)s.
pub(crate) struct Published {
    /// The last applied index.
    pub(crate) applied: watch::Sender<u64>,
    /// The group's placement, sent whenever it changes (before the index that changed it).
    pub(crate) placement: watch::Sender<Arc<Placement>>,
}

impl Published {
    /// Publishes the placement stored in `db` (after a snapshot replaced the state).
    fn placement_of(&self, db: &Arc<Db>) -> Result<(), StoreError> {
        let placement = RocksState::new(db.clone()).get_placement()?;
        self.placement.send_replace(Arc::new(placement));
        Ok(())
    }
}

/// Largest chunk applied on the state-machine task itself. A small chunk is a few point
/// reads and one unsynced write, less than the hand-off to the blocking pool and back that
/// every acknowledged write would otherwise wait for. Its write never waits on the task:
/// when RocksDB would stall it, it goes to the blocking pool after all.
const INLINE_BATCH: usize = 64;

/// What applying a chunk produced.
struct Applied {
    /// One response per entry.
    responses: Vec<Response>,
    /// The last applied index (`None` for no entries).
    last: Option<u64>,
    /// The group's placement, if the chunk changed it.
    placement: Option<Placement>,
}

/// openraft's state machine over the node's RocksDB.
pub struct StateMachine {
    db: Arc<Db>,
    snapshots: Arc<SnapshotStore>,
    published: Published,
}

impl StateMachine {
    /// A state machine over `db`, publishing applied indexes and placements on `published`.
    pub(crate) fn new(db: Arc<Db>, snapshots: Arc<SnapshotStore>, published: Published) -> Self {
        StateMachine {
            db,
            snapshots,
            published,
        }
    }

    /// A new, empty file in this store's snapshot directory to receive a snapshot into
    /// (then hand it to openraft's `install_full_snapshot`). Deleted when dropped unless
    /// installed.
    pub fn begin_receiving_snapshot(&self) -> Result<SnapshotData, StoreError> {
        self.snapshots.temporary()
    }

    /// Whether a snapshot is worth building now (see the `snapshot_policy` module).
    fn snapshot_due(&self) -> bool {
        let records = match snapshot_policy::estimate_records(&self.db) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(error = %e, "cannot estimate the state size; snapshotting");
                return true;
            }
        };
        let applied = *self.published.applied.borrow();
        snapshot_policy::due(applied, self.snapshots.last_index(), records)
    }

    /// Applies one chunk, then answers its callers.
    async fn apply_chunk(
        &mut self,
        entries: Vec<Entry>,
        responders: Vec<Option<ApplyResponder<TypeConfig>>>,
    ) -> Result<(), StoreError> {
        let db = self.db.clone();
        let applied = if entries.len() <= INLINE_BATCH {
            let (applied, batch) = prepare(&db, entries)?;
            if let Some(batch) = db.write_state_unless_stalled(batch)? {
                blocking(move || db.write_state(batch)).await?;
            }
            applied
        } else {
            blocking(move || {
                let (applied, batch) = prepare(&db, entries)?;
                db.write_state(batch)?;
                Ok(applied)
            })
            .await?
        };
        if let Some(placement) = applied.placement {
            self.published.placement.send_replace(Arc::new(placement));
        }
        if let Some(last) = applied.last {
            self.published.applied.send_replace(last);
        }
        for (responder, response) in responders.into_iter().zip(applied.responses) {
            if let Some(responder) = responder {
                responder.send(response);
            }
        }
        Ok(())
    }
}

/// The last applied log id stored in `sm_meta`.
pub(crate) fn read_applied(db: &Db) -> Result<Option<LogId>, StoreError> {
    db.get(Cf::SmMeta, APPLIED)
}

/// The last applied membership stored in `sm_meta`.
pub(crate) fn read_membership(db: &Db) -> Result<StoredMembership, StoreError> {
    Ok(db.get(Cf::SmMeta, MEMBERSHIP)?.unwrap_or_default())
}

/// Applies `entries` in order: their answers, and their effects as one batch to write.
fn prepare(db: &Arc<Db>, entries: Vec<Entry>) -> Result<(Applied, WriteBatch), StoreError> {
    let state = RocksState::new(db.clone());
    let mut overlay = Overlay::new(&state);
    let mut responses = Vec::with_capacity(entries.len());
    let mut last = None;
    let mut membership = None;
    for entry in entries {
        let log_id = entry.log_id();
        let outcome = match entry.payload {
            EntryPayload::Blank => None,
            EntryPayload::Normal(request) => Some(idem_core::apply(
                &mut overlay,
                &request.command,
                request.stamp,
            )?),
            EntryPayload::Membership(config) => {
                audit_membership(&mut overlay, log_id.index(), &config)?;
                membership = Some(StoredMembership::new(Some(log_id), config));
                None
            }
        };
        responses.push(Response { outcome });
        last = Some(log_id);
    }
    let Some(last) = last else {
        let nothing = Applied {
            responses,
            last: None,
            placement: None,
        };
        return Ok((nothing, WriteBatch::default()));
    };
    let writes = overlay.into_writes();
    let placement = writes.placement.clone();
    let mut batch = WriteBatch::default();
    state.stage(&mut batch, writes)?;
    db.put(&mut batch, Cf::SmMeta, APPLIED, &last)?;
    if let Some(membership) = membership {
        db.put(&mut batch, Cf::SmMeta, MEMBERSHIP, &membership)?;
    }
    let applied = Applied {
        responses,
        last: Some(last.index()),
        placement,
    };
    Ok((applied, batch))
}

/// Writes the audit entry of an applied membership, when a pending intent asked for it
/// (`idem_core::apply::membership`): in the overlay, so in the same batch as the
/// membership itself. A joint membership is a step of a change, not its result.
fn audit_membership(
    overlay: &mut Overlay<'_, RocksState>,
    index: u64,
    config: &openraft::Membership<u64, NodeInfo>,
) -> Result<(), StoreError> {
    if config.get_joint_config().len() != 1 {
        return Ok(());
    }
    let applied = AppliedMembership {
        index,
        voters: config.voter_ids().collect(),
        learners: config.learner_ids().collect(),
    };
    idem_core::apply::membership(overlay, &applied)?;
    Ok(())
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        Ok((read_applied(&self.db)?, read_membership(&self.db)?))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + OptionalSend,
    {
        loop {
            let mut chunk = Vec::new();
            let mut responders = Vec::new();
            while chunk.len() < MAX_BATCH {
                let Some((entry, responder)) = entries.try_next().await? else {
                    break;
                };
                chunk.push(entry);
                responders.push(responder);
            }
            if chunk.is_empty() {
                return Ok(());
            }
            let full = chunk.len() == MAX_BATCH;
            self.apply_chunk(chunk, responders).await.inspect_err(|e| {
                tracing::error!(error = %e, "apply failed: stopping rather than diverging");
            })?;
            if !full {
                return Ok(());
            }
        }
    }

    async fn try_create_snapshot_builder(&mut self, force: bool) -> Option<Self::SnapshotBuilder> {
        if force || self.snapshot_due() {
            Some(SnapshotBuilder::new(self.snapshots.clone()))
        } else {
            tracing::debug!(
                "snapshot deferred: too few entries since the last one for the state size"
            );
            None
        }
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder::new(self.snapshots.clone())
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotData,
    ) -> Result<(), io::Error> {
        let snapshots = self.snapshots.clone();
        let owned = meta.clone();
        blocking(move || snapshots.install(&owned, snapshot)).await?;
        tracing::info!(last_log_id = ?meta.last_log_id, "installed a snapshot");
        self.published.placement_of(&self.db)?;
        let index = meta.last_log_id.as_ref().map_or(0, |id| id.index());
        self.published.applied.send_replace(index);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        let snapshots = self.snapshots.clone();
        Ok(blocking(move || snapshots.current()).await?)
    }
}
