//! The attempt that owns a record: runs the handler and settles the record.
//!
//! The handler runs inside a spawned task (see `flow`), with its lease renewed every third
//! of the lease and an optional time budget; a panic is caught. Whatever happened, the
//! record is settled before the answer leaves: completed or failed terminally from the
//! handler's answer, released when nothing irreversible began, failed retryably when an
//! external call may have happened, so a retry takes over told the stage. On a route that
//! stores bodies verbatim, a completed answer's body is read into memory first (only when
//! its length is known and within the route's limit) so that the stored result and the
//! answer sent are the same bytes.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use futures::FutureExt;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::{BodyExt, Limited};
use idem_client::{ClientError, FailureKind, Target};
use idem_core::{ErrorSummary, StoredBody};
use tokio::time::Instant;
use tower::Service;

use crate::config::{RoutePolicy, MAX_STORED_BODY};
use crate::flow::{record, Answer, Shared};
use crate::ledger::Ledger;
use crate::outcome::{settle_retryable, settle_status, Settle};
use crate::problem::{Problem, ProblemKind};
use crate::replay::{capture, capture_failure, Failure, Resource};

/// The attempt that owns a record: runs the handler and settles the record.
pub(crate) struct Owner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) policy: Arc<RoutePolicy>,
    pub(crate) target: Target,
    pub(crate) fence: u64,
    pub(crate) ledger: Ledger,
}

/// How the handler ended.
enum Ran<T> {
    /// It returned (an answer or the inner service's error).
    Returned(T),
    /// It panicked.
    Panicked,
    /// It ran past the route's budget.
    TimedOut,
}

impl Owner {
    /// Runs the handler and settles the record from what happened.
    pub(crate) async fn run<S>(self, mut inner: S, request: Request<Body>) -> Answer<S::Error>
    where
        S: Service<Request<Body>, Response = Response<Body>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
    {
        let handler = AssertUnwindSafe(async move { inner.call(request).await }).catch_unwind();
        let timed = async {
            match self.policy.handler_timeout {
                Some(limit) => match tokio::time::timeout(limit, handler).await {
                    Ok(Ok(answer)) => Ran::Returned(answer),
                    Ok(Err(_)) => Ran::Panicked,
                    Err(_) => Ran::TimedOut,
                },
                None => match handler.await {
                    Ok(answer) => Ran::Returned(answer),
                    Err(_) => Ran::Panicked,
                },
            }
        };
        match self.renewing(timed).await {
            Ran::Returned(Ok(response)) => Ok(self.settle_response(response).await),
            Ran::Returned(Err(error)) => {
                self.settle(settle_retryable(self.ledger.stage()), 500, None, None)
                    .await;
                Err(error)
            }
            Ran::Panicked => {
                self.settle(settle_retryable(self.ledger.stage()), 500, None, None)
                    .await;
                let problem = Problem::new(
                    ProblemKind::HandlerPanicked,
                    "HANDLER_PANICKED",
                    "internal error",
                );
                Ok(problem.into_response())
            }
            Ran::TimedOut => {
                self.settle(settle_retryable(self.ledger.stage()), 504, None, None)
                    .await;
                let detail = "the operation did not finish in time; retry with the same key";
                let problem = Problem::new(ProblemKind::HandlerTimeout, "HANDLER_TIMEOUT", detail);
                Ok(problem.into_response())
            }
        }
    }

    /// Drives `work` while renewing the lease every third of it.
    async fn renewing<F: std::future::Future>(&self, work: F) -> F::Output {
        let period = (self.policy.lease / 3).max(Duration::from_millis(50));
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        let mut renew = true;
        tokio::pin!(work);
        loop {
            tokio::select! {
                output = &mut work => return output,
                _ = ticker.tick(), if renew => {
                    if let Err(error) = self.shared.client.renew(&self.target, self.fence, None).await {
                        tracing::warn!(reason = error.reason(), "lease renewal failed");
                        renew = error.reason() != "STALE_FENCE";
                    }
                }
            }
        }
    }

    /// Settles the record from the handler's answer and passes the answer on.
    async fn settle_response(&self, response: Response<Body>) -> Response<Body> {
        let status = response.status();
        let settle = settle_status(status, &self.policy, self.ledger.stage());
        let (response, body) = match (settle, self.policy.store_body) {
            (Settle::Complete, Some(limit)) => match keep_body(response, limit).await {
                Ok(kept) => kept,
                Err(problem) => {
                    self.settle(settle_retryable(self.ledger.stage()), 500, None, None)
                        .await;
                    return problem.into_response();
                }
            },
            _ => (response, None),
        };
        let headers = response.headers().clone();
        let extensions = response.extensions();
        let resource = extensions.get::<Resource>().cloned();
        let failure = extensions.get::<Failure>().cloned();
        let captured = Captured {
            headers: &headers,
            resource: resource.as_ref(),
            body: body.as_ref(),
        };
        self.settle(settle, status.as_u16(), Some(captured), failure.as_ref())
            .await;
        response
    }

    /// Applies a settlement; a failure is logged (the answer is sent anyway: the handler's
    /// work happened, and a record that could not be settled is taken over after its lease).
    async fn settle(
        &self,
        settle: Settle,
        status: u16,
        captured: Option<Captured<'_>>,
        failure: Option<&Failure>,
    ) {
        record(&self.shared, settle.name());
        tracing::Span::current().record("outcome", settle.name());
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let result = match settle {
            Settle::Complete => self.complete(status, captured).await,
            Settle::FailTerminal => {
                let error = capture_failure(status, failure);
                self.fail(FailureKind::Terminal, &error).await
            }
            Settle::FailRetryable => {
                let error = capture_failure(status, None);
                self.fail(FailureKind::Retryable, &error).await
            }
            Settle::Release => match self.shared.client.release(&self.target, self.fence).await {
                // The stage moved on outside this ledger handle: only a failure is honest.
                Err(e) if e.reason() == "IRREVERSIBLE_STAGE" => {
                    let error = capture_failure(status, None);
                    self.fail(FailureKind::Retryable, &error).await
                }
                other => other.map(drop),
            },
        };
        if let Err(error) = result {
            tracing::warn!(
                settle = settle.name(),
                reason = error.reason(),
                "record not settled"
            );
        }
    }

    async fn complete(
        &self,
        status: StatusCode,
        captured: Option<Captured<'_>>,
    ) -> Result<(), ClientError> {
        let empty = HeaderMap::new();
        let (headers, resource) = captured.map_or((&empty, None), |c| (c.headers, c.resource));
        let mut result = capture(status, headers, resource, &self.policy.replay_headers);
        result.body = captured.and_then(|c| c.body.cloned());
        let client = &self.shared.client;
        match client.complete(&self.target, self.fence, &result).await {
            // Fields the store refuses (too large, bad names) must not leave the record
            // owned: its lease would expire and the handler run again. Keep the status.
            Err(ClientError::InvalidArgument { reason, .. }) => {
                tracing::warn!(%reason, "result refused; storing the status only");
                let status_only = capture(status, &empty, None, &[]);
                client
                    .complete(&self.target, self.fence, &status_only)
                    .await
                    .map(drop)
            }
            other => other.map(drop),
        }
    }

    async fn fail(&self, kind: FailureKind, error: &ErrorSummary) -> Result<(), ClientError> {
        let client = &self.shared.client;
        match client.fail(&self.target, self.fence, kind, error).await {
            Err(ClientError::InvalidArgument { .. }) => {
                let plain = ErrorSummary {
                    code: error.code.split('.').next().unwrap_or("error").to_owned() + ".error",
                    message: String::new(),
                };
                client
                    .fail(&self.target, self.fence, kind, &plain)
                    .await
                    .map(drop)
            }
            other => other.map(drop),
        }
    }
}

/// What was kept of the handler's answer for the stored result.
#[derive(Clone, Copy)]
struct Captured<'a> {
    headers: &'a HeaderMap,
    resource: Option<&'a Resource>,
    body: Option<&'a StoredBody>,
}

/// Reads a completed answer's body to store it verbatim, when its length is known and at
/// most `limit` (clamped to [`MAX_STORED_BODY`]); the answer is rebuilt from the same
/// bytes. Otherwise the answer passes on untouched and nothing of its body is stored (its
/// replay is rendered). A body that fails while read is a `500 handler-failed`.
async fn keep_body(
    response: Response<Body>,
    limit: usize,
) -> Result<(Response<Body>, Option<StoredBody>), Problem> {
    let limit = limit.min(MAX_STORED_BODY);
    let known = response.body().size_hint().exact();
    if known.is_none_or(|len| len > u64::try_from(limit).unwrap_or(u64::MAX)) {
        tracing::debug!(length = ?known, limit, "answer body not stored (length unknown or over the limit)");
        return Ok((response, None));
    }
    let (parts, body) = response.into_parts();
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            tracing::warn!(%error, "the answer's body failed while read");
            let detail = "the answer's body could not be read; retry with the same key";
            return Err(Problem::new(
                ProblemKind::HandlerFailed,
                "HANDLER_FAILED",
                detail,
            ));
        }
    };
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let stored = StoredBody {
        content_type,
        bytes: bytes.to_vec(),
    };
    Ok((Response::from_parts(parts, Body::from(bytes)), Some(stored)))
}
