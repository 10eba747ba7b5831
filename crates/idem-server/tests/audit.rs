//! The audit log on a real node with authentication on: every admin change made with an
//! admin token is read back through `Admin.ListAudit` under the admin's name and the
//! reason it sent (membership changes with the index of the membership entry that wrote
//! them), filters and paging work, an operator sees only its tenants' entries,
//! and the leader's `Forward` service refuses a forwarded placement change whose principal
//! is missing or not an admin (and leaves the configuration as it was).

use crate::support;

use std::path::Path;
use std::time::Duration;

use idem_core::command::Audited;
use idem_core::placement::{ClusterChange, Mode};
use idem_core::Command;
use idem_proto::raft_v1 as rpb;
use idem_proto::reason;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_server::api::AUDIT_REASON_METADATA_KEY;
use idem_server::NodeHandle;
use support::{connect, refused, with_token, ACME_WORKER, ADMIN, OPERATOR as ACME_OPERATOR};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};

/// A node alone with authentication on; membership calls give up on an unreachable learner
/// after 2 s.
async fn start(dir: &Path) -> NodeHandle {
    let mut config = support::single_config(dir, support::auth_on(dir));
    config.write_timeout = Duration::from_secs(2);
    support::start(config).await
}

/// `message` with a bearer token and, if given, an audit reason.
fn call<T>(message: T, token: &str, why: Option<&str>) -> Request<T> {
    let mut request = with_token(message, Some(token));
    if let Some(why) = why {
        let why = MetadataValue::try_from(why).unwrap();
        request
            .metadata_mut()
            .insert(AUDIT_REASON_METADATA_KEY, why);
    }
    request
}

async fn list(
    admin: &mut AdminClient<Channel>,
    token: &str,
    request: pb::ListAuditRequest,
) -> Result<pb::ListAuditResponse, tonic::Status> {
    admin
        .list_audit(call(request, token, None))
        .await
        .map(tonic::Response::into_inner)
}

fn kinds(page: &pb::ListAuditResponse) -> Vec<&str> {
    page.entries.iter().map(|e| e.kind.as_str()).collect()
}

fn denied(status: &tonic::Status, expected: &str) {
    refused(status, Code::PermissionDenied, expected);
}

/// Makes every kind of admin change as `root`, with a reason each.
async fn make_changes(admin: &mut AdminClient<Channel>) {
    let mode = pb::SetModeRequest {
        mode: pb::Mode::RegionAffinity.into(),
    };
    admin
        .set_mode(call(mode, ADMIN, Some("CHG-1")))
        .await
        .unwrap();
    let region = pb::AddRegionRequest {
        name: "local".into(),
    };
    admin
        .add_region(call(region, ADMIN, Some("CHG-2")))
        .await
        .unwrap();
    for tenant in ["acme", "globex"] {
        let bind = pb::BindTenantRequest {
            tenant: tenant.into(),
            region: "local".into(),
        };
        admin
            .bind_tenant(call(bind, ADMIN, Some("CHG-3")))
            .await
            .unwrap();
    }
    let unbind = pb::UnbindTenantRequest {
        tenant: "globex".into(),
    };
    admin
        .unbind_tenant(call(unbind, ADMIN, None))
        .await
        .unwrap();
    // A learner that never catches up (nobody listens there), then removed again.
    let learner = pb::AddMemberRequest {
        member: Some(pb::Member {
            id: 9,
            raft_addr: "127.0.0.1:9".into(),
            api_addr: "127.0.0.1:9".into(),
            ..Default::default()
        }),
    };
    admin
        .add_member(call(learner, ADMIN, Some("CHG-4")))
        .await
        .unwrap();
    let remove = pb::RemoveMemberRequest { id: 9 };
    admin
        .remove_member(call(remove, ADMIN, Some("CHG-5")))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_are_read_back_by_principal_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path()).await;
    let mut admin = AdminClient::new(support::channel(&node).await);
    let before = pb::ListAuditRequest::default();
    assert!(list(&mut admin, ADMIN, before)
        .await
        .unwrap()
        .entries
        .is_empty());
    make_changes(&mut admin).await;

    let all = list(&mut admin, ADMIN, pb::ListAuditRequest::default())
        .await
        .unwrap();
    assert_eq!(
        kinds(&all),
        [
            "set_mode",
            "add_region",
            "bind_tenant",
            "bind_tenant",
            "unbind_tenant",
            "membership",
            "membership"
        ]
    );
    assert_eq!(all.next_seq, 0);
    assert!(all.entries.iter().all(|e| e.admin == "root"), "{all:?}");
    let reasons: Vec<&str> = all.entries.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "CHG-1",
            "CHG-2",
            "CHG-3",
            "CHG-3",
            "(no reason given)",
            "CHG-4",
            "CHG-5"
        ]
    );
    let seqs: Vec<u64> = all.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>());
    let mode = &all.entries[0];
    assert_eq!(mode.details["from"], "global");
    assert_eq!(mode.details["to"], "region-affinity");
    let added = &all.entries[5];
    assert_eq!(added.details["change"], "add");
    assert_eq!(added.details["member"], "9");
    assert_eq!(added.details["learners"], "9");
    assert_eq!(all.entries[6].details["change"], "remove");
    assert_eq!(all.entries[6].details["learners"], "");
    // Each written when its membership entry was applied, naming that entry.
    let index = |e: &pb::AuditEntry| e.details["log_index"].parse::<u64>().unwrap();
    assert!(0 < index(added) && index(added) < index(&all.entries[6]));

    // By kind, by tenant.
    let binds = pb::ListAuditRequest {
        kinds: vec!["bind_tenant".into(), "unbind_tenant".into()],
        ..Default::default()
    };
    let page = list(&mut admin, ADMIN, binds).await.unwrap();
    assert_eq!(
        kinds(&page),
        ["bind_tenant", "bind_tenant", "unbind_tenant"]
    );
    let globex = pb::ListAuditRequest {
        tenant: "globex".into(),
        ..Default::default()
    };
    let page = list(&mut admin, ADMIN, globex).await.unwrap();
    assert_eq!(kinds(&page), ["bind_tenant", "unbind_tenant"]);
    assert!(page.entries.iter().all(|e| e.tenant == "globex"));

    // By time: everything happened before now and nothing before the first entry.
    let first_ms = all.entries[0].at_ms;
    let until_first = pb::ListAuditRequest {
        until_ms: first_ms,
        ..Default::default()
    };
    assert!(list(&mut admin, ADMIN, until_first)
        .await
        .unwrap()
        .entries
        .is_empty());
    let last_ms = all.entries[6].at_ms;
    let since_last = pb::ListAuditRequest {
        since_ms: last_ms,
        ..Default::default()
    };
    let page = list(&mut admin, ADMIN, since_last).await.unwrap();
    assert_eq!(page.entries.last().map(|e| e.seq), Some(7));

    // Paging by seq.
    let mut from_seq = 0;
    let mut paged = Vec::new();
    loop {
        let request = pb::ListAuditRequest {
            from_seq,
            limit: 3,
            ..Default::default()
        };
        let page = list(&mut admin, ADMIN, request).await.unwrap();
        assert!(page.entries.len() <= 3);
        paged.extend(page.entries.iter().map(|e| e.seq));
        if page.next_seq == 0 {
            break;
        }
        from_seq = page.next_seq;
    }
    assert_eq!(paged, seqs);

    // Bad input: INVALID_ARGUMENT, with a machine-readable reason.
    let bad_kind = pb::ListAuditRequest {
        kinds: vec!["drop".into()],
        ..Default::default()
    };
    let error = list(&mut admin, ADMIN, bad_kind).await.unwrap_err();
    refused(&error, Code::InvalidArgument, reason::INVALID_ARGUMENT);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_only_its_tenants_entries() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path()).await;
    let mut admin = AdminClient::new(support::channel(&node).await);
    make_changes(&mut admin).await;

    let own = list(&mut admin, ACME_OPERATOR, pb::ListAuditRequest::default())
        .await
        .unwrap();
    assert_eq!(kinds(&own), ["bind_tenant"]);
    assert_eq!(own.entries[0].tenant, "acme");
    let other = pb::ListAuditRequest {
        tenant: "globex".into(),
        ..Default::default()
    };
    let error = list(&mut admin, ACME_OPERATOR, other).await.unwrap_err();
    denied(&error, reason::TENANT_FORBIDDEN);
    let error = list(&mut admin, ACME_WORKER, pb::ListAuditRequest::default())
        .await
        .unwrap_err();
    denied(&error, reason::ROLE_FORBIDDEN);
    // An operator cannot make a change either, so it cannot plant entries.
    let mode = pb::SetModeRequest {
        mode: pb::Mode::Global.into(),
    };
    let error = admin
        .set_mode(call(mode, ACME_OPERATOR, Some("mine")))
        .await
        .unwrap_err();
    denied(&error, reason::ROLE_FORBIDDEN);
    let all = list(&mut admin, ADMIN, pb::ListAuditRequest::default())
        .await
        .unwrap();
    assert_eq!(all.entries.len(), 7);
    node.shutdown().await.unwrap();
}

fn forwarded(command: &Command, principal: Option<rpb::ForwardedPrincipal>) -> rpb::ForwardRequest {
    rpb::ForwardRequest {
        group: 0,
        payload: bincode::serialize(command).unwrap().into(),
        principal,
    }
}

fn forwarded_principal(role: &str) -> rpb::ForwardedPrincipal {
    rpb::ForwardedPrincipal {
        name: format!("a-{role}"),
        role: role.into(),
        tenants: vec!["acme".into()],
        all_tenants: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_placement_change_needs_an_admin_principal() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path()).await;
    let mut forward = rpb::forward_client::ForwardClient::new(connect(node.raft_addr()).await);
    let change = ClusterChange::SetMode(Mode::RegionAffinity);
    let command = Command::AuditedCluster(Audited::new(change, "mallory", "forged"));
    for principal in [None, Some(forwarded_principal("worker"))] {
        let reply = forward
            .propose(forwarded(&command, principal))
            .await
            .unwrap()
            .into_inner();
        match reply.result {
            Some(rpb::forward_reply::Result::Error(error)) => {
                assert_eq!(error.reason, reason::ROLE_FORBIDDEN, "{error:?}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    // Nothing changed, nothing audited.
    let mut admin = AdminClient::new(support::channel(&node).await);
    let config = admin
        .get_cluster_config(call(pb::GetClusterConfigRequest {}, ADMIN, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(config.mode, i32::from(pb::Mode::Global));
    let audit = list(&mut admin, ADMIN, pb::ListAuditRequest::default())
        .await
        .unwrap();
    assert!(audit.entries.is_empty(), "{audit:?}");

    // The same command with an admin principal runs.
    let reply = forward
        .propose(forwarded(&command, Some(forwarded_principal("admin"))))
        .await
        .unwrap()
        .into_inner();
    assert!(
        matches!(reply.result, Some(rpb::forward_reply::Result::Ok(_))),
        "{reply:?}"
    );
    node.shutdown().await.unwrap();
}
