//! An in-memory [`Backend`] for unit tests of the services: the core's `MemoryStore` and
//! `apply`, a hand-driven clock, and switches that simulate a lost leader or a write timeout.
//! No Raft, no RocksDB: it tests what the services decide, not how commands are replicated.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use idem_core::{
    apply, Command, MemoryStore, OperationId, Outcome, Record, RecordKey, StateStore, Timestamp,
};
use idem_proto::v1 as pb;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::convert::BodyLimits;
use crate::api::{ApiContext, ApiError, Backend, RaftStatus};
use crate::metrics::Metrics;
use crate::policy::Policies;
use crate::stats::StatsCache;

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

    fn check_leader(&self) -> Result<(), ApiError> {
        if self.not_leader.load(Ordering::SeqCst) {
            return Err(ApiError::NotLeader {
                leader_id: Some(2),
                leader_addr: Some("127.0.0.2:7400".into()),
            });
        }
        Ok(())
    }
}

fn internal(e: idem_core::StoreError) -> ApiError {
    ApiError::Internal(e.to_string())
}

impl Backend for MemoryBackend {
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, ApiError>> {
        Box::pin(async move {
            self.check_leader()?;
            command.validate()?;
            let stamp = Timestamp(self.clock.load(Ordering::SeqCst));
            let outcome = apply(&mut *self.store(), &command, stamp).map_err(internal)?;
            self.applied.send_modify(|index| *index += 1);
            if self.lose_replies.load(Ordering::SeqCst) {
                return Err(ApiError::OutcomeUnknown("simulated write timeout".into()));
            }
            Ok(outcome)
        })
    }

    fn read_barrier(&self) -> BoxFuture<'_, Result<(), ApiError>> {
        Box::pin(async move { self.check_leader() })
    }

    fn record(&self, key: &RecordKey) -> Result<Option<Record>, ApiError> {
        self.store().record(key).map_err(internal)
    }

    fn operation(&self, id: &OperationId) -> Result<Option<Record>, ApiError> {
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
    ) -> Result<Vec<Record>, ApiError> {
        self.store().scan(prefix, after, limit).map_err(internal)
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, ApiError> {
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

/// A service context over `backend` with default policies and small body limits.
pub(crate) fn context(backend: Arc<MemoryBackend>, policies: Policies) -> Arc<ApiContext> {
    Arc::new(ApiContext {
        backend,
        policies: Arc::new(policies),
        limits: BodyLimits {
            max_body_bytes: 1024,
            max_canonical_bytes: 64 * 1024,
        },
        metrics: Arc::new(Metrics::new()),
        shutdown: CancellationToken::new(),
        stats: Arc::new(StatsCache::default()),
        region: "local".into(),
        zone: "local-a".into(),
    })
}

/// The scope every service test claims in.
pub(crate) fn scope() -> pb::Scope {
    pb::Scope {
        tenant: "acme".into(),
        environment: "prod".into(),
        actor: "user-42".into(),
        endpoint: "POST /v1/charges".into(),
    }
}

/// A `jcs-sha256/v1` fingerprint whose digest is 32 times `byte`.
pub(crate) fn fingerprint(byte: u8) -> pb::Fingerprint {
    pb::Fingerprint {
        algorithm: "jcs-sha256/v1".into(),
        schema_version: 1,
        digest: vec![byte; 32],
    }
}

/// A claim of `key` in [`scope`] by `holder`, fingerprinted with [`fingerprint`]`(byte)`.
pub(crate) fn claim_req(key: &str, holder: &str, byte: u8) -> pb::ClaimRequest {
    pb::ClaimRequest {
        scope: Some(scope()),
        key: key.into(),
        fingerprints: vec![fingerprint(byte)],
        holder: holder.into(),
        ..Default::default()
    }
}

/// A complete of `key` in [`scope`] at `fence` with a small charge result.
pub(crate) fn complete_req(key: &str, fence: u64) -> pb::CompleteRequest {
    pb::CompleteRequest {
        scope: Some(scope()),
        key: key.into(),
        fence,
        result: Some(pb::StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            fields: std::collections::HashMap::from([("amount".to_owned(), "100".to_owned())]),
            ..Default::default()
        }),
    }
}
