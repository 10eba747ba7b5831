//! Per-tenant rate limits: one token bucket per tenant and kind of call, on this node.
//!
//! Why per tenant and not per key: a key is not a quota bypass. Retries of one key cost a
//! token each like new keys do, so a client stuck in a retry loop spends its own tenant's
//! budget and nobody else's. Replays (a claim answered from a terminal record) cost a
//! fraction of a token: they are the cheap, expected case of a retry, but not free.
//!
//! Buckets live in memory on the node that receives the call (before any forwarding), so
//! a tenant spread over N nodes gets up to N times its rate; see docs/limits.md.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use idem_proto::reason;

use super::bucket::{TokenBucket, MILLI};
use super::settings::{LimitsConfig, Rate};
use crate::backend::RequestError;

/// Above this many tracked buckets, full (idle) ones are dropped: a full bucket is
/// exactly what a new one would be, so nothing is forgotten.
const PRUNE_ABOVE: usize = 10_000;

/// What a call spends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// A claim that may create or take over a record: one claim token.
    Claim,
    /// A claim answered from a terminal record: `replay_cost_milli` of a claim token.
    Replay,
    /// An owner mutation: one mutation token.
    Mutation,
}

impl CallKind {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            CallKind::Claim => "claim",
            CallKind::Replay => "replay",
            CallKind::Mutation => "mutation",
        }
    }

    fn bucket(self) -> Bucket {
        match self {
            CallKind::Claim | CallKind::Replay => Bucket::Claims,
            CallKind::Mutation => Bucket::Mutations,
        }
    }
}

/// The bucket a call draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Bucket {
    Claims,
    Mutations,
}

/// The per-tenant token buckets of a node.
pub struct TenantRates {
    config: Arc<LimitsConfig>,
    buckets: Mutex<HashMap<(String, Bucket), TokenBucket>>,
}

impl TenantRates {
    /// Buckets for the rates of `config`.
    pub fn new(config: Arc<LimitsConfig>) -> Self {
        TenantRates {
            config,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Spends what a `kind` call of `tenant` costs, or refuses it with `RATE_LIMITED` and
    /// the time until the tokens are back.
    pub fn charge(&self, tenant: &str, kind: CallKind) -> Result<(), RequestError> {
        let rate = self.rate_of(tenant, kind.bucket());
        if !rate.is_limited() {
            return Ok(());
        }
        let cost = match kind {
            CallKind::Replay => self.config.replay_cost_milli,
            CallKind::Claim | CallKind::Mutation => MILLI,
        };
        let now = Instant::now();
        let mut buckets = self.lock();
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, bucket| !bucket.is_full(now));
        }
        let bucket = buckets
            .entry((tenant.to_owned(), kind.bucket()))
            .or_insert_with(|| TokenBucket::new(rate.rate, rate.effective_burst(), now));
        bucket
            .take(cost, now)
            .map_err(|wait| limited(kind, rate, wait))
    }

    /// Gives back the difference between a claim and a replay: the claim went to the
    /// leader and was answered from a terminal record there.
    pub fn refund_replay(&self, tenant: &str) {
        let refund = MILLI.saturating_sub(self.config.replay_cost_milli);
        if let Some(bucket) = self.lock().get_mut(&(tenant.to_owned(), Bucket::Claims)) {
            bucket.refund(refund, Instant::now());
        }
    }

    fn rate_of(&self, tenant: &str, bucket: Bucket) -> Rate {
        match bucket {
            Bucket::Claims => self.config.claims_of(tenant),
            Bucket::Mutations => self.config.mutations_of(tenant),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, Bucket), TokenBucket>> {
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn limited(kind: CallKind, rate: Rate, wait: Duration) -> RequestError {
    let what = match kind.bucket() {
        Bucket::Claims => "claims",
        Bucket::Mutations => "owner mutations",
    };
    RequestError::exhausted(
        reason::RATE_LIMITED,
        format!(
            "the tenant's {what} are limited to {}/s (burst {}); retry later",
            rate.rate,
            rate.effective_burst()
        ),
        Some(wait),
    )
}

#[cfg(test)]
mod tests {
    use super::super::settings::TenantOverride;
    use super::*;

    fn rates(claims: u64, burst: u64) -> TenantRates {
        let mut config = LimitsConfig {
            claims: Rate {
                rate: claims,
                burst,
            },
            ..LimitsConfig::default()
        };
        config.tenants.insert(
            "vip".into(),
            TenantOverride {
                claims: Some(Rate {
                    rate: 1000,
                    burst: 1000,
                }),
                ..TenantOverride::default()
            },
        );
        TenantRates::new(Arc::new(config))
    }

    #[test]
    fn tenants_have_their_own_buckets_and_overrides() {
        let rates = rates(1, 3);
        for _ in 0..3 {
            rates.charge("acme", CallKind::Claim).unwrap();
        }
        let refused = rates.charge("acme", CallKind::Claim).unwrap_err();
        assert_eq!(refused.reason(), reason::RATE_LIMITED);
        assert!(matches!(
            refused,
            RequestError::Exhausted {
                retry_after: Some(_),
                ..
            }
        ));
        // Another tenant is untouched; the override gives "vip" a larger burst.
        rates.charge("globex", CallKind::Claim).unwrap();
        for _ in 0..100 {
            rates.charge("vip", CallKind::Claim).unwrap();
        }
        // Mutations draw from their own bucket.
        rates.charge("acme", CallKind::Mutation).unwrap();
    }

    #[test]
    fn replays_cost_a_tenth_and_a_leader_replay_is_refunded() {
        let rates = rates(1, 1);
        for _ in 0..10 {
            rates.charge("acme", CallKind::Replay).unwrap();
        }
        assert!(rates.charge("acme", CallKind::Replay).is_err());

        let rates = super::tests::rates(1, 1);
        rates.charge("acme", CallKind::Claim).unwrap();
        rates.refund_replay("acme");
        for _ in 0..9 {
            rates.charge("acme", CallKind::Replay).unwrap();
        }
        assert!(rates.charge("acme", CallKind::Replay).is_err());
    }

    #[test]
    fn a_zero_rate_is_unlimited() {
        let rates = rates(0, 0);
        for _ in 0..10_000 {
            rates.charge("acme", CallKind::Claim).unwrap();
        }
    }
}
