//! A scripted axum service behind the layer, for the tests that run against real `idemd`
//! processes (started with `idem_tests`).
//!
//! Requests go through the router in-process (`tower::ServiceExt::oneshot`): what is under
//! test is the layer and the store, not a TCP stack. The handler counts its runs and plays
//! a script of behaviours (succeed, sleep, panic, fail with a status, record `CALLING` and
//! then panic), one per run, so a test can make the first attempt crash and the retry
//! succeed with the same request.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::{HeaderName, Method, Request, StatusCode};
use http_body_util::BodyExt;
use idem_client::{Client, ClientOptions, RetryPolicy};
use idem_core::{Risk, Stage};
use idem_http::{
    Config, Failure, IdempotencyLayer, InFlight, Ledger, Principal, Resource, RoutePolicy,
    ScopeSource,
};
use tower::ServiceExt;

/// The protected route.
pub const ROUTE: &str = "/v1/accounts/{account}/charges";

/// What the handler does on one run.
#[derive(Clone, Debug, PartialEq)]
pub enum Behavior {
    /// 201 with a resource and a `Location`.
    Ok,
    /// Sleep, then 201.
    Sleep(Duration),
    /// Panic before anything irreversible.
    Panic,
    /// Record CALLING, then panic (an external call may have happened).
    CallingThenPanic,
    /// Answer this status (402 carries a `card_declined` failure).
    Status(u16),
}

/// The handler's shared state.
#[derive(Default)]
pub struct Script {
    runs: AtomicUsize,
    next: Mutex<VecDeque<Behavior>>,
    previous: Mutex<Vec<Option<Stage>>>,
}

impl Script {
    /// Plays `behaviors` on the next runs (then `Ok`).
    pub fn push(&self, behaviors: &[Behavior]) {
        self.next.lock().unwrap().extend(behaviors.iter().cloned());
    }

    /// Handler runs so far.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// The previous stage each run was told.
    pub fn previous_stages(&self) -> Vec<Option<Stage>> {
        self.previous.lock().unwrap().clone()
    }
}

async fn charge(
    State(script): State<Arc<Script>>,
    Path(account): Path<String>,
    ledger: Ledger,
    body: Bytes,
) -> Response {
    let run = script.runs.fetch_add(1, Ordering::SeqCst) + 1;
    script
        .previous
        .lock()
        .unwrap()
        .push(ledger.previous_stage());
    let behavior = script
        .next
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Behavior::Ok);
    match behavior {
        Behavior::Ok => {}
        Behavior::Sleep(d) => tokio::time::sleep(d).await,
        Behavior::Panic => panic!("scripted panic"),
        Behavior::CallingThenPanic => {
            ledger.calling().await.expect("record CALLING");
            panic!("scripted panic after CALLING");
        }
        Behavior::Status(402) => {
            let failure = Failure {
                code: "card_declined".into(),
                message: "declined".into(),
            };
            return (StatusCode::PAYMENT_REQUIRED, failure, "declined").into_response();
        }
        Behavior::Status(code) => {
            return (StatusCode::from_u16(code).unwrap(), "scripted").into_response();
        }
    }
    let id = format!("ch_{account}_{run}");
    let amount = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("amount").cloned())
        .unwrap_or_default()
        .to_string();
    let resource = Resource::new(id.clone())
        .version("1")
        .field("amount", amount);
    let location = format!("/v1/charges/{id}");
    let body = serde_json::json!({"id": id, "operation_id": ledger.downstream_key()}).to_string();
    (
        StatusCode::CREATED,
        [(http::header::LOCATION, location)],
        resource,
        body,
    )
        .into_response()
}

/// The route policy the tests start from.
pub fn policy() -> RoutePolicy {
    RoutePolicy {
        lease: Duration::from_secs(5),
        ..RoutePolicy::default()
    }
}

/// A client of `endpoints` that gives up quickly when nothing answers.
pub fn client(endpoints: Vec<String>) -> Client {
    let options = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(3),
        retry: RetryPolicy {
            max_attempts: 6,
            ..RetryPolicy::default()
        },
        ..ClientOptions::default()
    };
    Client::connect(endpoints, options).unwrap()
}

/// The service: `POST ROUTE` protected by `policy`, `GET /health` not, tenant from the
/// `x-tenant` header (default `acme`), actor from the [`Principal`].
pub fn app(client: Client, policy: RoutePolicy, script: Arc<Script>) -> Router {
    let tenant_header = HeaderName::from_static("x-tenant");
    let config = Config::new("test")
        .tenant(ScopeSource::Custom(Arc::new(move |parts| {
            let header = parts.headers.get(&tenant_header);
            Some(
                header
                    .map_or("acme", |v| v.to_str().unwrap_or(""))
                    .to_owned(),
            )
        })))
        .route(Method::POST, ROUTE, policy)
        .unwrap();
    Router::new()
        .route(ROUTE, post(charge))
        .route("/health", get(|| async { "ok" }))
        .with_state(script)
        .layer(IdempotencyLayer::new(client, config))
        .layer(Extension(Principal {
            tenant: "ignored".into(),
            actor: "user-42".into(),
        }))
}

/// A policy with a high risk class.
pub fn high_risk() -> RoutePolicy {
    RoutePolicy {
        risk: Risk::High,
        ..policy()
    }
}

/// A policy that holds duplicates for `budget`.
pub fn waiting(budget: Duration) -> RoutePolicy {
    RoutePolicy {
        in_flight: InFlight::Wait(budget),
        ..policy()
    }
}

/// An answer, read whole.
#[derive(Clone, Debug)]
pub struct Answer {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: http::HeaderMap,
    /// The body as JSON (`Null` when it is not JSON).
    pub json: serde_json::Value,
    /// The body's bytes.
    pub body: Bytes,
}

impl Answer {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// True for a replayed answer.
    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The problem type, if the answer is a problem.
    pub fn problem_type(&self) -> Option<&str> {
        self.json.get("type").and_then(|t| t.as_str())
    }
}

/// A request to the app.
pub struct Call {
    /// Method.
    pub method: Method,
    /// Path and query.
    pub uri: String,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: String,
}

impl Call {
    /// `POST /v1/accounts/a1/charges` with `key` (as a quoted string) and `body`.
    pub fn charge(key: &str, body: &str) -> Call {
        Call {
            method: Method::POST,
            uri: "/v1/accounts/a1/charges".into(),
            headers: vec![
                ("idempotency-key".into(), format!("\"{key}\"")),
                ("content-type".into(), "application/json".into()),
            ],
            body: body.into(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Call {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Removes every header of `name`.
    pub fn without(mut self, name: &str) -> Call {
        self.headers.retain(|(n, _)| n != name);
        self
    }

    /// Sends it through `app`.
    pub async fn send(&self, app: &Router) -> Answer {
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(&self.uri);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = request.body(Body::from(self.body.clone())).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            json: serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
            body: bytes,
        }
    }
}

/// The charge body of the tests.
pub const BODY: &str = r#"{"amount": 1000, "currency": "EUR"}"#;
