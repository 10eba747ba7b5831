//! Online backup and restore (`idem.v1.Backup`, `idem_store::restore`): a backup taken from
//! a follower of a 3-node cluster under a write load holds every claim and complete
//! acknowledged before it started; restored into a new cluster (one restored node, two that
//! join), every such record is found with its result and fence; a damaged file is refused.

use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::backup_client::BackupClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::v1::save_snapshot_response::Part;
use idem_server::config::AuthConfig;
use idem_server::{ClusterConfig, InitialMember, Node, NodeHandle};
use idem_store::{BackupError, BackupFile, NodeInfo};
use support::{channel, member, node_config, roles};
use tokio::sync::watch;
use tonic::transport::Channel;

/// A claim or complete the cluster acknowledged, and when.
#[derive(Clone, Debug)]
struct Ack {
    key: String,
    fence: u64,
    completed: bool,
    at: Instant,
}

/// Claims and completes keys through every node until `stop`; records what was acknowledged.
async fn load(nodes: Vec<Channel>, acks: Arc<Mutex<Vec<Ack>>>, mut stop: watch::Receiver<bool>) {
    let mut i = 0usize;
    while !*stop.borrow() {
        let mut client = IdempotencyClient::new(nodes[i % nodes.len()].clone());
        let key = format!("load-{i}");
        i += 1;
        let claimed = match client
            .claim(requests::claim(
                requests::scope("acme"),
                &key,
                "w",
                r#"{"n": 1}"#,
            ))
            .await
        {
            Ok(answer) => answer.into_inner(),
            Err(_) => continue,
        };
        let fence = claimed.fence;
        acks.lock().unwrap().push(Ack {
            key: key.clone(),
            fence,
            completed: false,
            at: Instant::now(),
        });
        // Every other key is completed; the rest stay PENDING (claimed, owned).
        if i.is_multiple_of(2) {
            let done = client
                .complete(requests::complete(requests::scope("acme"), &key, fence))
                .await;
            if done.is_ok() {
                acks.lock().unwrap().push(Ack {
                    key,
                    fence,
                    completed: true,
                    at: Instant::now(),
                });
            }
        }
        if stop.has_changed().unwrap_or(true) && *stop.borrow_and_update() {
            break;
        }
    }
}

/// Streams a backup from `node` into `file`; returns the header and trailer.
async fn save(node: &NodeHandle, file: &Path) -> (pb::BackupHeader, pb::BackupTrailer) {
    let mut stream = BackupClient::new(channel(node).await)
        .save_snapshot(pb::SaveSnapshotRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut header = None;
    let mut bytes = Vec::new();
    let mut chunks = 0;
    while let Some(message) = stream.message().await.unwrap() {
        match message.part.unwrap() {
            Part::Header(h) => {
                assert!(
                    header.is_none() && bytes.is_empty(),
                    "the header comes first"
                );
                header = Some(h);
            }
            Part::Chunk(chunk) => {
                assert!(chunk.len() <= 1 << 20, "chunks are bounded");
                chunks += 1;
                bytes.extend_from_slice(&chunk);
            }
            Part::Trailer(trailer) => {
                assert!(chunks > 0);
                assert_eq!(trailer.length, bytes.len() as u64);
                std::fs::write(file, &bytes).unwrap();
                return (header.unwrap(), trailer);
            }
        }
    }
    panic!("the stream ended without a trailer");
}

async fn get(client: &mut IdempotencyClient<Channel>, key: &str) -> pb::Record {
    client
        .get(pb::GetRequest {
            scope: Some(requests::scope("acme")),
            key: key.into(),
        })
        .await
        .unwrap_or_else(|e| panic!("{key}: {e}"))
        .into_inner()
        .record
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_restores_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    let mut channels = Vec::new();
    for node in &nodes {
        channels.push(channel(node).await);
    }
    let acks = Arc::new(Mutex::new(Vec::new()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let writer = tokio::spawn(load(channels, Arc::clone(&acks), stop_rx));
    // Let the load run, then back up from a follower in the middle of it.
    while acks.lock().unwrap().len() < 150 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let follower = roles(&nodes).1[0];
    let file = dir.path().join("backup.idembk");
    let started = Instant::now();
    let (header, trailer) = save(&nodes[follower], &file).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_tx.send(true).unwrap();
    writer.await.unwrap();
    let acks = acks.lock().unwrap().clone();
    let before: Vec<&Ack> = acks.iter().filter(|a| a.at < started).collect();
    assert!(
        acks.len() > before.len(),
        "the load ran on after the backup"
    );
    assert!(before.iter().any(|a| a.completed) && before.iter().any(|a| !a.completed));

    // The header says what the backup reflects.
    assert_eq!(header.node_id, nodes[follower].node_id());
    assert_eq!(header.group, 0);
    assert!(header.applied_index > 0 && header.applied_term > 0);
    assert_eq!(header.members.len(), 3);
    assert!(header.members.iter().all(|m| m.voter));
    let backup = BackupFile::open(&file).unwrap();
    assert_eq!(backup.digest_hex(), trailer.sha256);
    assert_eq!(backup.header().index(), header.applied_index);

    // The old cluster is lost.
    for node in nodes {
        node.shutdown().await.unwrap();
    }

    // A damaged file is refused whole, and nothing is written.
    let bytes = std::fs::read(&file).unwrap();
    for at in [20, bytes.len() / 2, bytes.len() - 1] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x01;
        let damaged = dir.path().join("damaged.idembk");
        std::fs::write(&damaged, &flipped).unwrap();
        match BackupFile::open(&damaged) {
            Err(BackupError::Digest { .. }) => {}
            other => panic!("a flipped byte at {at} was not refused: {other:?}"),
        }
    }

    // Restore: node 1 from the file, at new addresses; 2 and 3 join it.
    let members: Vec<InitialMember> = (1..=3).map(member).collect();
    let info = |m: &InitialMember| NodeInfo {
        region: m.region.clone().unwrap(),
        zone: m.zone.clone().unwrap(),
        raft_addr: m.raft_addr.to_string(),
        api_addr: m.api_addr.to_string(),
    };
    let seeded = dir.path().join("new-1");
    idem_store::restore(&backup, &seeded, 1, info(&members[0])).unwrap();
    let again = idem_store::restore(&backup, &seeded, 1, info(&members[0]));
    assert!(matches!(again, Err(BackupError::NotEmpty(_))), "{again:?}");
    let alone = ClusterConfig::default();
    let first = Node::start(node_config(seeded, &members[0], alone, AuthConfig::off()))
        .await
        .unwrap();
    first.wait_ready(Duration::from_secs(20)).await.unwrap();
    let mut restored = vec![first];
    let mut admin = AdminClient::new(channel(&restored[0]).await);
    for m in &members[1..] {
        let node = support::start_joining(dir.path().join(format!("new-{}", m.id)), m).await;
        admin.add_member(support::add_request(m)).await.unwrap();
        admin
            .promote_member(pb::PromoteMemberRequest { id: m.id })
            .await
            .unwrap();
        node.wait_ready(Duration::from_secs(20)).await.unwrap();
        restored.push(node);
    }

    // Every record acknowledged before the backup is there, on every node, with its fence
    // and (for completes) its result; a retried claim replays it.
    for node in &restored {
        let mut client = IdempotencyClient::new(channel(node).await);
        for ack in &before {
            let record = get(&mut client, &ack.key).await;
            support::assert_restored(&record, ack.fence, ack.completed, &ack.key);
        }
    }
    let mut client = IdempotencyClient::new(channel(&restored[2]).await);
    let done = before.iter().find(|a| a.completed).unwrap();
    let replay = client
        .claim(requests::claim(
            requests::scope("acme"),
            &done.key,
            "w2",
            r#"{"n": 1}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);
    // A stale fence of a restored pending record is still refused; new writes work.
    let pending = before
        .iter()
        .find(|a| !a.completed && !before.iter().any(|b| b.completed && b.key == a.key))
        .unwrap();
    let stale = client
        .complete(requests::complete(
            requests::scope("acme"),
            &pending.key,
            pending.fence + 1,
        ))
        .await
        .unwrap_err();
    assert_eq!(stale.code(), tonic::Code::FailedPrecondition);
    let fresh = client
        .claim(requests::claim(
            requests::scope("acme"),
            "after-restore",
            "w",
            "{}",
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fresh.outcome(), pb::ClaimOutcome::Acquired);
    for node in restored {
        node.shutdown().await.unwrap();
    }
}
