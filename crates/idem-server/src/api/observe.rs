//! How every handler runs: inside a span named after its method that carries `key_hash` (a
//! keyed short hash, never the key) and `operation_id` once known, timed, with errors
//! counted and logged, and the [`RequestError`] turned into its gRPC status.

use std::borrow::Cow;
use std::future::Future;
use std::time::Instant;

use tonic::{Response, Status};
use tracing::Instrument;

use crate::backend::{forwarded, RequestError};
use crate::metrics::Metrics;

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
    let code: Cow<'static, str> = match &result {
        Ok(_) => Cow::Borrowed("Ok"),
        Err(error) => Cow::Owned(format!(
            "{:?}",
            idem_proto::reason::code_of(error.reason()).unwrap_or(tonic::Code::Unknown)
        )),
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
                // A validation message may quote the input (a key, a body fragment): the
                // reason alone goes to the log; the caller gets the message.
                RequestError::Invalid { .. } => tracing::debug!(reason, "request refused"),
                _ => tracing::debug!(reason, %error, "request refused"),
            }
            Err(error.into())
        }
    }
}

/// Records the key hash of the request in the current span (hashed only if the span is
/// recorded at all).
pub(crate) fn record_key_hash(key: &idem_core::IdempotencyKey) {
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("key_hash", key.log_hash());
    }
}

/// Records the operation id of the request in the current span.
pub(crate) fn record_operation(id: &idem_core::OperationId) {
    tracing::Span::current().record("operation_id", tracing::field::display(id));
}
