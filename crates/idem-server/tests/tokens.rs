//! Replicated API tokens (`Admin.CreateToken`, `RevokeToken`, `ListTokens`) on in-process
//! clusters with authentication on: a token created through one node works on every node;
//! a revocation through one node makes every node refuse the token within a second; each
//! change is audited; backups and the snapshots a joining node installs carry the set, so
//! a node started from them still tells a revoked token from a valid one.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::backup_client::BackupClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::v1::save_snapshot_response::Part;
use idem_proto::{reason, testing::requests};
use idem_server::{ClusterConfig, InitialMember, Node, NodeHandle};
use idem_store::{BackupFile, NodeInfo};
use support::{channel, refused, roles, with_token, ADMIN};
use tonic::Code;

/// How long a created token may take to reach a node (a replication round and an apply).
const VISIBLE_WITHIN: Duration = Duration::from_secs(5);

async fn create(node: &NodeHandle, name: &str, tenant: &str) -> String {
    let request = pb::CreateTokenRequest {
        name: name.into(),
        role: pb::TokenRole::Worker.into(),
        tenants: vec![tenant.into()],
    };
    let mut admin = AdminClient::new(channel(node).await);
    let created = admin
        .create_token(with_token(request, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.name, name);
    created.token
}

async fn revoke(node: &NodeHandle, name: &str) {
    let mut admin = AdminClient::new(channel(node).await);
    let request = pb::RevokeTokenRequest { name: name.into() };
    admin
        .revoke_token(with_token(request, Some(ADMIN)))
        .await
        .unwrap();
}

/// Whether `node` authenticates `token` (a read of tenant acme: anything but
/// UNAUTHENTICATED means the token was accepted).
async fn accepts(node: &NodeHandle, token: &str) -> bool {
    let mut api = IdempotencyClient::new(channel(node).await);
    let get = pb::GetRequest {
        scope: Some(requests::scope("acme")),
        key: "probe".into(),
    };
    match api.get(with_token(get, Some(token))).await {
        Ok(_) => true,
        Err(status) => status.code() != Code::Unauthenticated,
    }
}

/// Polls `node` until it accepts `token` (`want`) or refuses it, within `within`.
async fn until(node: &NodeHandle, token: &str, want: bool, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if accepts(node, token).await == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "node {}: token still {} after {within:?}",
            node.node_id(),
            if want { "refused" } else { "accepted" }
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn audit_kinds(node: &NodeHandle) -> Vec<(String, String, String)> {
    let mut admin = AdminClient::new(channel(node).await);
    let request = pb::ListAuditRequest {
        kinds: vec!["create_token".into(), "revoke_token".into()],
        ..Default::default()
    };
    let page = admin
        .list_audit(with_token(request, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    page.entries
        .into_iter()
        .map(|e| (e.kind, e.admin, e.details["name"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_made_through_one_node_works_everywhere_and_its_revocation_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), support::auth_on(dir.path())).await;
    let (_, followers) = roles(&nodes);

    let token = create(&nodes[followers[0]], "payments-acme", "acme").await;
    assert!(token.starts_with("idem_") && token.len() == 69, "{token}");
    for node in &nodes {
        until(node, &token, true, VISIBLE_WITHIN).await;
    }
    // The token is a worker of acme only.
    let mut api = IdempotencyClient::new(channel(&nodes[0]).await);
    let claim = requests::claim(requests::scope("globex"), "k", "h", "{}");
    let error = api
        .claim(with_token(claim, Some(&token)))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);

    // Names are unique; the listing shows the grant, never the secret.
    let mut admin = AdminClient::new(channel(&nodes[followers[1]]).await);
    let again = pb::CreateTokenRequest {
        name: "payments-acme".into(),
        role: pb::TokenRole::Admin.into(),
        tenants: vec!["*".into()],
    };
    let error = admin
        .create_token(with_token(again, Some(ADMIN)))
        .await
        .unwrap_err();
    refused(&error, Code::AlreadyExists, reason::TOKEN_EXISTS);
    let listed = admin
        .list_tokens(with_token(pb::ListTokensRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner()
        .tokens;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let info = &listed[0];
    assert_eq!(
        (info.name.as_str(), info.role(), info.tenants.as_slice()),
        (
            "payments-acme",
            pb::TokenRole::Worker,
            &["acme".to_owned()][..]
        )
    );
    assert_eq!(info.created_by, "root");
    assert!(!format!("{listed:?}").contains(&token[5..]));

    // Revoked through the other follower: every node refuses it within a second of the
    // answer.
    revoke(&nodes[followers[1]], "payments-acme").await;
    for node in &nodes {
        until(node, &token, false, Duration::from_secs(1)).await;
    }
    let error = admin
        .revoke_token(with_token(
            pb::RevokeTokenRequest {
                name: "payments-acme".into(),
            },
            Some(ADMIN),
        ))
        .await
        .unwrap_err();
    refused(&error, Code::NotFound, reason::NOT_FOUND);

    // Both changes are audited as the admin, once each (the refused ones wrote nothing).
    let name = || "payments-acme".to_owned();
    assert_eq!(
        audit_kinds(&nodes[0]).await,
        vec![
            ("create_token".into(), "root".into(), name()),
            ("revoke_token".into(), "root".into(), name()),
        ]
    );
    support::shutdown(nodes).await;
}

/// Streams a backup of `node` into `file`.
async fn save(node: &NodeHandle, file: &Path) {
    let mut stream = BackupClient::new(channel(node).await)
        .save_snapshot(with_token(pb::SaveSnapshotRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        match message.part.unwrap() {
            Part::Header(_) => {}
            Part::Chunk(chunk) => bytes.extend_from_slice(&chunk),
            Part::Trailer(_) => return std::fs::write(file, &bytes).unwrap(),
        }
    }
    panic!("the backup stream ended without a trailer");
}

fn info(m: &InitialMember) -> NodeInfo {
    NodeInfo {
        region: m.region.clone().unwrap(),
        zone: m.zone.clone().unwrap(),
        raft_addr: m.raft_addr.to_string(),
        api_addr: m.api_addr.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backups_and_installed_snapshots_carry_the_tokens_and_their_revocations() {
    let dir = tempfile::tempdir().unwrap();
    let auth = support::auth_on(dir.path());
    let first = support::member(1);
    let alone = ClusterConfig {
        initial_members: vec![first.clone()],
        join: false,
    };
    let config = support::node_config(dir.path().join("old"), &first, alone, auth.clone());
    let node = Node::start(config).await.unwrap();
    node.wait_ready(Duration::from_secs(20)).await.unwrap();
    let kept = create(&node, "kept", "acme").await;
    let gone = create(&node, "gone", "acme").await;
    revoke(&node, "gone").await;
    let file = dir.path().join("tokens.idembk");
    save(&node, &file).await;
    node.shutdown().await.unwrap();

    // Restored at new addresses; a second node joins and gets the state as a snapshot
    // (the restored node's log starts after it).
    let members: Vec<InitialMember> = (1..=2).map(support::member).collect();
    let backup = BackupFile::open(&file).unwrap();
    let seeded = dir.path().join("new-1");
    idem_store::restore(&backup, &seeded, 1, info(&members[0])).unwrap();
    let config = support::node_config(seeded, &members[0], ClusterConfig::default(), auth.clone());
    let restored = Node::start(config).await.unwrap();
    restored.wait_ready(Duration::from_secs(20)).await.unwrap();
    let joining = ClusterConfig {
        initial_members: Vec::new(),
        join: true,
    };
    let data_dir = dir.path().join("new-2");
    let config = support::node_config(data_dir, &members[1], joining, auth);
    let joiner = Node::start(config).await.unwrap();
    let mut admin = AdminClient::new(channel(&restored).await);
    let m = &members[1];
    let add = pb::AddMemberRequest {
        member: Some(pb::Member {
            id: m.id,
            raft_addr: m.raft_addr.to_string(),
            api_addr: m.api_addr.to_string(),
            region: m.region.clone().unwrap(),
            zone: m.zone.clone().unwrap(),
            ..Default::default()
        }),
    };
    admin
        .add_member(with_token(add, Some(ADMIN)))
        .await
        .unwrap();
    let promote = pb::PromoteMemberRequest { id: m.id };
    admin
        .promote_member(with_token(promote, Some(ADMIN)))
        .await
        .unwrap();
    joiner.wait_ready(Duration::from_secs(20)).await.unwrap();

    for node in [&restored, &joiner] {
        until(node, &kept, true, VISIBLE_WITHIN).await;
        assert!(!accepts(node, &gone).await, "node {}", node.node_id());
    }
    support::shutdown(vec![joiner, restored]).await;
}
