//! Plays the language-neutral conformance cases (`tests/conformance/cases.json`, schema
//! `idem-http-conformance/v1`: its `schema_doc` says how to read it) against the layer on a
//! reference axum app and a real 3-node cluster.
//!
//! The Python middleware's cases (`clients/python/tests/conformance/cases.json`) use the
//! same schema and are played too. Where the two middlewares deliberately differ, the case
//! is listed in [`PYTHON_DIVERGENCES`] and must *fail* here: when the behaviours converge,
//! the test says so and the entry goes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::BodyExt;
use idem_client::{Client, ClientOptions, RetryPolicy};
use idem_http::{Config, IdempotencyLayer, InFlight, Resource, RoutePolicy, ScopeSource};
use idem_tests::{Cluster, ClusterOptions};
use serde_json::{json, Value};
use tower::ServiceExt;

/// Cases of the Python file whose expected answer this layer deliberately does not give.
const PYTHON_DIVERGENCES: &[(&str, &str)] = &[(
    "body-must-be-json",
    "a body that is not JSON is fingerprinted by its SHA-256 here (case non-json-body-hashed), \
     not refused with 400",
)];

/// The reference app's handler: answers as the current step says, counts its runs.
#[derive(Default)]
struct Reference {
    spec: Mutex<Value>,
    runs: AtomicUsize,
}

async fn handle(State(app): State<Arc<Reference>>, _body: Bytes) -> Response {
    app.runs.fetch_add(1, Ordering::SeqCst);
    let spec = app.spec.lock().unwrap().clone();
    if let Some(ms) = spec.get("delay_ms").and_then(Value::as_u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if spec.get("raise").and_then(Value::as_bool) == Some(true) {
        panic!("the handler failed");
    }
    let status = spec.get("status").and_then(Value::as_u64).unwrap_or(200);
    let status = StatusCode::from_u16(status as u16).unwrap();
    let mut response = match spec.get("json") {
        Some(body) => json_response(body),
        None if ![204, 303, 304].contains(&status.as_u16()) => json_response(&json!({})),
        None => Response::new(Body::empty()),
    };
    *response.status_mut() = status;
    if let Some(headers) = spec.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            let name = HeaderName::try_from(name.as_str()).unwrap();
            let value = HeaderValue::try_from(value.as_str().unwrap()).unwrap();
            response.headers_mut().insert(name, value);
        }
    }
    if let Some(id) = spec.pointer("/json/id").and_then(Value::as_str) {
        response.extensions_mut().insert(Resource::new(id));
    }
    response
}

fn json_response(body: &Value) -> Response {
    let mut response = body.to_string().into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A header of the request head, or `default`.
fn header_or(name: &'static str, default: &'static str) -> ScopeSource {
    ScopeSource::Custom(Arc::new(move |parts| {
        let value = parts.headers.get(name).and_then(|v| v.to_str().ok());
        Some(value.unwrap_or(default).to_owned())
    }))
}

fn build(client: Client, policy: &Value, reference: Arc<Reference>) -> Router {
    let mut route = RoutePolicy::default();
    if let Some(required) = policy.get("required").and_then(Value::as_bool) {
        route.key_required = required;
    }
    if let Some(ms) = policy.get("wait_budget_ms").and_then(Value::as_u64) {
        route.in_flight = InFlight::Wait(Duration::from_millis(ms));
    }
    if let Some(status) = policy.get("reconciliation_status").and_then(Value::as_u64) {
        route.reconciliation_status = StatusCode::from_u16(status as u16).unwrap();
    }
    let config = Config::new("test")
        .tenant(header_or("x-tenant", "acme"))
        .actor(header_or("x-actor", "user-1"))
        .route(Method::POST, "/v1/charges", route.clone())
        .unwrap()
        .route(Method::POST, "/v1/accounts/{account}/charges", route)
        .unwrap();
    Router::new()
        .route("/v1/charges", post(handle).get(handle))
        .route("/v1/accounts/{account}/charges", post(handle))
        .with_state(reference)
        .layer(IdempotencyLayer::new(client, config))
}

fn client(endpoints: Vec<String>, unreachable: bool) -> Client {
    let mut options = ClientOptions::default();
    if unreachable {
        options.connect_timeout = Duration::from_millis(200);
        options.request_timeout = Duration::from_secs(1);
        options.retry = RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            ..RetryPolicy::default()
        };
    }
    Client::connect(endpoints, options).unwrap()
}

/// A fresh key `k-<32 hex>`.
fn fresh_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    format!("k-{nanos:016x}{:016x}", NEXT.fetch_add(1, Ordering::SeqCst))
}

/// One answer, read whole.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

async fn send(app: &Router, request: &Value, keys: &BTreeMap<&str, String>) -> Answer {
    let method = request["method"].as_str().unwrap();
    let mut builder = Request::builder()
        .method(method)
        .uri(request["path"].as_str().unwrap());
    if let Some(headers) = request.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            let mut value = value.as_str().unwrap().to_owned();
            for (placeholder, key) in keys {
                value = value.replace(placeholder, key);
            }
            builder = builder.header(name, value);
        }
    }
    let body = if let Some(json) = request.get("json") {
        builder = builder.header("content-type", "application/json");
        Body::from(json.to_string())
    } else if let Some(text) = request.get("body").and_then(Value::as_str) {
        Body::from(text.to_owned())
    } else {
        Body::empty()
    };
    let response = app
        .clone()
        .oneshot(builder.body(body).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// Checks one answer against an `expect` object.
fn check(answer: &Answer, expect: &Value) -> Result<(), String> {
    let text = String::from_utf8_lossy(&answer.body);
    let fail = |what: String| Err(format!("{what} (status {}, body {text})", answer.status));
    if let Some(status) = expect.get("status").and_then(Value::as_u64) {
        if u64::from(answer.status.as_u16()) != status {
            return fail(format!("status, expected {status}"));
        }
    }
    let header = |name: &str| answer.headers.get(name).and_then(|v| v.to_str().ok());
    for (name, value) in expect
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if header(name) != value.as_str() {
            return fail(format!(
                "header {name}: {:?}, expected {value}",
                header(name)
            ));
        }
    }
    for name in expect
        .get("headers_present")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if header(name.as_str().unwrap()).is_none() {
            return fail(format!("no {name} header"));
        }
    }
    for name in expect
        .get("headers_absent")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if header(name.as_str().unwrap()).is_some() {
            return fail(format!("unexpected {name} header"));
        }
    }
    let document: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    if let Some(slug) = expect.get("problem").and_then(Value::as_str) {
        let ok = header("content-type") == Some("application/problem+json")
            && document["type"] == format!("urn:idem:problem:{slug}")
            && document["status"] == answer.status.as_u16()
            && document["title"].as_str().is_some_and(|t| !t.is_empty())
            && document["reason"].as_str().is_some_and(|r| !r.is_empty());
        if !ok {
            return fail(format!("not a {slug} problem"));
        }
    }
    if let Some(json) = expect.get("json") {
        if &document != json {
            return fail(format!("body, expected {json}"));
        }
    }
    if let Some(members) = expect.get("json_includes").and_then(Value::as_object) {
        for (name, value) in members {
            if document.get(name) != Some(value) {
                return fail(format!("member {name}, expected {value}"));
            }
        }
    }
    Ok(())
}

async fn play_step(
    app: &Router,
    step: &Value,
    keys: &BTreeMap<&str, String>,
) -> Result<(), String> {
    let repeat = step.get("repeat").and_then(Value::as_u64).unwrap_or(1);
    let request = &step["request"];
    let answers = if step.get("concurrent").and_then(Value::as_bool) == Some(true) {
        let sends = (0..repeat).map(|_| send(app, request, keys));
        futures::future::join_all(sends).await
    } else {
        let mut answers = Vec::new();
        for _ in 0..repeat {
            answers.push(send(app, request, keys).await);
        }
        answers
    };
    if let Some(expected) = step.get("expect_statuses").and_then(Value::as_object) {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for answer in &answers {
            *counts
                .entry(answer.status.as_u16().to_string())
                .or_default() += 1;
        }
        let expected: BTreeMap<String, u64> = expected
            .iter()
            .map(|(s, n)| (s.clone(), n.as_u64().unwrap()))
            .collect();
        if counts != expected {
            return Err(format!("statuses {counts:?}, expected {expected:?}"));
        }
    }
    for answer in &answers {
        check(answer, step.get("expect").unwrap_or(&Value::Null))?;
        let by_status = format!("expect_{}", answer.status.as_u16());
        check(answer, step.get(&by_status).unwrap_or(&Value::Null))?;
    }
    Ok(())
}

/// Plays one case; the error names the step and what differed.
async fn play_case(cluster: &Cluster, case: &Value) -> Result<(), String> {
    let reference = Arc::new(Reference::default());
    let unreachable = case.get("store").and_then(Value::as_str) == Some("unreachable");
    let endpoints = if unreachable {
        vec![idem_tests::free_port().to_string()]
    } else {
        cluster.endpoints()
    };
    let policy = case.get("policy").cloned().unwrap_or(Value::Null);
    let app = build(client(endpoints, unreachable), &policy, reference.clone());
    let keys = BTreeMap::from([("$KEY2", fresh_key()), ("$KEY", fresh_key())]);
    for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
        let handler = step.get("handler").cloned();
        *reference.spec.lock().unwrap() = handler.unwrap_or(json!({"status": 200, "json": {}}));
        let step_no = i + 1;
        play_step(&app, step, &keys)
            .await
            .map_err(|e| format!("step {step_no}: {e}"))?;
        if let Some(runs) = step.get("handler_runs").and_then(Value::as_u64) {
            let ran = reference.runs.load(Ordering::SeqCst) as u64;
            if ran != runs {
                return Err(format!(
                    "step {step_no}: handler ran {ran} times, expected {runs}"
                ));
            }
        }
    }
    Ok(())
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        cases["schema"],
        "idem-http-conformance/v1",
        "{}",
        path.display()
    );
    cases
}

/// Plays every case of `file`; returns the failures by case name.
async fn play_file(path: &Path) -> BTreeMap<String, String> {
    let cluster = Cluster::start(3, ClusterOptions::default()).await;
    let mut failures = BTreeMap::new();
    for case in load(path)["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap().to_owned();
        if let Err(error) = play_case(&cluster, case).await {
            failures.insert(name, error);
        }
    }
    failures
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_cases() {
    let failures = play_file(&crate_dir().join("tests/conformance/cases.json")).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_cases_pass_except_the_listed_divergences() {
    let path = crate_dir().join("../../clients/python/tests/conformance/cases.json");
    let names: Vec<String> = load(&path)["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    let mut failures = play_file(&path).await;
    for (name, why) in PYTHON_DIVERGENCES {
        assert!(
            names.iter().any(|n| n == name),
            "divergence {name} names no case"
        );
        assert!(
            failures.remove(*name).is_some(),
            "case {name} passes now: remove it from the divergences ({why})"
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
