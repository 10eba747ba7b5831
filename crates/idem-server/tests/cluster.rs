//! In-process 3-node clusters (real RocksDB, openraft, tonic on loopback ports): requests
//! sent to any node are forwarded to the leader; follower reads are linearizable;
//! membership changes (each audited once) and leadership transfer through the admin RPCs;
//! a membership change made while a restarted node is still opening its region groups
//! reaches every group.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{reason, status};
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

/// With one voter of three down, removing a live voter would leave a joint configuration
/// that needs the dead one: it is refused with `QUORUM_AT_RISK` and nothing changes, while
/// removing the dead voter (the repair) goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_voter_change_without_an_answering_majority_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    let (l, f) = roles(&nodes);
    let (leader, live, dead) = (
        nodes[l].node_id(),
        nodes[f[0]].node_id(),
        nodes[f[1]].node_id(),
    );
    nodes.remove(f[1]).shutdown().await.unwrap();
    // Until its last acknowledgement is older than the check's window (1 s), the leader
    // still counts the stopped node as answering.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let on = |id: u64| nodes.iter().find(|n| n.node_id() == id).unwrap();
    let mut admin = admin(on(live)).await;

    let refused = admin
        .remove_member(pb::RemoveMemberRequest { id: live })
        .await
        .unwrap_err();
    support::refused(
        &refused,
        tonic::Code::FailedPrecondition,
        reason::QUORUM_AT_RISK,
    );
    assert!(
        refused.message().contains(&format!("{{{dead}}}")),
        "{refused:?}"
    );
    let listed = admin
        .list_members(pb::ListMembersRequest {})
        .await
        .unwrap()
        .into_inner();
    let voters = listed.members.iter().filter(|m| m.voter).count();
    assert_eq!(voters, 3, "nothing changed: {listed:?}");

    let removed = admin
        .remove_member(pb::RemoveMemberRequest { id: dead })
        .await
        .unwrap()
        .into_inner();
    let voters: BTreeSet<u64> = removed
        .members
        .iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect();
    assert_eq!(voters, BTreeSet::from([leader, live]), "{removed:?}");
    // The two left still decide claims.
    let mut client = IdempotencyClient::new(support::connect(on(live).api_addr()).await);
    client
        .claim(claim("after-the-repair", "holder"))
        .await
        .unwrap();
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_are_added_promoted_removed_and_leadership_moves() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    let (_, f) = roles(&nodes);

    // Node 4 starts empty (join) and is added as a learner through a follower.
    let four = member(4);
    let node4 = support::start_joining(dir.path().join("n4"), &four).await;
    let mut follower = admin(&nodes[f[0]]).await;
    let added = follower
        .add_member(support::add_request(&four))
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

/// A node in region-affinity mode with regions r1..r3, restarted: it answers as soon as its
/// global group has a leader, while it is still opening its region groups.
async fn restarted_with_region_groups(dir: &std::path::Path) -> NodeHandle {
    let one = member(1);
    let alone = ClusterConfig {
        initial_members: vec![one.clone()],
        join: false,
    };
    let config = node_config(dir.join("n1"), &one, alone, AuthConfig::off());
    let node = support::start(config.clone()).await;
    let mut admin1 = admin(&node).await;
    let mode = pb::SetModeRequest {
        mode: pb::Mode::RegionAffinity.into(),
    };
    admin1.set_mode(mode).await.unwrap();
    for name in ["r1", "r2", "r3"] {
        let add = pb::AddRegionRequest { name: name.into() };
        admin1.add_region(add).await.unwrap();
    }
    assert!(
        groups_led(&mut admin1).await,
        "the region groups did not start"
    );
    node.shutdown().await.unwrap();
    Node::start(config).await.unwrap()
}

/// Whether, within 20 s, the node behind `admin` runs the global group and the three
/// region groups, each with a known leader.
async fn groups_led(admin: &mut AdminClient<Channel>) -> bool {
    for _ in 0..400 {
        let listed = admin.list_groups(pb::ListGroupsRequest {}).await;
        if let Ok(listed) = listed {
            let groups = listed.into_inner().groups;
            if groups.len() == 4 && groups.iter().all(|g| g.leader_id != 0) {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_added_right_after_a_restart_joins_every_region_group() {
    let dir = tempfile::tempdir().unwrap();
    let node1 = restarted_with_region_groups(dir.path()).await;
    let two = member(2);
    let node2 = support::start_joining(dir.path().join("n2"), &two).await;
    let add = support::add_request(&two);
    // Sent as soon as node 1 has elected itself in the global group; retried only until then.
    let mut admin1 = admin(&node1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match admin1.add_member(add.clone()).await {
            Ok(_) => break,
            Err(e) if status::reason_of(&e).as_deref() == Some(reason::NOT_LEADER) => {
                assert!(tokio::time::Instant::now() < deadline, "{e:?}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    // A group the add skipped would refuse the promotion with NOT_FOUND.
    let promoted = admin1
        .promote_member(pb::PromoteMemberRequest { id: 2 })
        .await
        .unwrap()
        .into_inner();
    assert!(promoted.members.iter().any(|m| m.id == 2 && m.voter));
    let mut admin2 = admin(&node2).await;
    assert!(
        groups_led(&mut admin2).await,
        "node 2 does not replicate every group"
    );
    shutdown(vec![node1, node2]).await;
}
