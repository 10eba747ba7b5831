//! The public gRPC API of a node: `idem.v1.Idempotency` and `idem.v1.Admin`.
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
mod batch;
pub mod convert;
mod idempotency;
mod limit;
mod members;
mod regions;
#[cfg(test)]
mod service_tests;
mod status;
#[cfg(test)]
pub(crate) mod testing;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tonic::{Response, Status};
use tracing::Instrument;

pub use admin::AdminService;
pub use batch::MAX_BATCH_CALLS;
pub use idempotency::{claim_response, IdempotencyService};
pub use limit::request_too_large_layer;

use crate::api::convert::BodyLimits;
use crate::backend::{forwarded, Backend, RequestError};
use crate::metrics::Metrics;
use crate::policy::Policies;
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
}

/// Runs one handler: inside a span, timed, with errors counted, logged and converted.
pub(crate) async fn observe<T>(
    metrics: &Metrics,
    service: &'static str,
    method: &'static str,
    handler: impl Future<Output = Result<T, RequestError>>,
) -> Result<Response<T>, Status> {
    let span = tracing::info_span!(
        "rpc",
        method,
        key_hash = tracing::field::Empty,
        operation_id = tracing::field::Empty,
    );
    let started = Instant::now();
    let (result, leader_addr) = forwarded::scope(handler.instrument(span.clone())).await;
    let elapsed = started.elapsed();
    let code = match &result {
        Ok(_) => "Ok".to_owned(),
        Err(error) => format!(
            "{:?}",
            idem_proto::reason::code_of(error.reason()).unwrap_or(tonic::Code::Unknown)
        ),
    };
    metrics
        .rpc_duration
        .with_label_values(&[service, method, &code])
        .observe(elapsed.as_secs_f64());
    let _entered = span.enter();
    match result {
        Ok(response) => {
            tracing::debug!(elapsed_ms = elapsed.as_millis() as u64, "ok");
            let mut response = Response::new(response);
            if let Some(value) = leader_addr.and_then(|a| a.parse().ok()) {
                response
                    .metadata_mut()
                    .insert(idem_proto::reason::LEADER_ADDR_METADATA_KEY, value);
            }
            Ok(response)
        }
        Err(error) => {
            let reason = error.reason();
            metrics
                .rpc_errors
                .with_label_values(&[method, reason])
                .inc();
            match &error {
                RequestError::Internal(_) => tracing::error!(reason, %error, "request failed"),
                RequestError::OutcomeUnknown(_) => {
                    tracing::warn!(reason, %error, "request outcome unknown")
                }
                _ => tracing::debug!(reason, %error, "request refused"),
            }
            Err(error.into())
        }
    }
}

/// Records the key hash of the request in the current span.
pub(crate) fn record_key_hash(key: &idem_core::IdempotencyKey) {
    tracing::Span::current().record("key_hash", key.log_hash());
}

/// Records the operation id of the request in the current span.
pub(crate) fn record_operation(id: &idem_core::OperationId) {
    tracing::Span::current().record("operation_id", tracing::field::display(id));
}
