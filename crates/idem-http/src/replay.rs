//! What is stored from a handler's answer, and how a retry is answered from it.
//!
//! The store keeps a bounded result, not the response: the status, the resource the
//! operation created (id and version), a few stable fields the handler chose, and the
//! route's allow-listed response headers (as fields named `hdr.<name>`). A retry gets the
//! stored status and headers, `Idempotent-Replayed: true`, and a body the service re-renders
//! from the resource reference ([`Render`]): nothing sensitive (one-time secrets, signed
//! URLs, personal data) is kept in idem, and the replay shows the resource as it is now.
//!
//! Storing the body verbatim is the other mode the draft allows, for routes that opt in
//! (`RoutePolicy::store_body`: their answer cannot be re-rendered, and they accept keeping
//! it in idem): the result then carries the body and its content type (result version 1,
//! bounded by the record's `max_result_bytes`), and [`replay_response`] sends them back
//! unchanged instead of calling the renderer. A result without a body (every default
//! route, every record written before, a purged subject) is still re-rendered.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use axum::body::Body;
use axum::response::{IntoResponseParts, ResponseParts};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use idem_core::{ErrorSummary, OperationId, StoredBody, StoredResult};

use crate::problem::{Problem, ProblemKind};

/// The header that marks a replayed answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The prefix of result fields that hold replayed headers.
const HEADER_FIELD: &str = "hdr.";

/// The resource a handler's answer refers to; put it in the response extensions (with axum,
/// return it as a response part: `(StatusCode::CREATED, Resource::new(id), Json(body))`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resource {
    /// The resource's id.
    pub id: String,
    /// The resource's version at completion.
    pub version: String,
    /// A few stable fields needed to answer a retry (names: `A-Z a-z 0-9 . _ -`, not
    /// starting with `hdr.`).
    pub fields: BTreeMap<String, String>,
}

impl Resource {
    /// A resource reference with this id.
    pub fn new(id: impl Into<String>) -> Self {
        Resource {
            id: id.into(),
            ..Resource::default()
        }
    }

    /// Sets the version.
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Adds a stable field.
    #[must_use]
    pub fn field(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.insert(name.into(), value.into());
        self
    }
}

impl IntoResponseParts for Resource {
    type Error = std::convert::Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Self::Error> {
        res.extensions_mut().insert(self);
        Ok(res)
    }
}

/// A terminal failure's machine-readable code and message, stored and replayed; put it in
/// the response extensions of a 4xx answer (default code: `error`, no message).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failure {
    /// A stable code, e.g. `card_declined` (`A-Z a-z 0-9 . _ -`).
    pub code: String,
    /// A short message without personal data.
    pub message: String,
}

impl IntoResponseParts for Failure {
    type Error = std::convert::Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Self::Error> {
        res.extensions_mut().insert(self);
        Ok(res)
    }
}

/// A stored result being replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// The stored status.
    pub status: StatusCode,
    /// The operation's id.
    pub operation_id: OperationId,
    /// The resource reference and fields the handler stored (replayed headers removed).
    pub resource: Resource,
    /// True when an operator purged the subject's derived data: the fields are gone.
    pub purged: bool,
}

/// A stored terminal failure being replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayedFailure {
    /// The first answer's status.
    pub status: StatusCode,
    /// The operation's id.
    pub operation_id: OperationId,
    /// The code and message the handler gave.
    pub failure: Failure,
}

/// A boxed response future.
pub type RenderFuture = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

/// How the service re-renders a replayed answer's body from what was stored. The layer sets
/// the status, the replayed headers and `Idempotent-Replayed` afterwards.
pub trait Render: Send + Sync + 'static {
    /// The body of a replayed success (e.g. the resource read again by id).
    fn render(&self, replay: Replay) -> RenderFuture;

    /// The body of a replayed terminal failure (default: a problem object).
    fn render_failure(&self, failure: ReplayedFailure) -> RenderFuture {
        Box::pin(async move { failure_problem(&failure).into_response() })
    }
}

/// The default renderer: `{"id", "version", "operation_id", ...fields}` as JSON.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonRender;

impl Render for JsonRender {
    fn render(&self, replay: Replay) -> RenderFuture {
        let mut body = serde_json::Map::new();
        body.insert("id".into(), replay.resource.id.into());
        body.insert("version".into(), replay.resource.version.into());
        body.insert(
            "operation_id".into(),
            replay.operation_id.to_string().into(),
        );
        for (name, value) in replay.resource.fields {
            body.entry(name).or_insert(value.into());
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        Box::pin(async move {
            let mut response = Response::new(Body::from(bytes));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        })
    }
}

/// The problem object of a replayed failure.
fn failure_problem(failure: &ReplayedFailure) -> Problem {
    let detail = if failure.failure.message.is_empty() {
        failure.failure.code.clone()
    } else {
        format!("{}: {}", failure.failure.code, failure.failure.message)
    };
    Problem::new(ProblemKind::ReplayedFailure, "FAILED", detail).with_status(failure.status)
}

/// The result to store for a completed answer: status, resource, allow-listed headers.
pub fn capture(
    status: StatusCode,
    headers: &HeaderMap,
    resource: Option<&Resource>,
    replay_headers: &[HeaderName],
) -> StoredResult {
    let mut result = StoredResult {
        status_code: status.as_u16(),
        ..StoredResult::default()
    };
    if let Some(resource) = resource {
        result.resource_id = resource.id.clone();
        result.resource_version = resource.version.clone();
        result.fields = resource.fields.clone();
    }
    for name in replay_headers {
        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
            result
                .fields
                .insert(format!("{HEADER_FIELD}{name}"), value.to_owned());
        }
    }
    result
}

/// The error to store for a terminal failure: `http-<status>.<code>` and the message.
pub fn capture_failure(status: StatusCode, failure: Option<&Failure>) -> ErrorSummary {
    let code = failure.map_or("error", |f| f.code.as_str());
    ErrorSummary {
        code: format!("http-{}.{code}", status.as_u16()),
        message: failure.map(|f| f.message.clone()).unwrap_or_default(),
    }
}

/// Reads back what [`capture_failure`] stored (a record stored otherwise answers 422 with
/// its code as is).
pub fn parse_failure(error: &ErrorSummary) -> (StatusCode, Failure) {
    let parsed = error.code.strip_prefix("http-").and_then(|rest| {
        let (status, code) = rest.split_once('.')?;
        let status = StatusCode::from_u16(status.parse().ok()?).ok()?;
        Some((status, code.to_owned()))
    });
    let (status, code) = parsed.unwrap_or((StatusCode::UNPROCESSABLE_ENTITY, error.code.clone()));
    (
        status,
        Failure {
            code,
            message: error.message.clone(),
        },
    )
}

/// The replayed answer of a stored result: the stored body (verbatim, with its content
/// type) or else the renderer's, with the stored status and headers and
/// `Idempotent-Replayed: true`.
pub async fn replay_response(
    result: StoredResult,
    operation_id: OperationId,
    render: &dyn Render,
) -> Response<Body> {
    let status = StatusCode::from_u16(result.status_code).unwrap_or(StatusCode::OK);
    let mut headers = HeaderMap::new();
    let mut resource = Resource::new(result.resource_id).version(result.resource_version);
    for (name, value) in result.fields {
        match name.strip_prefix(HEADER_FIELD) {
            Some(header) => {
                if let (Ok(n), Ok(v)) = (HeaderName::try_from(header), HeaderValue::try_from(value))
                {
                    headers.insert(n, v);
                }
            }
            None => {
                resource.fields.insert(name, value);
            }
        }
    }
    let mut response = match result.body {
        Some(body) => verbatim(body),
        None => {
            let replay = Replay {
                status,
                operation_id,
                resource,
                purged: result.purged,
            };
            render.render(replay).await
        }
    };
    *response.status_mut() = status;
    response.headers_mut().extend(headers);
    mark_replayed(&mut response);
    response
}

/// The replayed answer of a stored terminal failure.
pub async fn replay_failure(
    error: &ErrorSummary,
    operation_id: OperationId,
    render: &dyn Render,
) -> Response<Body> {
    let (status, failure) = parse_failure(error);
    let mut response = render
        .render_failure(ReplayedFailure {
            status,
            operation_id,
            failure,
        })
        .await;
    *response.status_mut() = status;
    mark_replayed(&mut response);
    response
}

/// A stored body as it was sent: its bytes and content type (none when it had none).
fn verbatim(body: StoredBody) -> Response<Body> {
    let mut response = Response::new(Body::from(body.bytes));
    if let Ok(value) = HeaderValue::try_from(body.content_type) {
        if !value.is_empty() {
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, value);
        }
    }
    response
}

fn mark_replayed(response: &mut Response<Body>) {
    response.headers_mut().insert(
        HeaderName::from_static(IDEMPOTENT_REPLAYED),
        HeaderValue::from_static("true"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn op() -> OperationId {
        "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap()
    }

    #[tokio::test]
    async fn captured_results_replay_status_headers_and_fields() {
        let mut headers = HeaderMap::new();
        headers.insert("location", HeaderValue::from_static("/v1/charges/ch_1"));
        headers.insert("x-secret", HeaderValue::from_static("s"));
        let resource = Resource::new("ch_1").version("3").field("amount", "1000");
        let stored = capture(
            StatusCode::CREATED,
            &headers,
            Some(&resource),
            &[http::header::LOCATION],
        );
        assert!(stored.validate().is_ok());
        assert_eq!(stored.fields.len(), 2);
        let response = replay_response(stored, op(), &JsonRender).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()["location"], "/v1/charges/ch_1");
        assert_eq!(response.headers()[IDEMPOTENT_REPLAYED], "true");
        assert!(response.headers().get("x-secret").is_none());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["id"], "ch_1");
        assert_eq!(json["version"], "3");
        assert_eq!(json["amount"], "1000");
        assert!(json.get("hdr.location").is_none());
    }

    #[tokio::test]
    async fn stored_bodies_replay_verbatim_without_the_renderer() {
        struct Refuse;
        impl Render for Refuse {
            fn render(&self, _: Replay) -> RenderFuture {
                panic!("a stored body must not be re-rendered")
            }
        }
        let mut headers = HeaderMap::new();
        headers.insert("location", HeaderValue::from_static("/v1/quotes/q_1"));
        let mut stored = capture(
            StatusCode::CREATED,
            &headers,
            Some(&Resource::new("q_1")),
            &[http::header::LOCATION],
        );
        stored.body = Some(StoredBody {
            content_type: "text/csv; charset=utf-8".into(),
            bytes: b"id,price\nq_1,12.50\n".to_vec(),
        });
        assert!(stored.validate().is_ok());
        let response = replay_response(stored.clone(), op(), &Refuse).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(
            response.headers()["content-type"],
            "text/csv; charset=utf-8"
        );
        assert_eq!(response.headers()["location"], "/v1/quotes/q_1");
        assert_eq!(response.headers()[IDEMPOTENT_REPLAYED], "true");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"id,price\nq_1,12.50\n");
        // An answer without a content type replays without one.
        stored.body = Some(StoredBody::default());
        let response = replay_response(stored, op(), &Refuse).await;
        assert!(response.headers().get("content-type").is_none());
    }

    #[tokio::test]
    async fn failures_round_trip_their_status_and_code() {
        let failure = Failure {
            code: "card_declined".into(),
            message: "declined".into(),
        };
        let stored = capture_failure(StatusCode::PAYMENT_REQUIRED, Some(&failure));
        assert!(stored.validate().is_ok());
        assert_eq!(
            parse_failure(&stored),
            (StatusCode::PAYMENT_REQUIRED, failure)
        );
        let foreign = ErrorSummary {
            code: "declined".into(),
            message: String::new(),
        };
        assert_eq!(parse_failure(&foreign).0, StatusCode::UNPROCESSABLE_ENTITY);
        let response = replay_failure(&stored, op(), &JsonRender).await;
        assert_eq!(response.status(), StatusCode::PAYMENT_REQUIRED);
        assert_eq!(response.headers()[IDEMPOTENT_REPLAYED], "true");
        let default = capture_failure(StatusCode::NOT_FOUND, None);
        assert_eq!(default.code, "http-404.error");
    }
}
