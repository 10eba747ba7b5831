//! `Admin.TopKeys` and `Admin.TopTenants`: the heaviest keys and tenants of this node's
//! recent claims ([`crate::signals::HotKeys`]).
//!
//! Authorised like `ListOperations`: an operator of the tenant asked for, and an operator
//! of every tenant for a view that spans tenants. Each answer is bounded ([`MAX_LIMIT`]
//! rows) and names keys only by their keyed hash.

use std::time::Instant;

use idem_core::scope::validate_tenant;
use idem_proto::v1 as pb;

use crate::api::ApiContext;
use crate::auth::{Principal, Role};
use crate::backend::RequestError;
use crate::signals::hot_keys::HALF_LIFE;
use crate::signals::{HotKey, Signal, TenantActivity};

/// Rows of an answer when the request names no limit.
pub const DEFAULT_LIMIT: u32 = 20;
/// Most rows of an answer.
pub const MAX_LIMIT: u32 = 100;

/// `TopKeys`.
pub(crate) fn top_keys(
    ctx: &ApiContext,
    caller: Result<Principal, RequestError>,
    req: pb::TopKeysRequest,
) -> Result<pb::TopKeysResponse, RequestError> {
    let caller = caller?;
    let tenant = (!req.tenant.is_empty()).then_some(req.tenant.as_str());
    match tenant {
        Some(tenant) => {
            validate_tenant(tenant)?;
            caller.require(Role::Operator, Some(tenant))?;
        }
        None => caller.require_all_tenants(Role::Operator)?,
    }
    let limit = limit(req.limit)?;
    let keys = ctx.hot_keys.top_keys(tenant, limit, Instant::now());
    Ok(pb::TopKeysResponse {
        keys: keys.into_iter().map(hot_key_to_proto).collect(),
        half_life_ms: half_life_ms(),
    })
}

/// `TopTenants`.
pub(crate) fn top_tenants(
    ctx: &ApiContext,
    caller: Result<Principal, RequestError>,
    req: pb::TopTenantsRequest,
) -> Result<pb::TopTenantsResponse, RequestError> {
    caller?.require_all_tenants(Role::Operator)?;
    let limit = limit(req.limit)?;
    let tenants = ctx.hot_keys.top_tenants(limit, Instant::now());
    Ok(pb::TopTenantsResponse {
        tenants: tenants.into_iter().map(activity_to_proto).collect(),
        half_life_ms: half_life_ms(),
    })
}

fn limit(requested: u32) -> Result<usize, RequestError> {
    match requested {
        0 => Ok(DEFAULT_LIMIT as usize),
        n if n <= MAX_LIMIT => Ok(n as usize),
        n => Err(RequestError::argument(format!(
            "limit {n} is above {MAX_LIMIT}"
        ))),
    }
}

fn half_life_ms() -> u64 {
    u64::try_from(HALF_LIFE.as_millis()).unwrap_or(u64::MAX)
}

fn hot_key_to_proto(key: HotKey) -> pb::HotKey {
    pb::HotKey {
        tenant: key.tenant,
        endpoint: key.endpoint,
        key_hash: key.key_hash,
        claims: key.claims,
        overcount: key.overcount,
    }
}

fn activity_to_proto(activity: TenantActivity) -> pb::TenantActivity {
    let signal = |s: Signal| activity.signals[s as usize];
    pb::TenantActivity {
        claims: activity.claims,
        replays: signal(Signal::Replay),
        mismatches: signal(Signal::Mismatch),
        in_flight: signal(Signal::InFlight),
        tenant: activity.tenant,
    }
}
