//! What the Idempotency handlers ask before proposing: may this tenant make this call now
//! (rate), and may it create another unfinished record (quota)? Every refusal is counted
//! in `idem_limit_refusals_total{reason,kind}`.

use std::sync::Arc;

use idem_core::{ClaimKind, Outcome};

use super::quota::{ActiveQuota, Slot};
use super::rate::{CallKind, TenantRates};
use super::settings::LimitsConfig;
use crate::backend::{Backend, RequestError};
use crate::metrics::Metrics;

/// The per-tenant limits of a node.
pub struct TenantLimits {
    rates: TenantRates,
    quota: ActiveQuota,
    metrics: Arc<Metrics>,
}

impl TenantLimits {
    /// The limits of `config`, counting refusals in `metrics`.
    pub fn new(config: LimitsConfig, metrics: Arc<Metrics>) -> Self {
        let config = Arc::new(config);
        TenantLimits {
            rates: TenantRates::new(Arc::clone(&config)),
            quota: ActiveQuota::new(config),
            metrics,
        }
    }

    /// Spends the tokens of a `kind` call of `tenant` (`RATE_LIMITED` when there are none).
    pub fn charge(&self, tenant: &str, kind: CallKind) -> Result<(), RequestError> {
        self.rates
            .charge(tenant, kind)
            .inspect_err(|e| self.count(e, kind.label()))
    }

    /// Admits a claim that goes to the leader: one claim token, and when no record of the
    /// key is known here (`new_record`), room for one more unfinished record. Pass the
    /// returned slot to [`TenantLimits::settle_claim`] with the outcome.
    pub async fn admit_claim(
        &self,
        tenant: &str,
        new_record: bool,
        backend: &Arc<dyn Backend>,
    ) -> Result<Option<Slot>, RequestError> {
        self.charge(tenant, CallKind::Claim)?;
        if !new_record {
            return Ok(None);
        }
        self.quota
            .reserve(tenant, backend)
            .await
            .map(Some)
            .inspect_err(|e| self.count(e, "claim"))
    }

    /// Settles an admitted claim: the quota slot is kept only if the claim acquired a new
    /// record, and a claim answered from a terminal record costs only a replay.
    pub fn settle_claim(
        &self,
        tenant: &str,
        slot: Option<Slot>,
        proposed: &Result<Outcome, RequestError>,
    ) {
        let claimed = match proposed {
            Ok(Outcome::Claim(outcome)) => Some(outcome),
            _ => None,
        };
        let created = claimed.is_some_and(|o| o.kind == ClaimKind::Acquired);
        if let Some(slot) = slot.filter(|_| !created) {
            self.quota.release(slot);
        }
        if claimed.is_some_and(|o| o.record.state.is_terminal()) {
            self.rates.refund_replay(tenant);
        }
    }

    /// Settles an owner mutation: a record it made terminal frees a quota slot.
    pub fn settle_mutation(&self, tenant: &str, proposed: &Result<Outcome, RequestError>) {
        if let Ok(Outcome::Record(record)) = proposed {
            if record.state.is_terminal() {
                self.quota.finished(tenant);
            }
        }
    }

    fn count(&self, error: &RequestError, kind: &str) {
        self.metrics
            .limit_refusals
            .with_label_values(&[error.reason(), kind])
            .inc();
    }
}
