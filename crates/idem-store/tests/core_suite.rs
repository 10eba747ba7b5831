//! The core's semantic suite against the RocksDB-backed `StateStore`.

use idem_core::store::{ExpiryKey, Meta, WriteSet};
use idem_core::{
    AuditEntry, OperationId, Placement, Record, RecordKey, StateStore, StoreError, Timestamp,
};
use idem_store::RocksState;
use tempfile::TempDir;

/// A `RocksState` in a temporary directory that lives exactly as long as the store.
struct TempState {
    // Declared first: the database closes before the directory is removed.
    state: RocksState,
    _dir: TempDir,
}

impl TempState {
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let state = RocksState::open(dir.path()).unwrap();
        TempState { state, _dir: dir }
    }
}

impl StateStore for TempState {
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        self.state.record(key)
    }

    fn operation(&self, id: &OperationId) -> Result<Option<RecordKey>, StoreError> {
        self.state.operation(id)
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<(ExpiryKey, RecordKey)>, StoreError> {
        self.state.due(now, limit)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        self.state.scan(prefix, after, limit)
    }

    fn audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.state.audit(from, limit)
    }

    fn meta(&self) -> Result<Meta, StoreError> {
        self.state.meta()
    }

    fn placement(&self) -> Result<Placement, StoreError> {
        self.state.placement()
    }

    fn commit(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        self.state.commit(writes)
    }
}

idem_core::state_store_suite!(TempState::new());
