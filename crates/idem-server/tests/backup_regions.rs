//! Backups of a cluster with region groups (`idem.v1.Backup`, format version 2): a backup
//! taken from a follower of a 3-node, 3-region cluster in region-affinity mode, under a
//! write load on tenants homed in every region and on one left in the global group, holds
//! every group at its own applied index; restored into a new cluster (one restored node,
//! two that join every group), every record acknowledged before the backup began is found
//! in its group with its fence and result.

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
use idem_store::{BackupFile, NodeInfo};
use support::{channel, member, node_config, roles};
use tokio::sync::watch;
use tonic::transport::Channel;

/// Tenants homed in regions r1, r2 and r3, and one without a home (the global group).
const TENANTS: [(&str, Option<&str>); 4] = [
    ("t1", Some("r1")),
    ("t2", Some("r2")),
    ("t3", Some("r3")),
    ("acme", None),
];

/// A claim or complete the cluster acknowledged, and when.
#[derive(Clone, Debug)]
struct Ack {
    tenant: &'static str,
    key: String,
    fence: u64,
    completed: bool,
    at: Instant,
}

/// Region-affinity mode, regions r1..r3, and the tenants' homes.
async fn place_tenants(admin: &mut AdminClient<Channel>) {
    let mode = pb::SetModeRequest {
        mode: pb::Mode::RegionAffinity.into(),
    };
    admin.set_mode(mode).await.unwrap();
    for region in ["r1", "r2", "r3"] {
        let add = pb::AddRegionRequest {
            name: region.into(),
        };
        admin.add_region(add).await.unwrap();
    }
    for (tenant, home) in TENANTS {
        if let Some(region) = home {
            let bind = pb::BindTenantRequest {
                tenant: tenant.into(),
                region: region.into(),
            };
            admin.bind_tenant(bind).await.unwrap();
        }
    }
}

/// Claims and completes keys of every tenant through every node until `stop`; records
/// what was acknowledged.
async fn load(nodes: Vec<Channel>, acks: Arc<Mutex<Vec<Ack>>>, stop: watch::Receiver<bool>) {
    let mut i = 0usize;
    while !*stop.borrow() {
        let mut client = IdempotencyClient::new(nodes[i % nodes.len()].clone());
        let tenant = TENANTS[i % TENANTS.len()].0;
        let key = format!("load-{i}");
        i += 1;
        let claim = requests::claim(requests::scope(tenant), &key, "w", r#"{"n": 1}"#);
        let Ok(claimed) = client.claim(claim).await else {
            continue;
        };
        let fence = claimed.into_inner().fence;
        let ack = |completed| Ack {
            tenant,
            key: key.clone(),
            fence,
            completed,
            at: Instant::now(),
        };
        acks.lock().unwrap().push(ack(false));
        // Every other key of a tenant is completed; the rest stay PENDING.
        if (i / TENANTS.len()).is_multiple_of(2) {
            let complete = requests::complete(requests::scope(tenant), &key, fence);
            if client.complete(complete).await.is_ok() {
                acks.lock().unwrap().push(ack(true));
            }
        }
    }
}

/// Streams a backup from `node` into `file`; returns the header.
async fn save(node: &NodeHandle, file: &Path) -> pb::BackupHeader {
    let mut stream = BackupClient::new(channel(node).await)
        .save_snapshot(pb::SaveSnapshotRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut header = None;
    let mut bytes = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        match message.part.unwrap() {
            Part::Header(h) => header = Some(h),
            Part::Chunk(chunk) => bytes.extend_from_slice(&chunk),
            Part::Trailer(trailer) => {
                assert_eq!(trailer.length, bytes.len() as u64);
                std::fs::write(file, &bytes).unwrap();
                return header.unwrap();
            }
        }
    }
    panic!("the stream ended without a trailer");
}

/// The record of `tenant`'s `key`, retried while the node's replica of its group catches up.
async fn get(client: &mut IdempotencyClient<Channel>, tenant: &str, key: &str) -> pb::Record {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let request = pb::GetRequest {
            scope: Some(requests::scope(tenant)),
            key: key.into(),
        };
        match client.get(request).await {
            Ok(answer) => return answer.into_inner().record.unwrap(),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{tenant}/{key}: {e}"),
        }
    }
}

/// Restores `file` into node 1 of a new cluster and has nodes 2 and 3 join it.
async fn restore_cluster(dir: &Path, backup: &BackupFile) -> Vec<NodeHandle> {
    let members: Vec<InitialMember> = (1..=3).map(member).collect();
    let first = &members[0];
    let info = NodeInfo {
        region: first.region.clone().unwrap(),
        zone: first.zone.clone().unwrap(),
        raft_addr: first.raft_addr.to_string(),
        api_addr: first.api_addr.to_string(),
    };
    let seeded = dir.join("new-1");
    let metas = idem_store::restore(backup, &seeded, 1, info).unwrap();
    assert_eq!(metas.len(), backup.headers().len());
    let alone = node_config(seeded, first, ClusterConfig::default(), AuthConfig::off());
    let node = Node::start(alone).await.unwrap();
    node.wait_ready(Duration::from_secs(20)).await.unwrap();
    let mut restored = vec![node];
    let mut admin = AdminClient::new(channel(&restored[0]).await);
    for m in &members[1..] {
        let data_dir = dir.join(format!("new-{}", m.id));
        let node = support::start_joining(data_dir, m).await;
        admin.add_member(support::add_request(m)).await.unwrap();
        let promote = pb::PromoteMemberRequest { id: m.id };
        admin.promote_member(promote).await.unwrap();
        node.wait_ready(Duration::from_secs(20)).await.unwrap();
        restored.push(node);
    }
    restored
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_of_every_region_group_restores_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    place_tenants(&mut AdminClient::new(channel(&nodes[0]).await)).await;
    let mut channels = Vec::new();
    for node in &nodes {
        channels.push(channel(node).await);
    }
    let acks = Arc::new(Mutex::new(Vec::new()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let writer = tokio::spawn(load(channels, Arc::clone(&acks), stop_rx));
    let per_tenant =
        |acks: &[Ack], tenant: &str| acks.iter().filter(|a| a.tenant == tenant).count();
    while TENANTS
        .iter()
        .any(|(t, _)| per_tenant(&acks.lock().unwrap(), t) < 30)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let follower = roles(&nodes).1[0];
    let file = dir.path().join("backup.idembk");
    let started = Instant::now();
    let header = save(&nodes[follower], &file).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_tx.send(true).unwrap();
    writer.await.unwrap();
    let acks = acks.lock().unwrap().clone();
    let before: Vec<&Ack> = acks.iter().filter(|a| a.at < started).collect();
    assert!(
        acks.len() > before.len(),
        "the load ran on after the backup"
    );

    // The header names every group, the global group first, each at its own index.
    assert_eq!(header.format_version, idem_store::BACKUP_VERSION);
    let groups: Vec<(u64, &str)> = header
        .groups
        .iter()
        .map(|g| (g.group, g.region.as_str()))
        .collect();
    assert_eq!(groups, vec![(0, ""), (1, "r1"), (2, "r2"), (3, "r3")]);
    assert!(header.groups.iter().all(|g| g.applied_index > 0));
    let backup = BackupFile::open(&file).unwrap();
    let indexes: Vec<(u64, u64)> = backup
        .headers()
        .iter()
        .map(|h| (h.group, h.index()))
        .collect();
    let announced: Vec<(u64, u64)> = header
        .groups
        .iter()
        .map(|g| (g.group, g.applied_index))
        .collect();
    assert_eq!(indexes, announced);
    support::shutdown(nodes).await;

    let restored = restore_cluster(dir.path(), &backup).await;
    for node in [&restored[0], &restored[2]] {
        let mut client = IdempotencyClient::new(channel(node).await);
        for ack in &before {
            let record = get(&mut client, ack.tenant, &ack.key).await;
            let what = format!("{}/{}", ack.tenant, ack.key);
            support::assert_restored(&record, ack.fence, ack.completed, &what);
        }
    }
    // Every tenant's group takes new writes in the restored cluster.
    let mut client = IdempotencyClient::new(channel(&restored[1]).await);
    for (tenant, _) in TENANTS {
        let claim = requests::claim(requests::scope(tenant), "after-restore", "w", "{}");
        let fresh = client.claim(claim).await.unwrap().into_inner();
        assert_eq!(fresh.outcome(), pb::ClaimOutcome::Acquired, "{tenant}");
    }
    support::shutdown(restored).await;
}
