//! The latency the layer adds to a request with a new key: a handler that sleeps 5 ms, with
//! and without the layer, one request at a time against one real `idemd`; prints p50 and
//! p99 of both and their ratio (the figure in docs/http.md).
//!
//! Not part of the default run (it measures, it does not check behaviour):
//! `cargo test --release -p idem-http --test http overhead:: -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use idem_client::{Client, ClientOptions};
use idem_http::{Config, IdempotencyLayer, Principal, RoutePolicy};
use idem_tests::{Node, NodeOptions};
use tower::ServiceExt;

const REQUESTS: usize = 300;
const HANDLER: Duration = Duration::from_millis(5);

async fn handler() -> (StatusCode, &'static str) {
    tokio::time::sleep(HANDLER).await;
    (StatusCode::CREATED, "{}")
}

fn router() -> Router {
    Router::new().route("/v1/charges", post(handler))
}

/// Latencies of `REQUESTS` sequential requests, each with a new key, sorted.
async fn measure(app: &Router, run: &str) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        let request = Request::builder()
            .method(Method::POST)
            .uri("/v1/charges")
            .header("idempotency-key", format!("\"{run}-{i}\""))
            .header("content-type", "application/json")
            .extension(Principal {
                tenant: "acme".into(),
                actor: "user-1".into(),
            })
            .body(Body::from(r#"{"amount": 1000, "currency": "EUR"}"#))
            .unwrap();
        let started = Instant::now();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.into_body().collect().await.unwrap();
        latencies.push(started.elapsed());
    }
    latencies.sort();
    latencies
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn layer_overhead_per_new_key() {
    let node = Node::start(NodeOptions::default());
    let client = Client::connect(vec![node.endpoint()], ClientOptions::default()).unwrap();
    let config = Config::new("test")
        .route(Method::POST, "/v1/charges", RoutePolicy::default())
        .unwrap();
    let plain = router();
    let layered = router().layer(IdempotencyLayer::new(client, config));
    // Warm up connections and caches on both paths.
    measure(&layered, "warm").await;
    measure(&plain, "warm").await;
    let without = measure(&plain, "plain").await;
    let with = measure(&layered, "layer").await;
    let (p50_without, p50_with) = (quantile(&without, 0.5), quantile(&with, 0.5));
    let (p99_without, p99_with) = (quantile(&without, 0.99), quantile(&with, 0.99));
    println!(
        "handler {HANDLER:?}, {REQUESTS} new keys, one at a time: p50 {p50_without:?} without, \
         {p50_with:?} with the layer ({:.2}x, +{:?}); p99 {p99_without:?} / {p99_with:?} ({:.2}x)",
        p50_with.as_secs_f64() / p50_without.as_secs_f64(),
        p50_with.saturating_sub(p50_without),
        p99_with.as_secs_f64() / p99_without.as_secs_f64(),
    );
    assert!(
        p50_with >= p50_without,
        "the layer cannot be faster than no layer"
    );
}
