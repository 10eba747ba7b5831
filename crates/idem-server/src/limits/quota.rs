//! The per-tenant cap on non-terminal records (`QUOTA_EXCEEDED`).
//!
//! The store keeps no per-tenant counters (apply would have to maintain and snapshot
//! them), so the count comes from a bounded scan of the tenant's records on this node's
//! replica, reused for [`RESCAN_AFTER`]. Between scans the node keeps the count exact for
//! what it decides itself: a claim that may create a record reserves one slot under a lock
//! (so concurrent claims on one node cannot overshoot), a claim that did not create one
//! gives it back, and a record this node finished (completed, failed for good, cancelled)
//! frees one. Records created or finished through other nodes show up at the next scan.
//!
//! Only claims that could create a record are checked: retries, takeovers and replays of
//! existing records, and every owner mutation, pass whatever the count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use idem_core::RecordKey;
use idem_proto::reason;

use super::settings::LimitsConfig;
use crate::backend::{Backend, RequestError};

/// How long a scanned count is reused.
pub const RESCAN_AFTER: Duration = Duration::from_secs(2);
/// Most records one scan reads; a tenant with more records (terminal ones included) is
/// counted from the first `SCAN_LIMIT` only (docs/limits.md).
pub const SCAN_LIMIT: usize = 200_000;
/// Records read per scan page.
const PAGE: usize = 1000;

/// A tenant's count: scanned, plus what this node decided since.
#[derive(Clone, Copy, Debug)]
struct Count {
    scanned: u64,
    delta: i64,
    at: Instant,
}

impl Count {
    fn now(self) -> u64 {
        self.scanned.saturating_add_signed(self.delta)
    }
}

/// The non-terminal record counts of the tenants that have a cap.
pub struct ActiveQuota {
    config: Arc<LimitsConfig>,
    counts: Mutex<HashMap<String, Count>>,
}

/// A slot reserved by [`ActiveQuota::reserve`]; give it back with
/// [`ActiveQuota::release`] when the claim did not create a record.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub struct Slot {
    tenant: Option<String>,
}

impl ActiveQuota {
    /// Caps from `config`.
    pub fn new(config: Arc<LimitsConfig>) -> Self {
        ActiveQuota {
            config,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Reserves room for one more non-terminal record of `tenant`, or refuses with
    /// `QUOTA_EXCEEDED` when it already has its cap.
    pub async fn reserve(
        &self,
        tenant: &str,
        backend: &Arc<dyn Backend>,
    ) -> Result<Slot, RequestError> {
        let cap = self.config.max_active_of(tenant);
        if cap == 0 {
            return Ok(Slot { tenant: None });
        }
        let fresh = self
            .lock()
            .get(tenant)
            .is_some_and(|c| c.at.elapsed() < RESCAN_AFTER);
        if !fresh {
            let scanned = scan(Arc::clone(backend), tenant.to_owned()).await?;
            self.lock().insert(
                tenant.to_owned(),
                Count {
                    scanned,
                    delta: 0,
                    at: Instant::now(),
                },
            );
        }
        let mut counts = self.lock();
        let count = counts.entry(tenant.to_owned()).or_insert(Count {
            scanned: 0,
            delta: 0,
            at: Instant::now(),
        });
        if count.now() >= cap {
            return Err(RequestError::exhausted(
                reason::QUOTA_EXCEEDED,
                format!("the tenant has {cap} unfinished records, its quota; finish some first"),
                None,
            ));
        }
        count.delta += 1;
        Ok(Slot {
            tenant: Some(tenant.to_owned()),
        })
    }

    /// Gives a reserved slot back: the claim did not create a record.
    pub fn release(&self, slot: Slot) {
        if let Some(tenant) = slot.tenant {
            self.adjust(&tenant, -1);
        }
    }

    /// A record of `tenant` became terminal through this node.
    pub fn finished(&self, tenant: &str) {
        self.adjust(tenant, -1);
    }

    fn adjust(&self, tenant: &str, by: i64) {
        if let Some(count) = self.lock().get_mut(tenant) {
            count.delta += by;
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Count>> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Counts the non-terminal records among the first [`SCAN_LIMIT`] records of `tenant`, on
/// a blocking thread.
async fn scan(backend: Arc<dyn Backend>, tenant: String) -> Result<u64, RequestError> {
    tokio::task::spawn_blocking(move || {
        let prefix = RecordKey::tenant_prefix(&tenant);
        let mut active = 0;
        let mut read = 0;
        let mut after: Option<Vec<u8>> = None;
        while read < SCAN_LIMIT {
            let page = backend.scan(&prefix, after.as_deref(), PAGE)?;
            read += page.len();
            active += page.iter().filter(|r| !r.state.is_terminal()).count() as u64;
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.key.encode()),
                _ => break,
            }
        }
        Ok(active)
    })
    .await
    .map_err(|e| RequestError::Internal(format!("quota scan failed: {e}")))?
}
