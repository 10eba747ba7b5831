//! What the reconciler tests share: the charge endpoint's scope, claims as the payment
//! service makes them, a worker that dies after recording `CALLING`, and the provider on a
//! loopback port.

#![allow(dead_code)] // each test module uses its own part

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use idem_client::idem_core::fingerprint::CanonicalRequest;
use idem_client::idem_core::{IdempotencyKey, OperationId, RecordKey, Risk, Scope};
use idem_client::{ClaimRequest, Client};
use payments::provider_client::ProviderClient;
use serde_json::Value;

/// The endpoint of the payment service's charges.
pub const ENDPOINT: &str = "POST /v1/charges";

/// The lease of the dying workers' claims.
pub const LEASE: Duration = Duration::from_millis(300);

/// The record of `key` in the payment service's scope (tenant acme, environment test,
/// actor user-42).
pub fn target(key: &str) -> RecordKey {
    let scope = Scope::new("acme", "test", "user-42", ENDPOINT).unwrap();
    RecordKey::new(scope, IdempotencyKey::new(key).unwrap())
}

/// The claim of a 1000 EUR charge under `key`.
pub fn claim(key: &str, risk: Risk) -> ClaimRequest {
    let request = CanonicalRequest::new("POST", "/v1/charges")
        .unwrap()
        .with_json_body(r#"{"amount":1000,"currency":"EUR"}"#);
    ClaimRequest::for_request(target(key), &request, 1)
        .unwrap()
        .risk(risk)
        .lease(LEASE)
}

/// A worker that claims, records CALLING, charges if `charge`, and then dies: nothing after.
/// Answers the operation id and the fence it held.
pub async fn dying_worker(
    idem: &Client,
    provider: &ProviderClient,
    key: &str,
    risk: Risk,
    charge: bool,
) -> (OperationId, u64) {
    let claimed = idem.claim(claim(key, risk)).await.unwrap();
    let fence = claimed.fence().expect("acquired");
    idem.start(&target(key), fence).await.unwrap();
    idem.record_calling(&target(key), fence, None)
        .await
        .unwrap();
    if charge {
        let id = claimed.operation_id.to_string();
        provider.charge(&id, 1000, "EUR").await.unwrap();
    }
    (claimed.operation_id, fence)
}

/// Serves `router` on a fresh loopback port.
pub async fn listen(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(payments::serve_on(listener, router));
    addr
}

/// The payment service's answer to a charge.
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// Whether the layer replayed a stored answer (`Idempotent-Replayed`).
    pub replayed: bool,
    /// The JSON body (null when it is not JSON).
    pub json: Value,
}

/// `POST /v1/charges` as acme/user-42 with `Idempotency-Key: "key"`.
pub async fn post(addr: SocketAddr, key: &str, body: &str) -> Reply {
    send(addr, Method::POST, "/v1/charges", Some(key), body).await
}

/// `method path` on the payment service at `addr` as acme/user-42, with
/// `Idempotency-Key: "key"` when given.
pub async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> Reply {
    let http = HttpClient::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("authorization", "Bearer acme/user-42")
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("idempotency-key", format!("\"{key}\""));
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = http.request(request).await.unwrap();
    let status = response.status();
    let replayed = response.headers().get("idempotent-replayed").is_some();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        replayed,
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// A real node, the provider and the payment service on loopback ports.
pub struct Setup {
    /// The idem node.
    pub node: idem_tests::Node,
    /// The fake provider.
    pub provider: std::sync::Arc<payments::provider::Provider>,
    /// The provider's base URL.
    pub provider_base: String,
    /// A client of the node.
    pub idem: Client,
    /// The payment service.
    pub addr: SocketAddr,
}

/// Starts a node, the provider and the payment service (environment `test`).
pub async fn setup() -> Setup {
    let node = idem_tests::Node::start(idem_tests::NodeOptions::default());
    let provider = std::sync::Arc::new(payments::provider::Provider::default());
    let provider_base = format!("http://{}", listen(provider.clone().router()).await);
    let idem =
        Client::connect(vec![node.endpoint()], idem_client::ClientOptions::default()).unwrap();
    let addr = listen(payments::app(idem.clone(), &provider_base, "test")).await;
    Setup {
        node,
        provider,
        provider_base,
        idem,
        addr,
    }
}
