//! The permission matrix: every RPC of every public service (read from the services'
//! descriptors, so a new RPC fails the test until it is given its rule here) × every kind
//! of caller (none, an unknown token, a worker of another tenant, a worker, an operator
//! and an admin of the record's tenant, an admin of every tenant) → allowed, or
//! `UNAUTHENTICATED` / `PERMISSION_DENIED` with its reason. The calls an authorised caller
//! makes are refused for other reasons (stale fences, bad arguments), so nothing is
//! written; afterwards the record, the audit log, the configuration and the token set are
//! read back unchanged. (A client certificate of another CA is refused before any RPC:
//! tests/tls.rs.)

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::backup_client::BackupClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{reason, status, FILE_DESCRIPTOR_SET};
use prost::Message;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::support::{
    channel, with_token, ACME_ADMIN, ACME_WORKER, ADMIN, GLOBEX_WORKER, OPERATOR,
};

/// Who calls.
#[derive(Clone, Copy, Debug)]
enum Caller {
    Nobody,
    UnknownToken,
    OtherTenantsWorker,
    Worker,
    Operator,
    TenantAdmin,
    Admin,
}

const CALLERS: [Caller; 7] = [
    Caller::Nobody,
    Caller::UnknownToken,
    Caller::OtherTenantsWorker,
    Caller::Worker,
    Caller::Operator,
    Caller::TenantAdmin,
    Caller::Admin,
];

impl Caller {
    fn token(self) -> Option<&'static str> {
        match self {
            Caller::Nobody => None,
            Caller::UnknownToken => Some("idem_unknown_token"),
            Caller::OtherTenantsWorker => Some(GLOBEX_WORKER),
            Caller::Worker => Some(ACME_WORKER),
            Caller::Operator => Some(OPERATOR),
            Caller::TenantAdmin => Some(ACME_ADMIN),
            Caller::Admin => Some(ADMIN),
        }
    }

    /// The caller's role rank (workers 1, operators 2, admins 3; none 0).
    fn rank(self) -> u8 {
        match self {
            Caller::Nobody | Caller::UnknownToken => 0,
            Caller::OtherTenantsWorker | Caller::Worker => 1,
            Caller::Operator => 2,
            Caller::TenantAdmin | Caller::Admin => 3,
        }
    }
}

/// Who may call an RPC (about tenant acme's record, where it names one).
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// A worker (or more) of the record's tenant.
    TenantWorker,
    /// An operator (or more) of the tenant the request names.
    TenantOperator,
    /// An operator (or more); what it sees is limited to its tenants.
    Operator,
    /// An admin.
    Admin,
    /// An admin of every tenant (calls that span tenants).
    AllTenantsAdmin,
    /// An operator (or more) of every tenant (reports that span tenants).
    AllTenantsOperator,
}

/// What authorization answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Allowed,
    Unauthenticated,
    RoleForbidden,
    TenantForbidden,
}

impl Rule {
    fn expected(self, caller: Caller) -> Verdict {
        let (needs, tenant_bound) = match self {
            Rule::TenantWorker => (1, true),
            Rule::TenantOperator => (2, true),
            Rule::Operator => (2, false),
            Rule::Admin => (3, false),
            Rule::AllTenantsAdmin => (3, false),
            Rule::AllTenantsOperator => (2, false),
        };
        match caller {
            Caller::Nobody | Caller::UnknownToken => Verdict::Unauthenticated,
            _ if caller.rank() < needs => Verdict::RoleForbidden,
            Caller::OtherTenantsWorker if tenant_bound => Verdict::TenantForbidden,
            Caller::TenantAdmin if matches!(self, Rule::AllTenantsAdmin) => {
                Verdict::TenantForbidden
            }
            Caller::Operator | Caller::TenantAdmin if matches!(self, Rule::AllTenantsOperator) => {
                Verdict::TenantForbidden
            }
            _ => Verdict::Allowed,
        }
    }
}

/// Every RPC and its rule.
const MATRIX: &[(&str, Rule)] = &[
    ("idem.v1.Idempotency/Claim", Rule::TenantWorker),
    ("idem.v1.Idempotency/Start", Rule::TenantWorker),
    ("idem.v1.Idempotency/RecordExternalCall", Rule::TenantWorker),
    ("idem.v1.Idempotency/Renew", Rule::TenantWorker),
    ("idem.v1.Idempotency/Complete", Rule::TenantWorker),
    ("idem.v1.Idempotency/Fail", Rule::TenantWorker),
    ("idem.v1.Idempotency/Release", Rule::TenantWorker),
    ("idem.v1.Idempotency/Cancel", Rule::TenantWorker),
    ("idem.v1.Idempotency/Get", Rule::TenantWorker),
    ("idem.v1.Idempotency/GetOperation", Rule::TenantWorker),
    ("idem.v1.Idempotency/Wait", Rule::TenantWorker),
    ("idem.v1.Idempotency/Batch", Rule::TenantWorker),
    ("idem.v1.Admin/ListOperations", Rule::TenantOperator),
    ("idem.v1.Admin/Reconcile", Rule::Admin),
    ("idem.v1.Admin/PurgeSubject", Rule::Admin),
    ("idem.v1.Admin/Status", Rule::Operator),
    ("idem.v1.Admin/ListMembers", Rule::Operator),
    ("idem.v1.Admin/AddMember", Rule::Admin),
    ("idem.v1.Admin/PromoteMember", Rule::Admin),
    ("idem.v1.Admin/RemoveMember", Rule::Admin),
    ("idem.v1.Admin/TransferLeader", Rule::Admin),
    ("idem.v1.Admin/GetClusterConfig", Rule::Operator),
    ("idem.v1.Admin/SetMode", Rule::Admin),
    ("idem.v1.Admin/AddRegion", Rule::Admin),
    ("idem.v1.Admin/BindTenant", Rule::Admin),
    ("idem.v1.Admin/UnbindTenant", Rule::Admin),
    ("idem.v1.Admin/ListGroups", Rule::Operator),
    ("idem.v1.Admin/ConfirmFailover", Rule::Admin),
    ("idem.v1.Admin/ListAudit", Rule::Operator),
    ("idem.v1.Admin/TopKeys", Rule::TenantOperator),
    ("idem.v1.Admin/TopTenants", Rule::AllTenantsOperator),
    ("idem.v1.Admin/CreateToken", Rule::AllTenantsAdmin),
    ("idem.v1.Admin/RevokeToken", Rule::AllTenantsAdmin),
    ("idem.v1.Admin/ListTokens", Rule::AllTenantsAdmin),
    ("idem.v1.Backup/SaveSnapshot", Rule::AllTenantsAdmin),
];

/// The parts of `google.protobuf.FileDescriptorSet` that name services and methods.
#[derive(Clone, PartialEq, Message)]
struct DescriptorSet {
    #[prost(message, repeated, tag = "1")]
    file: Vec<FileDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
struct FileDescriptor {
    #[prost(string, optional, tag = "2")]
    package: Option<String>,
    #[prost(message, repeated, tag = "6")]
    service: Vec<ServiceDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceDescriptor {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    method: Vec<MethodDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
struct MethodDescriptor {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
}

/// Every `package.Service/Method` of the public API.
fn every_rpc() -> Vec<String> {
    let set = DescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
    let mut rpcs = Vec::new();
    for file in &set.file {
        for service in &file.service {
            for method in &service.method {
                rpcs.push(format!(
                    "{}.{}/{}",
                    file.package(),
                    service.name(),
                    method.name()
                ));
            }
        }
    }
    rpcs
}

/// The record every tenant-bound call is about, claimed by acme's worker.
struct Fixture {
    channel: Channel,
    key: &'static str,
    /// Not the record's fence: a call that passes authorization is refused as stale.
    stale: u64,
    operation_id: String,
}

impl Fixture {
    async fn claim(channel: Channel) -> (Fixture, pb::Record) {
        let claim = requests::claim(requests::scope("acme"), "matrix", "h1", "{}");
        let mut api = IdempotencyClient::new(channel.clone());
        let claimed = api
            .claim(with_token(claim, Some(ACME_WORKER)))
            .await
            .unwrap()
            .into_inner();
        let fixture = Fixture {
            channel,
            key: "matrix",
            stale: claimed.fence + 100,
            operation_id: claimed.operation_id,
        };
        let record = fixture.record().await;
        (fixture, record)
    }

    /// The record, as its owner reads it.
    async fn record(&self) -> pb::Record {
        let by_id = pb::GetOperationRequest {
            operation_id: self.operation_id.clone(),
        };
        IdempotencyClient::new(self.channel.clone())
            .get_operation(with_token(by_id, Some(ACME_WORKER)))
            .await
            .unwrap()
            .into_inner()
            .record
            .unwrap()
    }

    fn scope(&self) -> Option<pb::Scope> {
        Some(requests::scope("acme"))
    }

    /// Calls `rpc` as `caller`; `Err` is the status (a batch: its first call's).
    async fn call(&self, rpc: &str, caller: Caller) -> Result<(), Status> {
        let method = rpc.rsplit('/').next().unwrap();
        if rpc.starts_with("idem.v1.Idempotency/") {
            self.idempotency(method, caller.token()).await
        } else if rpc.starts_with("idem.v1.Admin/") {
            self.admin(method, caller.token()).await
        } else if rpc == "idem.v1.Backup/SaveSnapshot" {
            let request = with_token(pb::SaveSnapshotRequest {}, caller.token());
            let backup = BackupClient::new(self.channel.clone());
            backup.clone().save_snapshot(request).await.map(drop)
        } else {
            panic!("{rpc}: no call in the matrix")
        }
    }

    async fn idempotency(&self, method: &str, token: Option<&str>) -> Result<(), Status> {
        let mut api = IdempotencyClient::new(self.channel.clone());
        let (scope, key, fence) = (self.scope(), self.key.to_owned(), self.stale);
        let complete = requests::complete(requests::scope("acme"), self.key, fence);
        match method {
            "Claim" => {
                let claim = requests::claim(requests::scope("acme"), self.key, "h2", "{}");
                api.claim(with_token(claim, token)).await.map(drop)
            }
            "Start" => {
                let start = pb::StartRequest { scope, key, fence };
                api.start(with_token(start, token)).await.map(drop)
            }
            "RecordExternalCall" => {
                let call = pb::RecordExternalCallRequest {
                    scope,
                    key,
                    fence,
                    stage: pb::ExternalCallStage::Calling.into(),
                    ..Default::default()
                };
                api.record_external_call(with_token(call, token))
                    .await
                    .map(drop)
            }
            "Renew" => {
                let renew = pb::RenewRequest {
                    scope,
                    key,
                    fence,
                    lease_ms: None,
                };
                api.renew(with_token(renew, token)).await.map(drop)
            }
            "Complete" => api.complete(with_token(complete, token)).await.map(drop),
            "Fail" => {
                // A well-formed failure, so that only authorization (or the fence) refuses it.
                let fail = pb::FailRequest {
                    scope,
                    key,
                    fence,
                    retryable: true,
                    error: Some(pb::ErrorSummary {
                        code: "declined".into(),
                        message: String::new(),
                    }),
                };
                api.fail(with_token(fail, token)).await.map(drop)
            }
            "Release" => {
                let release = pb::ReleaseRequest { scope, key, fence };
                api.release(with_token(release, token)).await.map(drop)
            }
            "Cancel" => {
                let cancel = pb::CancelRequest { scope, key, fence };
                api.cancel(with_token(cancel, token)).await.map(drop)
            }
            "Get" => api
                .get(with_token(pb::GetRequest { scope, key }, token))
                .await
                .map(drop),
            "GetOperation" => {
                let operation_id = self.operation_id.clone();
                let by_id = pb::GetOperationRequest { operation_id };
                api.get_operation(with_token(by_id, token)).await.map(drop)
            }
            "Wait" => {
                let wait = pb::WaitRequest {
                    operation_id: self.operation_id.clone(),
                    timeout_ms: 10,
                    ..Default::default()
                };
                api.wait(with_token(wait, token)).await.map(drop)
            }
            "Batch" => {
                let call = pb::BatchCall {
                    request: Some(pb::batch_call::Request::Complete(complete)),
                };
                let batch = pb::BatchRequest { calls: vec![call] };
                let replies = api
                    .batch(with_token(batch, token))
                    .await?
                    .into_inner()
                    .replies;
                match &replies[0].reply {
                    Some(pb::batch_reply::Reply::Error(e)) => {
                        Err(status::from_call_error(e.clone()))
                    }
                    _ => Ok(()),
                }
            }
            other => panic!("Idempotency/{other}: no call in the matrix"),
        }
    }

    async fn admin(&self, method: &str, token: Option<&str>) -> Result<(), Status> {
        let mut admin = AdminClient::new(self.channel.clone());
        match method {
            "ListOperations" => {
                let list = pb::ListOperationsRequest {
                    tenant: "acme".into(),
                    ..Default::default()
                };
                admin
                    .list_operations(with_token(list, token))
                    .await
                    .map(drop)
            }
            "Reconcile" => {
                let reconcile = pb::ReconcileRequest::default();
                admin
                    .reconcile(with_token(reconcile, token))
                    .await
                    .map(drop)
            }
            "PurgeSubject" => {
                let purge = pb::PurgeSubjectRequest::default();
                admin
                    .purge_subject(with_token(purge, token))
                    .await
                    .map(drop)
            }
            "Status" => admin
                .status(with_token(pb::StatusRequest {}, token))
                .await
                .map(drop),
            "ListMembers" => {
                let list = pb::ListMembersRequest {};
                admin.list_members(with_token(list, token)).await.map(drop)
            }
            "AddMember" => {
                let add = pb::AddMemberRequest::default();
                admin.add_member(with_token(add, token)).await.map(drop)
            }
            "PromoteMember" => {
                let promote = pb::PromoteMemberRequest::default();
                admin
                    .promote_member(with_token(promote, token))
                    .await
                    .map(drop)
            }
            "RemoveMember" => {
                let remove = pb::RemoveMemberRequest::default();
                admin
                    .remove_member(with_token(remove, token))
                    .await
                    .map(drop)
            }
            "TransferLeader" => {
                let transfer = pb::TransferLeaderRequest::default();
                admin
                    .transfer_leader(with_token(transfer, token))
                    .await
                    .map(drop)
            }
            "GetClusterConfig" => {
                let get = pb::GetClusterConfigRequest {};
                admin
                    .get_cluster_config(with_token(get, token))
                    .await
                    .map(drop)
            }
            "SetMode" => {
                let mode = pb::SetModeRequest::default();
                admin.set_mode(with_token(mode, token)).await.map(drop)
            }
            "AddRegion" => {
                let region = pb::AddRegionRequest::default();
                admin.add_region(with_token(region, token)).await.map(drop)
            }
            "BindTenant" => {
                let bind = pb::BindTenantRequest::default();
                admin.bind_tenant(with_token(bind, token)).await.map(drop)
            }
            "UnbindTenant" => {
                let unbind = pb::UnbindTenantRequest::default();
                admin
                    .unbind_tenant(with_token(unbind, token))
                    .await
                    .map(drop)
            }
            "ListGroups" => admin
                .list_groups(with_token(pb::ListGroupsRequest {}, token))
                .await
                .map(drop),
            "ConfirmFailover" => {
                let confirm = pb::ConfirmFailoverRequest::default();
                admin
                    .confirm_failover(with_token(confirm, token))
                    .await
                    .map(drop)
            }
            "TopKeys" => {
                let top = pb::TopKeysRequest {
                    tenant: "acme".into(),
                    limit: 5,
                };
                admin.top_keys(with_token(top, token)).await.map(drop)
            }
            "TopTenants" => {
                let top = pb::TopTenantsRequest { limit: 5 };
                admin.top_tenants(with_token(top, token)).await.map(drop)
            }
            "ListAudit" => {
                let list = pb::ListAuditRequest::default();
                admin.list_audit(with_token(list, token)).await.map(drop)
            }
            "CreateToken" => {
                let create = pb::CreateTokenRequest {
                    name: "not a name".into(),
                    ..Default::default()
                };
                admin
                    .create_token(with_token(create, token))
                    .await
                    .map(drop)
            }
            "RevokeToken" => {
                let revoke = pb::RevokeTokenRequest {
                    name: "nobody".into(),
                };
                admin
                    .revoke_token(with_token(revoke, token))
                    .await
                    .map(drop)
            }
            "ListTokens" => admin
                .list_tokens(with_token(pb::ListTokensRequest {}, token))
                .await
                .map(drop),
            other => panic!("Admin/{other}: no call in the matrix"),
        }
    }
}

/// What authorization answered, read from a call's result.
fn verdict(result: &Result<(), Status>) -> Verdict {
    let Err(status) = result else {
        return Verdict::Allowed;
    };
    let why = status::reason_of(status);
    match (status.code(), why.as_deref()) {
        (Code::Unauthenticated, Some(reason::UNAUTHENTICATED)) => Verdict::Unauthenticated,
        (Code::PermissionDenied, Some(reason::ROLE_FORBIDDEN)) => Verdict::RoleForbidden,
        (Code::PermissionDenied, Some(reason::TENANT_FORBIDDEN)) => Verdict::TenantForbidden,
        (Code::Unauthenticated | Code::PermissionDenied, _) => {
            panic!("an authorization refusal without its reason: {status:?}")
        }
        _ => Verdict::Allowed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_of_every_service_answers_every_caller_as_the_matrix_says() {
    let rpcs = every_rpc();
    let listed: Vec<&str> = MATRIX.iter().map(|(rpc, _)| *rpc).collect();
    let missing: Vec<&String> = rpcs
        .iter()
        .filter(|r| !listed.contains(&r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "RPCs without a rule in the matrix: {missing:?}"
    );
    let gone: Vec<&&str> = listed
        .iter()
        .filter(|r| !rpcs.iter().any(|x| x == **r))
        .collect();
    assert!(
        gone.is_empty(),
        "rules for RPCs that do not exist: {gone:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let node = crate::support::secured_node(dir.path()).await;
    let (fixture, before) = Fixture::claim(channel(&node).await).await;
    let mut wrong = Vec::new();
    for (rpc, rule) in MATRIX {
        for caller in CALLERS {
            let got = verdict(&fixture.call(rpc, caller).await);
            let expected = rule.expected(caller);
            if got != expected {
                wrong.push(format!(
                    "{rpc} as {caller:?}: {got:?}, expected {expected:?}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Nothing was written: the record, the audit log, the configuration, the tokens.
    let after = fixture.record().await;
    assert_eq!(
        (after.fence, after.state, after.version),
        (before.fence, before.state, before.version)
    );
    assert!(after.result.is_none() && after.error.is_none(), "{after:?}");
    let mut admin = AdminClient::new(fixture.channel.clone());
    let audit = admin
        .list_audit(with_token(pb::ListAuditRequest::default(), Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert!(audit.entries.is_empty(), "{audit:?}");
    let config = admin
        .get_cluster_config(with_token(pb::GetClusterConfigRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((config.mode(), config.regions.len()), (pb::Mode::Global, 0));
    let tokens = admin
        .list_tokens(with_token(pb::ListTokensRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert!(tokens.tokens.is_empty(), "{tokens:?}");
    node.shutdown().await.unwrap();
}
