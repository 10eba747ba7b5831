//! Admission on the API port: a bound on requests in flight, with load shedding, and the
//! caller's deadline (`grpc-timeout`) applied to the handler.
//!
//! Why shed instead of queue: a node that queues past its capacity answers everything
//! late, so every client times out and retries, and the retries queue again. Answering
//! `RESOURCE_EXHAUSTED` / `OVERLOADED` at once, before decoding, keeps the requests that
//! were admitted fast and tells the others to back off (`retry-after-ms`) or try another
//! node. HTTP/2 `max_concurrent_streams` bounds each connection before this; gRPC health
//! checks are never shed, so an overloaded node still reports itself serving.
//!
//! Deadlines: a handler runs at most until the caller's deadline (minus a small margin, so
//! the answer can still reach it). Past it, a read answers `DEADLINE_EXCEEDED`; a write
//! answers `UNAVAILABLE_OUTCOME_UNKNOWN`, because its proposal may already be in the log
//! (docs/semantics.md): the client retries with the same key, holder or fence.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderMap, Request, Response};
use idem_proto::{reason, status};
use tower::{Layer, Service};

use crate::metrics::Metrics;

/// The retry hint sent with `OVERLOADED`.
pub const SHED_RETRY_AFTER: Duration = Duration::from_millis(100);
/// Paths never shed: gRPC health checks.
const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";
/// Idempotency methods that only read.
const READS: &[&str] = &["Get", "GetOperation", "Wait"];
/// Admin method prefixes that only read.
const ADMIN_READ_PREFIXES: &[&str] = &["List", "Status", "Get"];

/// The tower layer for `tonic::transport::Server::layer` on the API port.
#[derive(Clone)]
pub struct AdmissionLayer {
    gate: Arc<Gate>,
}

/// The shared in-flight counter.
struct Gate {
    max: usize,
    in_flight: AtomicUsize,
    metrics: Arc<Metrics>,
}

/// Holds one in-flight slot until dropped.
struct Permit(Arc<Gate>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl AdmissionLayer {
    /// At most `max_in_flight` requests at once (0 = unlimited); refusals are counted in
    /// `metrics`.
    pub fn new(max_in_flight: usize, metrics: Arc<Metrics>) -> Self {
        AdmissionLayer {
            gate: Arc::new(Gate {
                max: max_in_flight,
                in_flight: AtomicUsize::new(0),
                metrics,
            }),
        }
    }

    fn enter(&self) -> Option<Permit> {
        let gate = &self.gate;
        let before = gate.in_flight.fetch_add(1, Ordering::AcqRel);
        let permit = Permit(Arc::clone(gate));
        (gate.max == 0 || before < gate.max).then_some(permit)
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`AdmissionLayer`] wraps around the API port's routes.
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    layer: AdmissionLayer,
}

impl<S, B, RB> Service<Request<B>> for Admission<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<RB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let permit = if path.starts_with(HEALTH_PREFIX) {
            None
        } else {
            match self.layer.enter() {
                Some(permit) => Some(permit),
                None => {
                    let metrics = &self.layer.gate.metrics;
                    refused(metrics, reason::OVERLOADED, &path);
                    let shed = status::with_retry_after(
                        reason::OVERLOADED,
                        "the node is at its limit of requests in flight; retry later or elsewhere",
                        SHED_RETRY_AFTER,
                    );
                    return Box::pin(async move { Ok(shed.into_http()) });
                }
            }
        };
        let budget = grpc_timeout(request.headers()).map(with_margin);
        // The ready service answers this call; a fresh clone waits for the next one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let metrics = Arc::clone(&self.layer.gate.metrics);
        Box::pin(async move {
            let _permit = permit;
            let call = inner.call(request);
            let Some(budget) = budget else {
                return call.await;
            };
            let call: Pin<Box<_>> = Box::pin(call);
            match tokio::time::timeout(budget, call).await {
                Ok(answer) => answer,
                Err(_elapsed) => {
                    let why = if is_write(&path) {
                        reason::UNAVAILABLE_OUTCOME_UNKNOWN
                    } else {
                        reason::DEADLINE_EXCEEDED
                    };
                    refused(&metrics, why, &path);
                    let message = "the caller's deadline passed before the request finished";
                    Ok(status::error(why, message, []).into_http())
                }
            }
        })
    }
}

/// Counts a refusal of this layer.
fn refused(metrics: &Metrics, why: &str, path: &str) {
    let kind = if why == reason::OVERLOADED {
        "request"
    } else {
        "deadline"
    };
    metrics.limit_refusals.with_label_values(&[why, kind]).inc();
    tracing::debug!(reason = why, path, "request refused by admission");
}

/// True for the methods that may change state (their cut-off answer is "outcome unknown").
fn is_write(path: &str) -> bool {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let (service, method) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    match service {
        "idem.v1.Idempotency" => !READS.contains(&method),
        "idem.v1.Admin" => !ADMIN_READ_PREFIXES.iter().any(|p| method.starts_with(p)),
        _ => false,
    }
}

/// The handler's budget: the deadline less 5 % (at most 50 ms), so the answer is sent
/// before the caller gives up.
fn with_margin(deadline: Duration) -> Duration {
    let margin = (deadline / 20).min(Duration::from_millis(50));
    deadline.saturating_sub(margin)
}

/// The `grpc-timeout` header: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let value: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(value * 3600),
        "M" => Duration::from_secs(value * 60),
        "S" => Duration::from_secs(value),
        "m" => Duration::from_millis(value),
        "u" => Duration::from_micros(value),
        "n" => Duration::from_nanos(value),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        let parse = |text: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert("grpc-timeout", HeaderValue::from_static(text));
            grpc_timeout(&headers)
        };
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse("100u"), Some(Duration::from_micros(100)));
        assert_eq!(parse("7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse("123456789S"), None);
        assert_eq!(parse("5x"), None);
        assert_eq!(parse("m"), None);
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }

    #[test]
    fn writes_and_reads_are_told_apart_by_path() {
        assert!(is_write("/idem.v1.Idempotency/Claim"));
        assert!(is_write("/idem.v1.Idempotency/Batch"));
        assert!(!is_write("/idem.v1.Idempotency/Get"));
        assert!(!is_write("/idem.v1.Idempotency/Wait"));
        assert!(is_write("/idem.v1.Admin/Reconcile"));
        assert!(!is_write("/idem.v1.Admin/ListOperations"));
        assert!(!is_write("/grpc.health.v1.Health/Check"));
    }

    #[test]
    fn the_margin_is_five_percent_up_to_50ms() {
        assert_eq!(
            with_margin(Duration::from_millis(100)),
            Duration::from_millis(95)
        );
        assert_eq!(
            with_margin(Duration::from_secs(10)),
            Duration::from_millis(9950)
        );
    }
}
