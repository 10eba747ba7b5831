//! Error answers as RFC 9457 problem details (`application/problem+json`).
//!
//! Every answer the layer makes itself (the handler did not run, or its result is replayed
//! as a failure) is a problem object with a `type` URI per case, so a client can branch on
//! `type` rather than on prose, plus the idem `reason` (e.g. `FINGERPRINT_MISMATCH`) for
//! operators. Answers that ask the client to come back carry `Retry-After`.

use std::time::Duration;

use axum::body::Body;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;

/// The media type of problem details.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The prefix of every problem `type` URI: `urn:idem:problem:<slug>`.
pub const TYPE_PREFIX: &str = "urn:idem:problem:";

/// The cases the layer answers itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The route requires an `Idempotency-Key` and the request has none (400).
    MissingKey,
    /// The `Idempotency-Key` is not a valid Structured Field string or idem key (400).
    InvalidKey,
    /// The tenant or actor could not be determined (401).
    Unauthenticated,
    /// The tenant, actor or request is not acceptable to idem (400).
    InvalidRequest,
    /// The body is larger than the route's limit (413).
    BodyTooLarge,
    /// A request with the same key is being processed (409, `Retry-After`).
    InFlight,
    /// The key was used for a different request (422).
    FingerprintMismatch,
    /// The stored record needs a fingerprint of another algorithm (422).
    FingerprintUnverifiable,
    /// A high-risk call's outcome is unknown; an operator decides (409, or 503).
    NeedsReconciliation,
    /// The tenant's home region is in failover and the route is high risk (503).
    RegionFailover,
    /// The idempotency store could not be reached or gave no definite answer (503).
    StoreUnavailable,
    /// The store refused the call for a reason the layer does not expect (500).
    StoreError,
    /// The operation was cancelled by its owner or an operator (409).
    Cancelled,
    /// The handler panicked; the record allows a retry (500).
    HandlerPanicked,
    /// The handler ran past the route's time budget; the record allows a retry (504).
    HandlerTimeout,
    /// The handler's answer body failed while the layer read it to store it verbatim; the
    /// record allows a retry (500).
    HandlerFailed,
    /// Replay of a stored terminal failure (the stored status).
    ReplayedFailure,
}

impl ProblemKind {
    /// The slug of the `type` URI.
    pub fn slug(self) -> &'static str {
        match self {
            ProblemKind::MissingKey => "missing-key",
            ProblemKind::InvalidKey => "invalid-key",
            ProblemKind::Unauthenticated => "unauthenticated",
            ProblemKind::InvalidRequest => "invalid-request",
            ProblemKind::BodyTooLarge => "body-too-large",
            ProblemKind::InFlight => "in-flight",
            ProblemKind::FingerprintMismatch => "fingerprint-mismatch",
            ProblemKind::FingerprintUnverifiable => "fingerprint-unverifiable",
            ProblemKind::NeedsReconciliation => "needs-reconciliation",
            ProblemKind::RegionFailover => "region-failover",
            ProblemKind::StoreUnavailable => "store-unavailable",
            ProblemKind::StoreError => "store-error",
            ProblemKind::Cancelled => "cancelled",
            ProblemKind::HandlerPanicked => "handler-panicked",
            ProblemKind::HandlerTimeout => "handler-timeout",
            ProblemKind::HandlerFailed => "handler-failed",
            ProblemKind::ReplayedFailure => "replayed-failure",
        }
    }

    /// The default status of the case.
    pub fn status(self) -> StatusCode {
        match self {
            ProblemKind::MissingKey | ProblemKind::InvalidKey | ProblemKind::InvalidRequest => {
                StatusCode::BAD_REQUEST
            }
            ProblemKind::Unauthenticated => StatusCode::UNAUTHORIZED,
            ProblemKind::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProblemKind::InFlight | ProblemKind::NeedsReconciliation | ProblemKind::Cancelled => {
                StatusCode::CONFLICT
            }
            ProblemKind::FingerprintMismatch | ProblemKind::FingerprintUnverifiable => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ProblemKind::RegionFailover | ProblemKind::StoreUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ProblemKind::StoreError | ProblemKind::HandlerPanicked | ProblemKind::HandlerFailed => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ProblemKind::HandlerTimeout => StatusCode::GATEWAY_TIMEOUT,
            ProblemKind::ReplayedFailure => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    /// The short, case-constant summary (`title`).
    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::MissingKey => "Idempotency-Key header required",
            ProblemKind::InvalidKey => "Invalid Idempotency-Key header",
            ProblemKind::Unauthenticated => "No authenticated principal",
            ProblemKind::InvalidRequest => "Request not acceptable for idempotency",
            ProblemKind::BodyTooLarge => "Request body too large",
            ProblemKind::InFlight => "A request with this key is being processed",
            ProblemKind::FingerprintMismatch => "Idempotency-Key reused with another request",
            ProblemKind::FingerprintUnverifiable => "Request fingerprint cannot be verified",
            ProblemKind::NeedsReconciliation => "Outcome unknown, awaiting reconciliation",
            ProblemKind::RegionFailover => "Region failover in progress",
            ProblemKind::StoreUnavailable => "Idempotency store unavailable",
            ProblemKind::StoreError => "Idempotency store error",
            ProblemKind::Cancelled => "Operation cancelled",
            ProblemKind::HandlerPanicked => "Internal error",
            ProblemKind::HandlerTimeout => "Request timed out",
            ProblemKind::HandlerFailed => "The answer could not be completed",
            ProblemKind::ReplayedFailure => "Replayed failure",
        }
    }

    /// The `type` URI.
    pub fn type_uri(self) -> String {
        format!("{TYPE_PREFIX}{}", self.slug())
    }
}

/// One problem answer, built with [`Problem::new`] and the `with_*` methods.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    kind: ProblemKind,
    status: StatusCode,
    detail: String,
    reason: String,
    retry_after: Option<Duration>,
    required_algorithm: Option<String>,
}

/// The JSON members of a problem object.
#[derive(Serialize)]
struct Wire<'a> {
    #[serde(rename = "type")]
    type_uri: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    required_algorithm: Option<&'a str>,
}

impl Problem {
    /// A problem of `kind` with its default status and the idem `reason`.
    pub fn new(kind: ProblemKind, reason: &str, detail: impl Into<String>) -> Self {
        Problem {
            kind,
            status: kind.status(),
            detail: detail.into(),
            reason: reason.to_owned(),
            retry_after: None,
            required_algorithm: None,
        }
    }

    /// Overrides the status (e.g. 503 for reconciliation, a replayed failure's status).
    #[must_use]
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Adds `Retry-After` (whole seconds, rounded up, at least 1).
    #[must_use]
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Names the fingerprint algorithm the stored record requires.
    #[must_use]
    pub fn with_required_algorithm(mut self, algorithm: impl Into<String>) -> Self {
        self.required_algorithm = Some(algorithm.into());
        self
    }

    /// The case.
    pub fn kind(&self) -> ProblemKind {
        self.kind
    }

    /// The status of the answer.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The HTTP answer.
    pub fn into_response(self) -> Response<Body> {
        let wire = Wire {
            type_uri: self.kind.type_uri(),
            title: self.kind.title(),
            status: self.status.as_u16(),
            detail: &self.detail,
            reason: &self.reason,
            required_algorithm: self.required_algorithm.as_deref(),
        };
        let body = serde_json::to_vec(&wire).unwrap_or_default();
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(after) = self.retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(after)));
        }
        response
    }
}

/// `Retry-After` in whole seconds: rounded up, at least 1 (0 would invite a busy loop).
pub fn retry_after_secs(after: Duration) -> u64 {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn renders_rfc9457_with_retry_after() {
        let response = Problem::new(ProblemKind::InFlight, "IN_PROGRESS", "try later")
            .with_retry_after(Duration::from_millis(1200))
            .into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["type"], "urn:idem:problem:in-flight");
        assert_eq!(json["status"], 409);
        assert_eq!(json["reason"], "IN_PROGRESS");
        assert_eq!(json["detail"], "try later");
        assert!(json.get("required_algorithm").is_none());
    }

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
        assert_eq!(retry_after_secs(Duration::from_millis(3001)), 4);
    }

    #[test]
    fn every_kind_has_a_distinct_type() {
        use std::collections::HashSet;
        let kinds = [
            ProblemKind::MissingKey,
            ProblemKind::InvalidKey,
            ProblemKind::Unauthenticated,
            ProblemKind::InvalidRequest,
            ProblemKind::BodyTooLarge,
            ProblemKind::InFlight,
            ProblemKind::FingerprintMismatch,
            ProblemKind::FingerprintUnverifiable,
            ProblemKind::NeedsReconciliation,
            ProblemKind::RegionFailover,
            ProblemKind::StoreUnavailable,
            ProblemKind::StoreError,
            ProblemKind::Cancelled,
            ProblemKind::HandlerPanicked,
            ProblemKind::HandlerTimeout,
            ProblemKind::HandlerFailed,
            ProblemKind::ReplayedFailure,
        ];
        let uris: HashSet<String> = kinds.iter().map(|k| k.type_uri()).collect();
        assert_eq!(uris.len(), kinds.len());
    }
}
