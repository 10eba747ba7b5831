//! What the SDK's integration tests share: the records and answers their in-process fake
//! nodes give, loopback listeners, and the client options and requests the tests send.
//!
//! Each test module uses a different part of it.
#![allow(dead_code)]

pub mod fake;

use std::time::Duration;

use idem_client::{ClaimRequest, ClientOptions, RetryPolicy, Target};
use idem_core::fingerprint::{CanonicalRequest, Fingerprint};
use idem_core::{
    IdempotencyKey, OperationId, Policy, Record, RecordKey, Scope, Stage, State, Timestamp,
};
use idem_proto::v1;
use tokio::net::TcpListener;

/// The operation id of every record the fakes answer.
pub fn operation_id() -> OperationId {
    "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap()
}

/// An IN_PROGRESS record of `target` at `fence`, as a started claim leaves it.
pub fn record(target: &Target, fence: u64) -> Record {
    Record {
        key: target.clone(),
        operation_id: operation_id(),
        fingerprint: Fingerprint::new("jcs-sha256/v1", 1, vec![1; 32]).unwrap(),
        state: State::InProgress,
        stage: Stage::NotCalled,
        remote_ref: None,
        previous_stage: None,
        fence,
        lease: None,
        attempts: 1,
        version: 2,
        policy: Policy::default(),
        result: None,
        error: None,
        created_at: Timestamp(1),
        updated_at: Timestamp(2),
        completed_at: None,
        expires_at: None,
    }
}

/// The record key a request names on the wire.
pub fn target_of(scope: Option<v1::Scope>, key: String) -> Target {
    let s = scope.unwrap();
    let scope = Scope::new(s.tenant, s.environment, s.actor, s.endpoint).unwrap();
    RecordKey::new(scope, IdempotencyKey::new(key).unwrap())
}

/// The answer to a first claim: ACQUIRED at fence 1.
pub fn acquired() -> v1::ClaimResponse {
    v1::ClaimResponse {
        outcome: v1::ClaimOutcome::Acquired as i32,
        operation_id: operation_id().to_string(),
        fence: 1,
        state: v1::State::Pending as i32,
        stage: v1::Stage::NotCalled as i32,
        version: 1,
        attempts: 1,
        lease_expires_at_ms: 30_000,
        ..Default::default()
    }
}

/// A loopback listener and its `host:port`.
pub async fn listener() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    (listener, addr)
}

/// A loopback address nobody listens on (connections are refused).
pub async fn dead_addr() -> String {
    listener().await.1
}

/// Client options with short timeouts and backoffs, and `max_attempts` attempts per call.
pub fn options(max_attempts: u32) -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        retry: RetryPolicy {
            max_attempts,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            total_budget: Duration::from_secs(10),
        },
        ..ClientOptions::default()
    }
}

/// The key `order-7f3a` of `tenant`'s charge endpoint.
pub fn target(tenant: &str) -> Target {
    let scope = Scope::new(tenant, "prod", "user-42", "POST /v1/charges").unwrap();
    RecordKey::new(scope, IdempotencyKey::new("order-7f3a").unwrap())
}

/// A claim of [`target`] for a small JSON charge.
pub fn claim(tenant: &str) -> ClaimRequest {
    let request = CanonicalRequest::new("POST", "/v1/charges")
        .unwrap()
        .with_json_body(r#"{"amount":100}"#);
    ClaimRequest::for_request(target(tenant), &request, 1).unwrap()
}
