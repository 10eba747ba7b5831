//! The leader's re-check of forwarded calls, end to end, on a 3-node cluster with
//! authentication on: a worker calling a follower reaches its own tenant through the
//! forward and is refused another tenant's, with nothing written; a command that reaches
//! the leader's `Forward.Propose` with a principal that may not make it (a worker's admin
//! change, a tenant-bound admin's token change, a worker's command on another tenant's
//! record) is refused by the leader, and nothing changes.

use crate::support;

use std::collections::BTreeSet;

use idem_core::command::{Audited, Fenced};
use idem_core::placement::{ClusterChange, Mode, TokenChange, TokenRole};
use idem_core::{Command, IdempotencyKey, RecordKey, Scope};
use idem_proto::raft_v1 as rpb;
use idem_proto::reason;
use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_server::NodeHandle;
use support::{channel, refused, roles, with_token, ACME_WORKER, ADMIN};
use tonic::transport::Channel;
use tonic::Code;

async fn raft_channel(node: &NodeHandle) -> Channel {
    Channel::from_shared(format!("http://{}", node.raft_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The principal a follower forwards for `role` of tenant acme only.
fn acme(role: &str) -> rpb::ForwardedPrincipal {
    rpb::ForwardedPrincipal {
        name: format!("acme-{role}"),
        role: role.into(),
        tenants: vec!["acme".into()],
        all_tenants: false,
    }
}

/// Proposes `command` on the leader as a follower would for `principal`; answers the
/// refusal's reason (panics when the leader ran it).
async fn leader_refuses(
    leader: &NodeHandle,
    command: &Command,
    principal: rpb::ForwardedPrincipal,
) -> String {
    let mut forward = rpb::forward_client::ForwardClient::new(raft_channel(leader).await);
    let request = rpb::ForwardRequest {
        group: 0,
        payload: bincode::serialize(command).unwrap().into(),
        principal: Some(principal),
    };
    let reply = forward.propose(request).await.unwrap().into_inner();
    match reply.result {
        Some(rpb::forward_reply::Result::Error(error)) => error.reason,
        other => panic!("the leader ran {}: {other:?}", command.name()),
    }
}

/// The record of `(tenant, key)` read by the admin (`None`: NOT_FOUND).
async fn get_as_admin(node: &NodeHandle, tenant: &str, key: &str) -> Option<pb::Record> {
    let mut api = IdempotencyClient::new(channel(node).await);
    let get = pb::GetRequest {
        scope: Some(requests::scope(tenant)),
        key: key.into(),
    };
    match api.get(with_token(get, Some(ADMIN))).await {
        Ok(found) => found.into_inner().record,
        Err(status) if status.code() == Code::NotFound => None,
        Err(status) => panic!("read back: {status:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_rechecks_what_a_follower_forwards() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), support::auth_on(dir.path())).await;
    let (l, followers) = roles(&nodes);
    let (leader, follower) = (&nodes[l], &nodes[followers[0]]);

    // A worker of acme, through a follower: its own tenant is forwarded and served.
    let mut api = IdempotencyClient::new(channel(follower).await);
    let own = requests::claim(requests::scope("acme"), "k-own", "w1", "{}");
    let claimed = api
        .claim(with_token(own, Some(ACME_WORKER)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(claimed.outcome(), pb::ClaimOutcome::Acquired);
    assert!(get_as_admin(leader, "acme", "k-own").await.is_some());

    // Another tenant's key: refused, nothing written there.
    let theirs = requests::claim(requests::scope("globex"), "k-theirs", "w1", "{}");
    let error = api
        .claim(with_token(theirs, Some(ACME_WORKER)))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    for node in &nodes {
        let read = get_as_admin(node, "globex", "k-theirs").await;
        assert!(read.is_none(), "node {}: {read:?}", node.node_id());
    }

    // What reaches the leader's Forward.Propose is checked there again.
    let globex_key = RecordKey::new(
        Scope::new("globex", "prod", "u1", "POST /x").unwrap(),
        IdempotencyKey::new("k-theirs").unwrap(),
    );
    let start = Command::Start(Fenced {
        target: globex_key,
        fence: 1,
    });
    assert_eq!(
        leader_refuses(leader, &start, acme("worker")).await,
        reason::TENANT_FORBIDDEN
    );
    let mode = ClusterChange::SetMode(Mode::RegionAffinity);
    let mode = Command::AuditedCluster(Audited::new(mode, "acme-worker", "forged"));
    assert_eq!(
        leader_refuses(leader, &mode, acme("worker")).await,
        reason::ROLE_FORBIDDEN
    );
    let mint = TokenChange::Create {
        name: "minted".into(),
        digest: [9; 32],
        role: TokenRole::Admin,
        tenants: BTreeSet::from(["*".to_owned()]),
    };
    let mint = Command::Tokens(Audited::new(mint, "acme-admin", "forged"));
    assert_eq!(
        leader_refuses(leader, &mint, acme("worker")).await,
        reason::ROLE_FORBIDDEN
    );
    assert_eq!(
        leader_refuses(leader, &mint, acme("admin")).await,
        reason::TENANT_FORBIDDEN
    );

    // Nothing changed: the mode, the tokens, the audit log, the other tenant's key.
    let mut admin = AdminClient::new(channel(leader).await);
    let config = admin
        .get_cluster_config(with_token(pb::GetClusterConfigRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(config.mode(), pb::Mode::Global);
    let tokens = admin
        .list_tokens(with_token(pb::ListTokensRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert!(tokens.tokens.is_empty(), "{tokens:?}");
    let audit = pb::ListAuditRequest {
        kinds: vec!["set_mode".into(), "create_token".into()],
        ..Default::default()
    };
    let audit = admin
        .list_audit(with_token(audit, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert!(audit.entries.is_empty(), "{audit:?}");
    assert!(get_as_admin(leader, "globex", "k-theirs").await.is_none());
    support::shutdown(nodes).await;
}
