//! One protected request, from the header to the settled record.
//!
//! The order is the safety argument: the key, the scope and the fingerprint are checked
//! before anything is claimed; the handler runs only when a claim made this request the
//! owner of a record (fail closed: an unavailable store is a 503, never an unprotected run);
//! the handler runs in its own task, so a client that goes away cancels neither the handler
//! nor the settlement of the record; the lease is renewed while it runs; and the record is
//! settled from what the handler answered before the answer is sent.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::MatchedPath;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use idem_client::{Claim, ClaimOutcome, ClaimRequest, Client, ClientError, Target};
use idem_core::{IdempotencyKey, RecordKey, Scope, Stage, State};
use tokio::time::Instant;
use tower::{BoxError, Service};
use tracing::Instrument;

use crate::config::{Config, InFlight, PrincipalPart, RoutePolicy, MAX_STORED_BODY, RESULT_ROOM};
use crate::fingerprint::canonical_request;
use crate::key::{parse_key, KeyError};
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::owner::Owner;
use crate::problem::{Problem, ProblemKind};
use crate::replay::{self, JsonRender, Render};

/// The header carrying the key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// How long a store that gave no answer should be left alone before a retry.
const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What every request of one layer shares.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) config: Config,
    pub(crate) metrics: Option<Metrics>,
}

/// The answer of a request the layer handled, or the inner service's error.
pub(crate) type Answer<E> = Result<Response<Body>, E>;

/// Handles one request through the layer.
pub(crate) async fn handle<S, B>(
    shared: Arc<Shared>,
    inner: S,
    request: Request<B>,
) -> Answer<S::Error>
where
    S: Service<Request<Body>, Response = Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let matched = parts
        .extensions
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let found = shared
        .config
        .find(&parts.method, matched.as_deref(), parts.uri.path())
        .map(|(entry, params)| {
            (
                entry.policy.clone(),
                entry.template.as_str().to_owned(),
                params,
            )
        });
    let Some((policy, template, params)) = found else {
        return pass(inner, Request::from_parts(parts, Body::new(body))).await;
    };
    let key = match read_key(&parts.headers) {
        Ok(Some(key)) => key,
        Ok(None) if !policy.key_required => {
            return pass(inner, Request::from_parts(parts, Body::new(body))).await
        }
        Ok(None) => {
            let detail = "this operation requires an Idempotency-Key header";
            return Ok(answer(
                &shared,
                Problem::new(ProblemKind::MissingKey, "MISSING_KEY", detail),
            ));
        }
        Err(error) => {
            let problem = Problem::new(ProblemKind::InvalidKey, "INVALID_KEY", error.to_string());
            return Ok(answer(&shared, problem));
        }
    };
    let endpoint = format!("{} {template}", parts.method);
    let span = tracing::info_span!(
        "idempotency",
        key_hash = %key.log_hash(),
        endpoint = %endpoint,
        outcome = tracing::field::Empty,
    );
    let request = Protected {
        shared,
        policy,
        template,
        params,
        endpoint,
        key,
    };
    request.run(inner, parts, body).instrument(span).await
}

/// A request on a protected route with a valid key.
struct Protected {
    shared: Arc<Shared>,
    policy: Arc<RoutePolicy>,
    template: String,
    params: Vec<(String, String)>,
    endpoint: String,
    key: IdempotencyKey,
}

impl Protected {
    async fn run<S, B>(self, inner: S, parts: Parts, body: B) -> Answer<S::Error>
    where
        S: Service<Request<Body>, Response = Response<Body>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let prepared = match self.prepare(&parts, body).await {
            Ok(prepared) => prepared,
            Err(problem) => return Ok(answer(&self.shared, problem)),
        };
        let (claim_request, bytes) = prepared;
        let target = claim_request.target().clone();
        let deadline = match self.policy.in_flight {
            InFlight::Wait(budget) => Some(Instant::now() + budget),
            InFlight::Conflict => None,
        };
        loop {
            let claim = match self.shared.client.claim(claim_request.clone()).await {
                Ok(claim) => claim,
                Err(error) => return Ok(answer(&self.shared, store_problem(&error))),
            };
            match claim.outcome {
                ClaimOutcome::Acquired { fence, .. } => {
                    return self.own(inner, parts, bytes, &claim, fence, None).await;
                }
                ClaimOutcome::TakenOver {
                    fence,
                    previous_stage,
                    ref remote_ref,
                    ..
                } => {
                    let previous = Some((previous_stage, remote_ref.clone()));
                    return self.own(inner, parts, bytes, &claim, fence, previous).await;
                }
                ClaimOutcome::InProgress { retry_after, .. } => {
                    if let Some(problem) = self.hold(&target, deadline, retry_after).await {
                        return Ok(answer(&self.shared, problem));
                    }
                }
                _ => return Ok(self.answer_settled(claim).await),
            }
        }
    }

    /// Scope, body and fingerprint: the claim to send, and the buffered body.
    async fn prepare<B>(&self, parts: &Parts, body: B) -> Result<(ClaimRequest, Bytes), Problem>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let scope = self.scope(parts)?;
        let bytes = match Limited::new(body, self.policy.max_body_bytes)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
                let detail = format!("the body exceeds {} bytes", self.policy.max_body_bytes);
                return Err(Problem::new(
                    ProblemKind::BodyTooLarge,
                    "BODY_TOO_LARGE",
                    detail,
                ));
            }
            Err(error) => {
                let detail = format!("the body could not be read: {error}");
                return Err(Problem::new(
                    ProblemKind::InvalidRequest,
                    "INVALID_ARGUMENT",
                    detail,
                ));
            }
        };
        let spec = &self.policy.fingerprint;
        let canonical = canonical_request(parts, &self.template, &self.params, &bytes, spec)
            .map_err(|e| store_problem(&ClientError::from(e)))?;
        let target = RecordKey::new(scope, self.key.clone());
        let claim = if spec.server_hashed {
            ClaimRequest::server_hashed(target, &canonical, 1)
        } else {
            ClaimRequest::for_request(target, &canonical, 1)
        }
        .map_err(|e| store_problem(&e))?;
        let mut claim = claim.risk(self.policy.risk).lease(self.policy.lease);
        if let Some(retention) = self.policy.retention {
            claim = claim.retention(retention);
        }
        if let Some(limit) = self.policy.store_body {
            // Room for the verbatim body next to the rest of the result.
            let bytes = limit.min(MAX_STORED_BODY) + RESULT_ROOM;
            claim = claim.max_result_bytes(u32::try_from(bytes).unwrap_or(u32::MAX));
        }
        Ok((claim, bytes))
    }

    /// The record's scope: environment from the configuration, tenant and actor from their
    /// sources, endpoint from the method and route template.
    fn scope(&self, parts: &Parts) -> Result<Scope, Problem> {
        let config = &self.shared.config;
        let tenant = config.tenant.read(parts, PrincipalPart::Tenant);
        let actor = config.actor.read(parts, PrincipalPart::Actor);
        let (Some(tenant), Some(actor)) = (tenant, actor) else {
            let detail = "the request has no tenant or actor for its idempotency scope";
            return Err(Problem::new(
                ProblemKind::Unauthenticated,
                "UNAUTHENTICATED",
                detail,
            ));
        };
        Scope::new(
            tenant,
            config.environment.clone(),
            actor,
            self.endpoint.clone(),
        )
        .map_err(|e| Problem::new(ProblemKind::InvalidRequest, e.reason(), e.to_string()))
    }

    /// Holds an in-flight duplicate within the route's budget; `Some` answer when it is
    /// spent (409), or the store failed, `None` to claim again.
    async fn hold(
        &self,
        target: &Target,
        deadline: Option<Instant>,
        retry_after: Duration,
    ) -> Option<Problem> {
        let remaining = deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
            .filter(|r| !r.is_zero());
        let Some(remaining) = remaining else {
            let detail = "a request with this key is being processed; retry later";
            let problem = Problem::new(ProblemKind::InFlight, "IN_PROGRESS", detail)
                .with_retry_after(retry_after);
            return Some(problem);
        };
        let budget = remaining.min(idem_client::MAX_WAIT);
        match self.shared.client.wait(target, budget).await {
            Ok(lookup) if !lookup.terminal => {
                // The lease ended without a result (the next claim takes over) or the wait
                // ran out: do not spin on a record that stays in flight.
                tokio::time::sleep(retry_after.min(remaining).min(Duration::from_millis(50))).await;
                None
            }
            Ok(_) => None,
            Err(ClientError::NotFound { .. }) => None,
            Err(error) => Some(store_problem(&error)),
        }
    }

    /// The answer of a claim that did not make this request the owner.
    async fn answer_settled(&self, claim: Claim) -> Response<Body> {
        let render: &dyn Render = self.policy.render.as_deref().unwrap_or(&JsonRender);
        let (outcome, response) = match claim.outcome {
            ClaimOutcome::Completed { result } => (
                "replayed",
                replay::replay_response(result, claim.operation_id, render).await,
            ),
            ClaimOutcome::Failed {
                error: Some(error),
                state: State::TerminalFailure,
            } => (
                "replayed_failure",
                replay::replay_failure(&error, claim.operation_id, render).await,
            ),
            ClaimOutcome::Failed { .. } => {
                let detail = "the operation of this key was cancelled";
                let problem = Problem::new(ProblemKind::Cancelled, "CANCELLED", detail);
                ("cancelled", problem.into_response())
            }
            ClaimOutcome::FingerprintMismatch => {
                let detail = "this key was used for a different request";
                let problem = Problem::new(
                    ProblemKind::FingerprintMismatch,
                    "FINGERPRINT_MISMATCH",
                    detail,
                );
                ("fingerprint_mismatch", problem.into_response())
            }
            ClaimOutcome::FingerprintUnverifiable { required_algorithm } => {
                let detail = format!("the stored request needs a {required_algorithm} fingerprint");
                let problem = Problem::new(
                    ProblemKind::FingerprintUnverifiable,
                    "FINGERPRINT_UNVERIFIABLE",
                    detail,
                )
                .with_required_algorithm(required_algorithm);
                ("fingerprint_unverifiable", problem.into_response())
            }
            _ => {
                let status = self.policy.reconciliation_status;
                let detail = "the outcome of this operation is unknown; it awaits reconciliation";
                let mut problem = Problem::new(
                    ProblemKind::NeedsReconciliation,
                    "NEEDS_RECONCILIATION",
                    detail,
                )
                .with_status(status);
                if status == StatusCode::SERVICE_UNAVAILABLE {
                    problem = problem.with_retry_after(Duration::from_secs(60));
                }
                ("needs_reconciliation", problem.into_response())
            }
        };
        record(&self.shared, outcome);
        response
    }

    /// Runs the handler as the owner of the record, in its own task.
    async fn own<S>(
        &self,
        inner: S,
        mut parts: Parts,
        bytes: Bytes,
        claim: &Claim,
        fence: u64,
        previous: Option<(Option<Stage>, Option<String>)>,
    ) -> Answer<S::Error>
    where
        S: Service<Request<Body>, Response = Response<Body>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
    {
        let client = self.shared.client.clone();
        let ledger = Ledger::new(
            client,
            claim.target.clone(),
            fence,
            claim.operation_id,
            previous,
        );
        parts.extensions.insert(ledger.clone());
        let request = Request::from_parts(parts, Body::from(bytes));
        let owner = Owner {
            shared: self.shared.clone(),
            policy: self.policy.clone(),
            target: claim.target.clone(),
            fence,
            ledger,
        };
        let task = tokio::spawn(owner.run(inner, request).in_current_span());
        match task.await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::error!(%error, "idempotency owner task failed");
                let problem =
                    Problem::new(ProblemKind::HandlerPanicked, "INTERNAL", "internal error");
                Ok(problem.into_response())
            }
        }
    }
}

/// The one `Idempotency-Key` of the request: `None` when absent.
fn read_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, KeyError> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(KeyError::Repeated);
    }
    parse_key(value.as_bytes()).map(Some)
}

/// The problem for a store error: fail closed.
fn store_problem(error: &ClientError) -> Problem {
    let reason = error.reason();
    let detail = error.message().to_owned();
    match error {
        ClientError::Rejected { .. } if error.is_region_failover() => {
            let after = error.retry_after().unwrap_or(UNAVAILABLE_RETRY_AFTER);
            Problem::new(ProblemKind::RegionFailover, reason, detail).with_retry_after(after)
        }
        ClientError::Unavailable { .. } | ClientError::OutcomeUnknown { .. } => Problem::new(
            ProblemKind::StoreUnavailable,
            reason,
            "the idempotency store is unavailable",
        )
        .with_retry_after(UNAVAILABLE_RETRY_AFTER),
        ClientError::Rejected { code, .. } if *code == idem_client::Code::Unavailable => {
            let after = error.retry_after().unwrap_or(UNAVAILABLE_RETRY_AFTER);
            Problem::new(ProblemKind::StoreUnavailable, reason, detail).with_retry_after(after)
        }
        ClientError::InvalidArgument { .. } if reason == "BODY_TOO_LARGE" => {
            Problem::new(ProblemKind::BodyTooLarge, reason, detail)
        }
        ClientError::InvalidArgument { .. } => {
            Problem::new(ProblemKind::InvalidRequest, reason, detail)
        }
        _ => Problem::new(
            ProblemKind::StoreError,
            reason,
            "the idempotency store failed",
        ),
    }
}

/// A problem answer, counted.
fn answer(shared: &Shared, problem: Problem) -> Response<Body> {
    let outcome = problem.kind().slug();
    record(shared, outcome);
    tracing::Span::current().record("outcome", outcome);
    problem.into_response()
}

/// Counts one outcome, when the layer has metrics.
pub(crate) fn record(shared: &Shared, outcome: &str) {
    if let Some(metrics) = &shared.metrics {
        metrics.record(outcome);
    }
}

/// Runs the inner service for a request the layer does not protect.
async fn pass<S>(mut inner: S, request: Request<Body>) -> Answer<S::Error>
where
    S: Service<Request<Body>, Response = Response<Body>>,
{
    inner.call(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_fail_closed() {
        let unavailable = ClientError::Unavailable {
            message: "down".into(),
        };
        let problem = store_problem(&unavailable);
        assert_eq!(problem.kind(), ProblemKind::StoreUnavailable);
        assert_eq!(problem.status(), StatusCode::SERVICE_UNAVAILABLE);
        let failover = ClientError::Rejected {
            reason: "REGION_FAILOVER".into(),
            code: idem_client::Code::Unavailable,
            message: "home lost".into(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(store_problem(&failover).kind(), ProblemKind::RegionFailover);
        let too_large = ClientError::invalid("BODY_TOO_LARGE", "big");
        assert_eq!(
            store_problem(&too_large).status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        let internal = ClientError::Rejected {
            reason: "INTERNAL".into(),
            code: idem_client::Code::Internal,
            message: String::new(),
            retry_after: None,
        };
        assert_eq!(
            store_problem(&internal).status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[test]
    fn one_key_header_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(read_key(&headers), Ok(None));
        headers.append(IDEMPOTENCY_KEY, "\"k1\"".parse().unwrap());
        assert_eq!(read_key(&headers).unwrap().unwrap().as_str(), "k1");
        headers.append(IDEMPOTENCY_KEY, "\"k2\"".parse().unwrap());
        assert_eq!(read_key(&headers), Err(KeyError::Repeated));
    }
}
