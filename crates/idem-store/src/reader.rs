//! Read access to the committed state for the API layer, without going through Raft.
//!
//! Everything here reads what the local state machine has applied; whether that is recent
//! enough is the caller's decision (a read index first for linearizable reads, or none for
//! replays of immutable terminal records, docs/design.md §3). Reads are short, bounded RocksDB
//! lookups and may run on the async executor; very large scans belong on the blocking pool.
//! [`StateReader::subscribe`] lets a caller wait for the state machine to reach an index.
//!
//! The group's placement is not read from RocksDB: every routed call consults it, and with
//! many bound tenants decoding it is O(tenants). The state machine publishes it in memory
//! whenever apply or a snapshot install changes it, before the applied index moves, so a
//! read after a barrier sees the placement of that index or later.

use std::sync::Arc;

use idem_core::store::{ExpiryKey, Meta};
use idem_core::{AuditEntry, OperationId, Placement, Record, RecordKey, Timestamp};
use tokio::sync::watch;

use crate::db::Db;
use crate::error::StoreError;
use crate::state::RocksState;
use crate::state_machine::{read_applied, read_membership};
use crate::types::{LogId, StoredMembership};

/// A cheap, cloneable reader of the committed (applied) state.
#[derive(Clone)]
pub struct StateReader {
    db: Arc<Db>,
    state: RocksState,
    applied: watch::Receiver<u64>,
    placement: watch::Receiver<Arc<Placement>>,
}

impl StateReader {
    /// A reader over `db` that follows the applied index on `applied`
    /// and the placement published on `placement`.
    pub(crate) fn new(
        db: Arc<Db>,
        applied: watch::Receiver<u64>,
        placement: watch::Receiver<Arc<Placement>>,
    ) -> Self {
        StateReader {
            state: RocksState::new(db.clone()),
            db,
            applied,
            placement,
        }
    }

    /// The record of a scope and key.
    pub fn record(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        self.state.get_record(key)
    }

    /// The record of an operation id (through the operation-id index).
    pub fn operation(&self, id: &OperationId) -> Result<Option<Record>, StoreError> {
        let Some(key) = self.state.get_operation(id)? else {
            return Ok(None);
        };
        // The key may have been expired and claimed again between the two reads.
        Ok(self
            .state
            .get_record(&key)?
            .filter(|record| record.operation_id == *id))
    }

    /// Records whose encoded key starts with `prefix` and sorts strictly after `after`, in
    /// key order, at most `limit` (see [`RecordKey::subject_prefix`]).
    pub fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        self.state.get_scan(prefix, after, limit)
    }

    /// Expiry-index entries due at `now`, oldest first, at most `limit` (for the leader's
    /// sweep, to decide whether an `Expire` command is worth proposing).
    pub fn due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<(ExpiryKey, RecordKey)>, StoreError> {
        self.state.get_due(now, limit)
    }

    /// Audit entries with `seq >= from`, in order, at most `limit`.
    pub fn audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.state.get_audit(from, limit)
    }

    /// The core metadata: replicated clock, next audit sequence number.
    pub fn meta(&self) -> Result<Meta, StoreError> {
        self.state.get_meta()
    }

    /// The group's placement state as applied here: the cluster configuration (global
    /// group) or the region group's home, admitted tenants and failover.
    pub fn placement(&self) -> Arc<Placement> {
        Arc::clone(&self.placement.borrow())
    }

    /// The last applied log id, `None` before anything was applied.
    pub fn applied(&self) -> Result<Option<LogId>, StoreError> {
        read_applied(&self.db)
    }

    /// The database (for a backup's consistent cut, see the `backup` module).
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The last applied membership config.
    pub fn membership(&self) -> Result<StoredMembership, StoreError> {
        read_membership(&self.db)
    }

    /// The last applied log index (0 before anything was applied), updated after every
    /// applied batch and installed snapshot.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }
}
