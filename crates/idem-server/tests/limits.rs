//! Limits against a real node: load shedding under a flood of streams (health stays
//! SERVING), the caller's deadline, snapshots refused before their body on the Raft port,
//! and `Forward.Propose` refusing leader-only commands.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use idem_core::command::Expire;
use idem_core::Command;
use idem_proto::raft_v1 as rpb;
use idem_proto::v1 as pb;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{reason, status};
use idem_server::config::AuthConfig;
use idem_server::{Config, Node, NodeHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// Requests the node admits at once in these tests.
const IN_FLIGHT: usize = 8;
/// Concurrent long polls sent at once.
const FLOOD: usize = 50;

fn config(dir: &Path) -> Config {
    let any = "127.0.0.1:0".parse().unwrap();
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        api_addr: any,
        raft_addr: any,
        http_addr: any,
        auth: AuthConfig::off(),
        ..Config::default()
    };
    config.raft.heartbeat_interval = Duration::from_millis(50);
    config.raft.election_timeout = Duration::from_millis(300);
    config.limits.max_in_flight = IN_FLIGHT;
    config.limits.max_snapshot_bytes = 1 << 20;
    config
}

async fn start(dir: &Path) -> NodeHandle {
    let node = Node::start(config(dir)).await.expect("node starts");
    node.wait_ready(Duration::from_secs(10))
        .await
        .expect("single node elects itself");
    node
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect")
}

fn scope() -> pb::Scope {
    pb::Scope {
        tenant: "acme".into(),
        environment: "prod".into(),
        actor: "user-42".into(),
        endpoint: "POST /v1/charges".into(),
    }
}

async fn claim(client: &mut IdempotencyClient<Channel>, key: &str) -> pb::ClaimResponse {
    let request = pb::ClaimRequest {
        scope: Some(scope()),
        key: key.into(),
        fingerprints: vec![pb::Fingerprint {
            algorithm: "jcs-sha256/v1".into(),
            schema_version: 1,
            digest: vec![7; 32],
        }],
        holder: "w-1".into(),
        ..Default::default()
    };
    client.claim(request).await.expect("claim").into_inner()
}

fn wait_for(key: &str, budget: Duration) -> pb::WaitRequest {
    pb::WaitRequest {
        scope: Some(scope()),
        key: key.into(),
        timeout_ms: budget.as_millis() as u64,
        ..Default::default()
    }
}

async fn metrics(addr: SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: idem\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text
}

fn refusals(metrics: &str, reason: &str, kind: &str) -> u64 {
    let series = format!("idem_limit_refusals_total{{kind=\"{kind}\",reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test]
async fn a_flood_of_streams_is_shed_exactly_and_the_node_keeps_serving() {
    let dir = tempfile::TempDir::new().unwrap();
    let node = start(dir.path()).await;
    let channel = channel(node.api_addr()).await;
    let mut client = IdempotencyClient::new(channel.clone());
    claim(&mut client, "order-1").await;

    // Long polls on a PENDING record hold their slot for the whole budget.
    let budget = Duration::from_secs(2);
    let calls = (0..FLOOD).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.wait(wait_for("order-1", budget)).await })
    });
    let calls: Vec<_> = calls.collect();
    // While the flood holds every slot, health checks are still answered SERVING.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "idem.v1.Idempotency".into(),
        })
        .await
        .expect("health is never shed")
        .into_inner();
    assert_eq!(health.status(), ServingStatus::Serving);

    let mut served = 0;
    let mut shed = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(_) => served += 1,
            Err(refused) => {
                support::refused(&refused, Code::ResourceExhausted, reason::OVERLOADED);
                assert!(status::retry_after(&refused).is_some());
                shed += 1;
            }
        }
    }
    assert_eq!((served, shed), (IN_FLIGHT, FLOOD - IN_FLIGHT));
    let scraped = metrics(node.http_addr()).await;
    assert_eq!(
        refusals(&scraped, reason::OVERLOADED, "request"),
        (FLOOD - IN_FLIGHT) as u64
    );
    // Once the flood is over, the node serves again.
    claim(&mut client, "order-2").await;
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_callers_deadline_bounds_a_handler() {
    let dir = tempfile::TempDir::new().unwrap();
    let node = start(dir.path()).await;
    let mut client = IdempotencyClient::new(channel(node.api_addr()).await);
    claim(&mut client, "order-1").await;
    let mut request = tonic::Request::new(wait_for("order-1", Duration::from_secs(10)));
    request.set_timeout(Duration::from_millis(400));
    let started = Instant::now();
    let cut = client.wait(request).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(cut.code(), Code::DeadlineExceeded, "{cut:?}");
    node.shutdown().await.unwrap();
}

fn snapshot_header(vote: idem_store::Vote, size: u64) -> rpb::SnapshotChunk {
    let meta = idem_store::SnapshotMeta::default();
    rpb::SnapshotChunk {
        group: 0,
        format: rpb::Format::BincodeV1.into(),
        chunk: Some(rpb::snapshot_chunk::Chunk::Header(rpb::SnapshotHeader {
            vote: bincode::serialize(&vote).unwrap().into(),
            meta: bincode::serialize(&meta).unwrap().into(),
            size,
        })),
    }
}

#[tokio::test]
async fn snapshots_are_refused_before_their_body_and_the_node_keeps_serving() {
    let dir = tempfile::TempDir::new().unwrap();
    let node = start(dir.path()).await;
    let mut raft = rpb::raft_client::RaftClient::new(channel(node.raft_addr()).await);

    // Announced above max_snapshot_bytes: refused at once, whatever the vote.
    let huge = snapshot_header(idem_store::Vote::new_committed(1000, 9), 4 << 30);
    let refused = raft
        .install_snapshot(tokio_stream::iter(vec![huge]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("SNAPSHOT_TOO_LARGE"));

    // From a stale leader: answered with this node's vote, the body never read.
    let stale = snapshot_header(idem_store::Vote::new(0, 9), 1024);
    let data = rpb::SnapshotChunk {
        group: 0,
        format: rpb::Format::BincodeV1.into(),
        chunk: Some(rpb::snapshot_chunk::Chunk::Data(vec![0; 1024].into())),
    };
    raft.install_snapshot(tokio_stream::iter(vec![stale, data]))
        .await
        .expect("a stale vote is an answer, not an error");

    let scraped = metrics(node.http_addr()).await;
    assert_eq!(refusals(&scraped, "SNAPSHOT_TOO_LARGE", "snapshot"), 1);
    assert_eq!(refusals(&scraped, "STALE_VOTE", "snapshot"), 1);
    // Still the leader, still serving.
    let mut client = IdempotencyClient::new(channel(node.api_addr()).await);
    let claimed = claim(&mut client, "after-snapshots").await;
    assert_eq!(claimed.outcome(), pb::ClaimOutcome::Acquired);
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn forward_refuses_leader_only_commands() {
    let dir = tempfile::TempDir::new().unwrap();
    let node = start(dir.path()).await;
    let mut forward = rpb::forward_client::ForwardClient::new(channel(node.raft_addr()).await);
    let expire = Command::Expire(Expire { limit: 1000 });
    let refused = forward
        .propose(rpb::ForwardRequest {
            group: 0,
            payload: bincode::serialize(&expire).unwrap().into(),
            principal: None,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("Expire"),
        "{}",
        refused.message()
    );
    node.shutdown().await.unwrap();
}
