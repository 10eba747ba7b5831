//! In-process 3-node clusters (real RocksDB, openraft, tonic on loopback ports): requests
//! sent to any node are forwarded to the leader; follower reads are linearizable;
//! membership changes (each audited once) and leadership transfer through the admin RPCs.

mod support;

use std::time::Duration;

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_server::config::AuthConfig;
use idem_server::{ClusterConfig, Node, NodeHandle};
use support::{member, node_config, roles, shutdown};
use tonic::transport::Channel;

async fn idem(node: &NodeHandle) -> IdempotencyClient<Channel> {
    IdempotencyClient::connect(format!("http://{}", node.api_addr()))
        .await
        .unwrap()
}

async fn admin(node: &NodeHandle) -> AdminClient<Channel> {
    AdminClient::connect(format!("http://{}", node.api_addr()))
        .await
        .unwrap()
}

fn scope() -> pb::Scope {
    requests::scope("acme")
}

fn claim(key: &str, holder: &str) -> pb::ClaimRequest {
    requests::claim(scope(), key, holder, r#"{"amount": 5}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn followers_forward_claims_and_reads_are_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    let (l, f) = roles(&nodes);
    let leader_api = nodes[l].api_addr().to_string();

    // ACQUIRED through the first follower, tagged with the leader's address.
    let response = idem(&nodes[f[0]])
        .await
        .claim(claim("order-1", "worker-a"))
        .await
        .unwrap();
    let forwarded_to = response
        .metadata()
        .get(idem_proto::reason::LEADER_ADDR_METADATA_KEY)
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(forwarded_to.as_deref(), Some(leader_api.as_str()));
    let first = response.into_inner();
    assert_eq!(first.outcome(), pb::ClaimOutcome::Acquired);

    // IN_PROGRESS through the second follower.
    let second = idem(&nodes[f[1]])
        .await
        .claim(claim("order-1", "worker-b"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.outcome(), pb::ClaimOutcome::InProgress);

    // Completed through a follower, replayed by the third node (the leader).
    idem(&nodes[f[1]])
        .await
        .complete(pb::CompleteRequest {
            scope: Some(scope()),
            key: "order-1".into(),
            fence: first.fence,
            result: Some(pb::StoredResult {
                status_code: 201,
                resource_id: "ch_1".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let replay = idem(&nodes[l])
        .await
        .claim(claim("order-1", "worker-c"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);

    // A linearizable Get on a follower right after a write on the leader sees it.
    for i in 0..20 {
        let key = format!("order-lin-{i}");
        idem(&nodes[l])
            .await
            .claim(claim(&key, "worker-a"))
            .await
            .unwrap();
        let got = idem(&nodes[f[i % 2]])
            .await
            .get(pb::GetRequest {
                scope: Some(scope()),
                key,
            })
            .await
            .expect("the follower sees the leader's write")
            .into_inner();
        assert_eq!(got.outcome(), pb::ClaimOutcome::InProgress);
    }
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_are_added_promoted_removed_and_leadership_moves() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    let (_, f) = roles(&nodes);

    // Node 4 starts empty (join) and is added as a learner through a follower.
    let four = member(4);
    let joining = ClusterConfig {
        initial_members: Vec::new(),
        join: true,
    };
    let config = node_config(dir.path().join("n4"), &four, joining, AuthConfig::off());
    let node4 = Node::start(config).await.unwrap();
    let mut follower = admin(&nodes[f[0]]).await;
    let added = follower
        .add_member(pb::AddMemberRequest {
            member: Some(pb::Member {
                id: 4,
                raft_addr: four.raft_addr.to_string(),
                api_addr: four.api_addr.to_string(),
                region: "r4".into(),
                zone: "r4-a".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(added.caught_up, "{added:?}");
    let learner = added.members.iter().find(|m| m.id == 4).unwrap();
    assert!(!learner.voter);
    assert_eq!(learner.region, "r4");
    node4.wait_ready(Duration::from_secs(10)).await.unwrap();

    // The change may still be replicating to the other voters: they catch up with it
    // within a bound.
    let mut listed = pb::ListMembersResponse::default();
    for _ in 0..50 {
        listed = admin(&node4)
            .await
            .list_members(pb::ListMembersRequest {})
            .await
            .unwrap()
            .into_inner();
        if listed.members.iter().all(|m| m.lag == 0 || m.id == 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listed.members.len(), 4);
    assert!(
        listed.members.iter().all(|m| m.lag == 0 || m.id == 4),
        "{listed:?}"
    );

    // Promote, then remove.
    let promoted = follower
        .promote_member(pb::PromoteMemberRequest { id: 4 })
        .await
        .unwrap()
        .into_inner();
    assert!(promoted.members.iter().any(|m| m.id == 4 && m.voter));
    let removed = follower
        .remove_member(pb::RemoveMemberRequest { id: 4 })
        .await
        .unwrap()
        .into_inner();
    assert!(removed.members.iter().all(|m| m.id != 4));
    let unknown = follower
        .remove_member(pb::RemoveMemberRequest { id: 9 })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    // One audit entry per change, written as its membership entry was applied: the joint
    // memberships a promote and a remove pass through are not audited, nor is the refused
    // removal.
    let membership = pb::ListAuditRequest {
        kinds: vec!["membership".into()],
        ..Default::default()
    };
    let audit = follower.list_audit(membership).await.unwrap().into_inner();
    let changes: Vec<&str> = audit
        .entries
        .iter()
        .map(|e| e.details["change"].as_str())
        .collect();
    assert_eq!(changes, ["add", "promote", "remove"], "{audit:?}");
    node4.shutdown().await.unwrap();

    // Leadership moves to a follower on request.
    let target = nodes[f[1]].node_id();
    let moved = admin(&nodes[f[0]])
        .await
        .transfer_leader(pb::TransferLeaderRequest {
            to: target,
            group: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(moved.leader_id, target);
    // Writes keep working through any node after the transfer.
    for node in &nodes {
        let key = format!("after-transfer-{}", node.node_id());
        let got = idem(node).await.claim(claim(&key, "w")).await.unwrap();
        assert_eq!(got.into_inner().outcome(), pb::ClaimOutcome::Acquired);
    }
    shutdown(nodes).await;
}
