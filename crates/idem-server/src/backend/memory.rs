//! An in-memory [`Backend`] for unit tests of the services and the sweep: the core's `MemoryStore` and
//! `apply`, a hand-driven clock, and switches that simulate a lost leader or a write timeout.
//! No Raft, no RocksDB: it tests what the services decide, not how commands are replicated.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use idem_core::placement::{GroupId, Placement, GLOBAL_GROUP};
use idem_core::{
    apply, AuditEntry, Command, MemoryStore, OperationId, Outcome, Record, RecordKey, StateStore,
    Timestamp,
};
use tokio::sync::watch;

use super::{Backend, RaftStatus, RequestError};

/// The in-memory backend.
pub(crate) struct MemoryBackend {
    store: Mutex<MemoryStore>,
    clock: AtomicU64,
    applied: watch::Sender<u64>,
    /// When set, writes and barriers fail as a lost leader would.
    pub not_leader: AtomicBool,
    /// When set, writes are applied but answered as timed out.
    pub lose_replies: AtomicBool,
}

impl MemoryBackend {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(MemoryBackend {
            store: Mutex::new(MemoryStore::new()),
            clock: AtomicU64::new(1_700_000_000_000),
            applied: watch::channel(0).0,
            not_leader: AtomicBool::new(false),
            lose_replies: AtomicBool::new(false),
        })
    }

    /// Moves the clock forward.
    pub(crate) fn advance(&self, by: Duration) {
        self.clock
            .fetch_add(by.as_millis() as u64, Ordering::SeqCst);
        // Wake long polls, as a heartbeat-driven apply would.
        self.applied.send_modify(|_| {});
    }

    fn store(&self) -> std::sync::MutexGuard<'_, MemoryStore> {
        self.store.lock().unwrap()
    }

    fn check_leader(&self) -> Result<(), RequestError> {
        if self.not_leader.load(Ordering::SeqCst) {
            return Err(RequestError::NotLeader {
                leader_id: Some(2),
                leader_addr: Some("127.0.0.2:7400".into()),
            });
        }
        Ok(())
    }
}

fn internal(e: idem_core::StoreError) -> RequestError {
    RequestError::Internal(e.to_string())
}

impl Backend for MemoryBackend {
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, RequestError>> {
        Box::pin(async move {
            self.check_leader()?;
            command.validate()?;
            let stamp = Timestamp(self.clock.load(Ordering::SeqCst));
            let outcome = apply(&mut *self.store(), &command, stamp).map_err(internal)?;
            self.applied.send_modify(|index| *index += 1);
            if self.lose_replies.load(Ordering::SeqCst) {
                return Err(RequestError::OutcomeUnknown(
                    "simulated write timeout".into(),
                ));
            }
            Ok(outcome)
        })
    }

    fn read_barrier(&self) -> BoxFuture<'_, Result<(), RequestError>> {
        Box::pin(async move { self.check_leader() })
    }

    fn audit(
        &self,
        group: GroupId,
        from: u64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, RequestError> {
        if group != GLOBAL_GROUP {
            return Err(super::no_such_group(group));
        }
        self.store().audit(from, limit).map_err(internal)
    }

    fn record(&self, key: &RecordKey) -> Result<Option<Record>, RequestError> {
        self.store().record(key).map_err(internal)
    }

    fn global_placement(&self) -> Arc<Placement> {
        Arc::new(self.store().placement().unwrap_or_default())
    }

    fn operation(&self, id: &OperationId) -> Result<Option<Record>, RequestError> {
        let store = self.store();
        match store.operation(id).map_err(internal)? {
            Some(key) => store.record(&key).map_err(internal),
            None => Ok(None),
        }
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, RequestError> {
        self.store().scan(prefix, after, limit).map_err(internal)
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, RequestError> {
        self.store()
            .due(now, limit)
            .map(|due| due.len())
            .map_err(internal)
    }

    fn now(&self) -> Timestamp {
        Timestamp(self.clock.load(Ordering::SeqCst))
    }

    fn applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    fn raft_status(&self) -> RaftStatus {
        let leader = !self.not_leader.load(Ordering::SeqCst);
        RaftStatus {
            node_id: 1,
            leader_id: Some(if leader { 1 } else { 2 }),
            running: true,
            applied_index: *self.applied.borrow(),
            ..RaftStatus::default()
        }
    }
}
