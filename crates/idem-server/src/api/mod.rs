//! The public gRPC API of a node: `idem.v1.Idempotency`, `idem.v1.Admin` and `idem.v1.Backup`.
//!
//! The services only translate and decide visibility; the semantics live in `idem-core` and
//! reach them through a [`Backend`]. Every handler runs inside a span named after its method
//! that carries `key_hash` (a short hash, never the key) and `operation_id` once known, and
//! goes through [`observe`], which records latency and errors and turns the [`RequestError`] into
//! its gRPC status.
//!
//! Nothing else in the crate imports this module but the node's wiring: the services sit on
//! top of [`crate::backend`] and never the other way round.

mod admin;
mod attribution;
mod audit;
mod backup;
mod batch;
pub mod decode;
pub mod encode;
mod idempotency;
mod limit;
#[cfg(test)]
mod limits_tests;
mod members;
mod observe;
mod regions;
#[cfg(test)]
mod service_tests;
mod status;
#[cfg(test)]
pub(crate) mod testing;
mod tokens;
mod top;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use admin::AdminService;
pub use attribution::REASON_METADATA_KEY as AUDIT_REASON_METADATA_KEY;
pub use backup::{BackupService, StreamBounds};
pub use batch::MAX_BATCH_CALLS;
pub use idempotency::{claim_response, IdempotencyService};
pub use limit::request_too_large_layer;
pub(crate) use observe::{observe, record_operation};

use crate::api::decode::BodyLimits;
use crate::auth::{AuthMode, Principal};
use crate::backend::Backend;
use crate::backend::RequestError;
use crate::limits::TenantLimits;
use crate::metrics::Metrics;
use crate::policy::Policies;
use crate::signals::HotKeys;
use crate::stats::StatsCache;

/// What both services share.
#[derive(Clone)]
pub struct ApiContext {
    /// The replicated store.
    pub backend: Arc<dyn Backend>,
    /// Default and per-endpoint policies.
    pub policies: Arc<Policies>,
    /// Limits of server-side fingerprinting.
    pub limits: BodyLimits,
    /// The node's metrics.
    pub metrics: Arc<Metrics>,
    /// Cancelled when the node shuts down (ends long polls early).
    pub shutdown: CancellationToken,
    /// Record statistics for `Admin.Status` and `/metrics`.
    pub stats: Arc<StatsCache>,
    /// This node's region.
    pub region: String,
    /// This node's zone.
    pub zone: String,
    /// Per-tenant rates and quotas, asked before proposing.
    pub tenant_limits: Arc<TenantLimits>,
    /// Whether calls must carry a principal (set by [`crate::auth::AuthLayer`]).
    pub auth: AuthMode,
    /// Whether claims answer warnings about weak keys (`key_warnings`, see
    /// [`crate::signals::key_shape`]).
    pub key_warnings: bool,
    /// The heaviest keys and tenants of this node's recent claims (`Admin.TopKeys`).
    pub hot_keys: Arc<HotKeys>,
}

impl ApiContext {
    /// The principal the auth layer found for `request`. A call without one is refused when
    /// authentication is on (fail closed: a handler reached some other way never runs
    /// unauthenticated); with it off, the caller may do anything.
    pub fn caller<T>(&self, request: &tonic::Request<T>) -> Result<Principal, RequestError> {
        match request.extensions().get::<Principal>() {
            Some(principal) => Ok(principal.clone()),
            None if self.auth == AuthMode::Off => Ok(Principal::unauthenticated()),
            None => Err(RequestError::denied(
                idem_proto::reason::UNAUTHENTICATED,
                "authentication is on: send a bearer token or a client certificate",
            )),
        }
    }
}
