//! Support for the black-box tests: start, stop, kill and restart real `idemd` processes
//! on loopback ports, each with its own data directory and log file.
//!
//! Tests talk to nodes only through the public gRPC API (the Rust client) and the
//! `idemctl` binary, exactly as operators and services do.

mod binaries;
mod cluster;
mod node;
mod ports;

pub use binaries::{binary, idemctl};
pub use cluster::{poll, region_of, Cluster, ClusterOptions};
pub use node::{MemberSpec, Node, NodeAddrs, NodeOptions};
pub use ports::free_port;

use idem_client::{Client, ClientOptions};

/// A client for the given API endpoints with test-friendly timeouts.
pub fn client(endpoints: &[String]) -> Client {
    let options = ClientOptions::default();
    Client::connect(endpoints.to_vec(), options).expect("client options are valid")
}

use idem_client::ClaimRequest;
use idem_core::fingerprint::CanonicalRequest;
use idem_core::{IdempotencyKey, RecordKey, Scope, StoredResult};

/// The endpoint every test uses.
pub const ENDPOINT: &str = "POST /v1/charges";

/// A record key in the test scope.
pub fn target(key: &str) -> RecordKey {
    let scope = Scope::new("acme", "test", "user-42", ENDPOINT).expect("valid scope");
    RecordKey::new(scope, IdempotencyKey::new(key).expect("valid key"))
}

/// A claim of `target` for a charge request with `body`, fingerprinted by the client.
pub fn claim(target: &RecordKey, body: &str) -> ClaimRequest {
    let request = CanonicalRequest::new("POST", "/v1/charges")
        .expect("valid request")
        .with_json_body(body.as_bytes().to_vec());
    ClaimRequest::for_request(target.clone(), &request, 1).expect("fingerprint")
}

/// A stored result naming `resource`.
pub fn result(resource: &str) -> StoredResult {
    StoredResult {
        status_code: 201,
        resource_id: resource.into(),
        resource_version: "1".into(),
        fields: [("amount".to_string(), "1000".to_string())].into(),
        purged: false,
        body: None,
    }
}
