//! The bounds of `idem.v1.Backup/SaveSnapshot` on a real node: while one backup streams,
//! a second is refused with `OVERLOADED`; a reader that stops reading is given up after
//! `limits.backup_idle_timeout` (the stream it resumes ends with `DEADLINE_EXCEEDED`
//! after the queued data, mid-stream), and the node's one backup slot is free again.

use crate::support;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use idem_proto::reason;
use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::backup_client::BackupClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::v1::save_snapshot_response::Part;
use idem_server::config::AuthConfig;
use idem_server::{Config, Node, NodeHandle};
use tonic::transport::{Channel, Endpoint};
use tonic::Streaming;

/// The idle bound of the node under test.
const IDLE: Duration = Duration::from_secs(1);
/// Records written, each with a stored body of [`BODY_BYTES`]: a backup of ~10 MiB, more
/// than the stream's queue (4 MiB) and the reader's HTTP/2 window (64 KiB) hold.
const RECORDS: usize = 12;
const BODY_BYTES: usize = 900 * 1024;

fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

async fn node(data_dir: PathBuf) -> NodeHandle {
    let mut config = Config {
        data_dir,
        api_addr: free_addr(),
        raft_addr: free_addr(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        shutdown_grace: Duration::from_secs(1),
        auth: AuthConfig::off(),
        ..Config::default()
    };
    config.raft.heartbeat_interval = Duration::from_millis(100);
    config.raft.election_timeout = Duration::from_millis(500);
    config.policies.default.max_result_bytes = 1 << 20;
    config.limits.backup_idle_timeout = IDLE;
    let node = Node::start(config).await.expect("node starts");
    node.wait_ready(Duration::from_secs(20)).await.unwrap();
    node
}

/// A connection whose HTTP/2 windows are small, so that a reader that stops reading
/// holds back the server after a few chunks rather than after megabytes of buffers.
async fn channel(node: &NodeHandle) -> Channel {
    Endpoint::from_shared(format!("http://{}", node.api_addr()))
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap()
}

/// Claims and completes `RECORDS` keys, each with a large stored body (incompressible).
async fn fill(node: &NodeHandle) {
    let mut client = IdempotencyClient::new(channel(node).await);
    for i in 0..RECORDS {
        let key = format!("big-{i}");
        let fence = client
            .claim(requests::claim(requests::scope("acme"), &key, "w", "{}"))
            .await
            .unwrap()
            .into_inner()
            .fence;
        let mut complete = requests::complete(requests::scope("acme"), &key, fence);
        let result = complete.result.as_mut().unwrap();
        result.fields.clear();
        result.result_version = 1;
        result.content_type = "application/octet-stream".into();
        result.body = (0..BODY_BYTES)
            .map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8 ^ i as u8)
            .collect();
        client.complete(complete).await.unwrap();
    }
}

async fn save_snapshot(
    channel: Channel,
) -> Result<Streaming<pb::SaveSnapshotResponse>, tonic::Status> {
    BackupClient::new(channel)
        .max_decoding_message_size(4 << 20)
        .save_snapshot(pb::SaveSnapshotRequest {})
        .await
        .map(tonic::Response::into_inner)
}

/// Reads `stream` to its end: the bytes of its chunks, and whether a trailer came, or the
/// status it ended with.
async fn drain(
    stream: &mut Streaming<pb::SaveSnapshotResponse>,
) -> (u64, Result<Option<pb::BackupTrailer>, tonic::Status>) {
    let mut bytes = 0;
    loop {
        match stream.message().await {
            Ok(Some(message)) => match message.part.unwrap() {
                Part::Header(_) => {}
                Part::Chunk(chunk) => bytes += chunk.len() as u64,
                Part::Trailer(trailer) => return (bytes, Ok(Some(trailer))),
            },
            Ok(None) => return (bytes, Ok(None)),
            Err(status) => return (bytes, Err(status)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_backup_is_given_up_and_a_concurrent_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path().join("data")).await;
    fill(&node).await;

    // A reader that takes the header, then stops reading.
    let mut stalled = save_snapshot(channel(&node).await).await.unwrap();
    let first = stalled.message().await.unwrap().unwrap();
    assert!(matches!(first.part, Some(Part::Header(_))), "{first:?}");

    // While it holds the node's backup slot, a second backup is refused, with a retry hint.
    let refused = save_snapshot(channel(&node).await).await.unwrap_err();
    support::refused(&refused, tonic::Code::ResourceExhausted, reason::OVERLOADED);
    assert!(
        refused
            .metadata()
            .get(reason::RETRY_AFTER_MS_METADATA_KEY)
            .is_some(),
        "{refused:?}"
    );

    // Past the idle bound the node gives up on the stalled reader: when it reads again, it
    // gets what was queued, then DEADLINE_EXCEEDED instead of the rest of the backup.
    tokio::time::sleep(IDLE * 2).await;
    let (bytes, end) = drain(&mut stalled).await;
    let status = end.expect_err("the stalled stream ends with an error, not a trailer");
    support::refused(
        &status,
        tonic::Code::DeadlineExceeded,
        reason::DEADLINE_EXCEEDED,
    );
    assert!(
        status.message().contains("backup_idle_timeout"),
        "{status:?}"
    );
    let whole = (RECORDS * BODY_BYTES) as u64;
    assert!(
        bytes < whole,
        "only part of the backup was sent: {bytes} of >{whole}"
    );

    // The slot is free again: a reader that keeps up gets the whole backup.
    let mut next = save_snapshot(channel(&node).await).await.unwrap();
    let (bytes, end) = drain(&mut next).await;
    let trailer = end
        .unwrap()
        .expect("a complete backup ends with its trailer");
    assert_eq!(trailer.length, bytes);
    assert!(bytes > whole, "{bytes}");

    node.shutdown().await.unwrap();
}
