//! The heaviest keys and tenants a node saw recently (`Admin.TopKeys`, `TopTenants`), as the
//! SDK shows them. Counts decay (they halve every `half_life`), so they are rates more than
//! totals; keys appear only as their keyed hash, the `key_hash` of the node's log lines.

use std::time::Duration;

use idem_proto::v1 as pb;

/// A key among the heaviest.
#[derive(Clone, Debug, PartialEq)]
pub struct HotKey {
    /// Its tenant.
    pub tenant: String,
    /// Its scope's endpoint.
    pub endpoint: String,
    /// The keyed hash of the key (as in log lines).
    pub key_hash: String,
    /// Decayed claims counted for it: an upper bound.
    pub claims: f64,
    /// How much of `claims` may belong to keys it replaced in the node's sketch.
    pub overcount: f64,
}

/// A tenant's recent claims by what they reveal (decayed counts).
#[derive(Clone, Debug, PartialEq)]
pub struct TenantActivity {
    /// The tenant.
    pub tenant: String,
    /// Every claim.
    pub claims: f64,
    /// Claims answered from a stored result (retries of finished work).
    pub replays: f64,
    /// FINGERPRINT_MISMATCH: one key reused for a different request.
    pub mismatches: f64,
    /// IN_PROGRESS: retries while the first attempt still ran.
    pub in_flight: f64,
}

/// One reading of a node's sketch: its rows, heaviest first, and the counts' half-life.
#[derive(Clone, Debug, PartialEq)]
pub struct Top<T> {
    /// The rows, heaviest first.
    pub rows: Vec<T>,
    /// How long a count takes to halve without new claims.
    pub half_life: Duration,
}

impl Top<HotKey> {
    pub(crate) fn from_proto(answer: pb::TopKeysResponse) -> Self {
        let rows = answer
            .keys
            .into_iter()
            .map(|k| HotKey {
                tenant: k.tenant,
                endpoint: k.endpoint,
                key_hash: k.key_hash,
                claims: k.claims,
                overcount: k.overcount,
            })
            .collect();
        Top {
            rows,
            half_life: Duration::from_millis(answer.half_life_ms),
        }
    }
}

impl Top<TenantActivity> {
    pub(crate) fn from_proto(answer: pb::TopTenantsResponse) -> Self {
        let rows = answer
            .tenants
            .into_iter()
            .map(|t| TenantActivity {
                tenant: t.tenant,
                claims: t.claims,
                replays: t.replays,
                mismatches: t.mismatches,
                in_flight: t.in_flight,
            })
            .collect();
        Top {
            rows,
            half_life: Duration::from_millis(answer.half_life_ms),
        }
    }
}
