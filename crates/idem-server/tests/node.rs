//! In-process node tests: a real node (RocksDB, openraft, tonic) on a temporary data
//! directory and ephemeral ports, driven through the generated gRPC clients.

use crate::support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{reason, status};
use idem_server::config::AuthConfig;
use idem_server::{Config, Node, NodeError, NodeHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;
use tonic::Code;

fn config(dir: &Path) -> Config {
    let any = "127.0.0.1:0".parse().unwrap();
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        api_addr: any,
        raft_addr: any,
        http_addr: any,
        max_request_bytes: 256 * 1024,
        max_body_bytes: 64 * 1024,
        shutdown_grace: Duration::from_secs(5),
        auth: AuthConfig::off(),
        ..Config::default()
    };
    config.raft.heartbeat_interval = Duration::from_millis(50);
    config.raft.election_timeout = Duration::from_millis(300);
    config
}

async fn start(config: Config) -> NodeHandle {
    let node = Node::start(config).await.expect("node starts");
    node.wait_ready(Duration::from_secs(10))
        .await
        .expect("single node elects itself");
    node
}

async fn client(addr: SocketAddr) -> IdempotencyClient<Channel> {
    IdempotencyClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

fn scope() -> pb::Scope {
    requests::scope("acme")
}

fn claim(key: &str, holder: &str, body: &str) -> pb::ClaimRequest {
    requests::claim(scope(), key, holder, body)
}

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: idem\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_complete_replay_mismatch_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(config(dir.path())).await;
    let mut api = client(node.api_addr()).await;

    let body = r#"{"amount": 100, "currency": "EUR"}"#;
    let first = api
        .claim(claim("order-7f3a", "worker-1/a", body))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.outcome(), pb::ClaimOutcome::Acquired);
    assert_eq!(first.fence, 1);

    let done = api
        .complete(pb::CompleteRequest {
            scope: Some(scope()),
            key: "order-7f3a".into(),
            fence: first.fence,
            result: Some(pb::StoredResult {
                status_code: 201,
                resource_id: "ch_123".into(),
                fields: HashMap::from([("amount".to_owned(), "100".to_owned())]),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(done.state(), pb::State::Completed);

    // Same request, other spelling, another worker: replayed.
    let replay = api
        .claim(claim(
            "order-7f3a",
            "worker-2/a",
            r#"{"currency":"EUR","amount":1e2}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);
    assert_eq!(replay.result.as_ref().unwrap().resource_id, "ch_123");
    assert_eq!(replay.operation_id, first.operation_id);

    // Another request under the same key: refused, record untouched.
    let mismatch = api
        .claim(claim("order-7f3a", "worker-3/a", r#"{"amount": 999}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mismatch.outcome(), pb::ClaimOutcome::FingerprintMismatch);
    assert!(mismatch.result.is_none());

    // Errors carry reasons.
    let err = api
        .start(pb::StartRequest {
            scope: Some(scope()),
            key: "order-7f3a".into(),
            fence: 7,
        })
        .await
        .unwrap_err();
    support::refused(&err, Code::FailedPrecondition, reason::STALE_FENCE);

    // Request size limit.
    let huge = format!("\"{}\"", "x".repeat(300 * 1024));
    let err = api
        .claim(claim("order-big", "worker-1/b", &huge))
        .await
        .unwrap_err();
    support::refused(&err, Code::ResourceExhausted, reason::REQUEST_TOO_LARGE);
    let big_body = format!("\"{}\"", "x".repeat(100 * 1024));
    let err = api
        .claim(claim("order-big", "worker-1/b", &big_body))
        .await
        .unwrap_err();
    assert_eq!(
        status::reason_of(&err).as_deref(),
        Some(reason::BODY_TOO_LARGE)
    );

    // HTTP port.
    let (code, health) = http_get(node.http_addr(), "/healthz").await;
    assert_eq!((code, health.trim()), (200, "ok: leader 1"));
    let (code, metrics) = http_get(node.http_addr(), "/metrics").await;
    assert_eq!(code, 200);
    for line in [
        "idem_claims_total{outcome=\"ACQUIRED\"} 1",
        "idem_claims_total{outcome=\"COMPLETED\"} 1",
        "idem_claims_total{outcome=\"FINGERPRINT_MISMATCH\"} 1",
        "idem_stale_fences_total 1",
        "idem_records{state=\"COMPLETED\"} 1",
        "idem_raft_is_leader 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in\n{metrics}"
        );
    }
    assert!(!metrics.contains("order-7f3a"), "metrics never carry keys");

    // gRPC health.
    let channel = Channel::from_shared(format!("http://{}", node.api_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "idem.v1.Idempotency", "idem.v1.Admin"] {
        let answer = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            answer.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving,
            "{service:?}"
        );
    }

    // Admin.
    let mut admin = AdminClient::new(channel);
    let status = admin
        .status(pb::StatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!((status.node_id, status.leader_id), (1, 1));
    assert!(status.applied_index >= 3);
    assert_eq!(status.membership.len(), 1);
    assert!(status.membership[0].voter);
    assert_eq!(status.membership[0].region, "local");
    assert_eq!(status.membership[0].api_addr, node.api_addr().to_string());
    assert_eq!(status.records_by_state.get("STATE_COMPLETED"), Some(&1));

    node.shutdown().await.unwrap();

    // Restart on the same directory: the record is still there, replays still replay.
    let node = start(config(dir.path())).await;
    let mut api = client(node.api_addr()).await;
    let got = api
        .get(pb::GetRequest {
            scope: Some(scope()),
            key: "order-7f3a".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.outcome(), pb::ClaimOutcome::Completed);
    let record = got.record.unwrap();
    assert_eq!(record.operation_id, first.operation_id);
    assert_eq!(record.result.unwrap().resource_id, "ch_123");
    let replay = api
        .claim(claim("order-7f3a", "worker-4/a", body))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);
    node.shutdown().await.unwrap();

    // The directory belongs to node 1.
    let mut other = config(dir.path());
    other.node_id = 2;
    match Node::start(other).await {
        Err(error @ NodeError::IdentityMismatch { .. }) => assert_eq!(error.exit_code(), 2),
        Err(other) => panic!("expected an identity mismatch, got {other}"),
        Ok(_) => panic!("a data directory must not change its node id"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_long_polls_until_completion() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(config(dir.path())).await;
    let mut api = client(node.api_addr()).await;
    let first = api
        .claim(claim("order-wait", "worker-1", "{}"))
        .await
        .unwrap()
        .into_inner();
    let mut waiter = api.clone();
    let wait = tokio::spawn(async move {
        waiter
            .wait(pb::WaitRequest {
                operation_id: first.operation_id.clone(),
                timeout_ms: 10_000,
                ..Default::default()
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!wait.is_finished());
    api.cancel(pb::CancelRequest {
        scope: Some(scope()),
        key: "order-wait".into(),
        fence: 1,
    })
    .await
    .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("wait answers when the record settles")
        .unwrap()
        .unwrap()
        .into_inner();
    assert!(done.terminal);
    assert_eq!(done.outcome(), pb::ClaimOutcome::Failed);
    assert_eq!(done.record.unwrap().state(), pb::State::Cancelled);
    node.shutdown().await.unwrap();
}
