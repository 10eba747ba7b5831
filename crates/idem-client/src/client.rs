//! The client: one typed method per rpc of `idem.v1.Idempotency` and `idem.v1.Admin`.
//!
//! Every method builds its wire request once and hands the transport a closure that sends a
//! clone of it (claims and worker commands: the request itself, which the transport may
//! coalesce with others), so every retry is byte-for-byte the same request: same key, same
//! holder, same fence (see [`crate::options::RetryPolicy`]). Inputs that idem-core can validate (results,
//! error summaries, tenant and actor) are checked before sending, so a malformed call fails
//! fast with the same reason the server would give.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::credentials::Connection;
use idem_core::placement::{validate_region, ClusterConfig, GroupId, Mode, GLOBAL_GROUP};
use idem_core::scope::{validate_actor, validate_tenant};
use idem_core::{ErrorSummary, OperationId, Record, StoredResult};
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::batch_call::Request as Call;
use idem_proto::v1::batch_reply::Reply;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{reason, v1};
use tonic::{Response, Status};

use crate::claim::{Claim, ClaimRequest, Target};
use crate::convert::claim::{claim_from_proto, claim_request_to_proto};
use crate::convert::membership::{
    added_membership_from_proto, member_to_proto, members_from_proto, membership_from_proto,
};
use crate::convert::placement::{
    config_from_proto, group_status_from_proto, groups_from_proto, mode_to_proto,
};
use crate::convert::records::{
    list_query_to_proto, lookup_from_get, lookup_from_wait, page_from_proto,
    reconciliation_to_proto, required_record, target_to_proto,
};
use crate::convert::status::node_status_from_proto;
use crate::convert::{self, millis};
use crate::error::ClientError;
use crate::membership::Membership;
use crate::options::ClientOptions;
use crate::placement::{GroupStatus, Groups};
use crate::transport::{Kind, Route, Transport};
use crate::types::{FailureKind, ListQuery, Lookup, Member, NodeStatus, Page, Reconciliation};

mod audit;
mod backup;
mod tokens;
mod top;

pub use backup::SnapshotStream;

/// Longest wait budget the server honours for `Wait`.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// A client of an idem cluster. Cheap to clone (clones share connections and the learned
/// leader); `Send + Sync`.
#[derive(Clone)]
pub struct Client {
    transport: Arc<Transport>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.transport.endpoints())
            .finish()
    }
}

type Rpc<T> = Result<Response<T>, Status>;

impl Client {
    /// A client of the nodes at `endpoints` (`host:port`, `http://` added when missing).
    ///
    /// Nothing is connected yet: each endpoint's connection is opened on its first use, so a
    /// client can be built while some nodes are down. Fails only on a malformed endpoint, an
    /// `https://` endpoint (TLS is not supported yet) or an empty list.
    pub fn connect(endpoints: Vec<String>, options: ClientOptions) -> Result<Self, ClientError> {
        Ok(Client {
            transport: Arc::new(Transport::new(&endpoints, options)?),
        })
    }

    /// [`Client::connect`], with every call carrying `reason` as the `idem-audit-reason`
    /// metadata: the reason the nodes audit for this client's admin changes (membership,
    /// mode, regions, tenant homes, tokens). Printable ASCII, at most 1024 bytes
    /// (`INVALID_ARGUMENT` otherwise); blank means none.
    pub fn connect_audited(
        endpoints: Vec<String>,
        options: ClientOptions,
        reason: &str,
    ) -> Result<Self, ClientError> {
        Ok(Client {
            transport: Arc::new(Transport::audited(&endpoints, options, Some(reason))?),
        })
    }

    /// Every known endpoint: the configured ones, then leaders learned from hints.
    pub fn endpoints(&self) -> Vec<String> {
        self.transport.endpoints()
    }

    /// The endpoint of the default route: where calls that name no tenant, and tenants the
    /// client has no route for, start (the last leader learned, once one answered).
    pub fn preferred_endpoint(&self) -> String {
        self.transport.preferred()
    }

    /// The endpoint `tenant`'s next call starts at, once the client learned one: the leader
    /// of the tenant's group named by an earlier answer, or the node that served it.
    pub fn tenant_endpoint(&self, tenant: &str) -> Option<String> {
        self.transport.route_of(tenant)
    }

    /// The endpoints whose region the client has learned (with
    /// [`ClientOptions::region`] set), with their region.
    pub fn endpoint_regions(&self) -> Vec<(String, String)> {
        self.transport.regions()
    }

    /// The settings this client was built with.
    pub fn options(&self) -> &ClientOptions {
        self.transport.options()
    }

    /// Claims the record of the request's target (see [`ClaimRequest`]). A claim whose answer
    /// was lost is re-sent with the same holder, which gets the same ownership back.
    pub async fn claim(&self, request: ClaimRequest) -> Result<Claim, ClientError> {
        let target = request.target().clone();
        let (wire, holder) = claim_request_to_proto(request);
        let route = Route::Tenant(target.scope.tenant());
        let reply = self
            .transport
            .call_coalesced(route, self.timeout(), Call::Claim(wire))
            .await?;
        match reply {
            Reply::Claim(response) => claim_from_proto(response, holder, target),
            _ => Err(ClientError::invalid_response(
                "a claim answered without a claim",
            )),
        }
    }

    /// Owner: PENDING → IN_PROGRESS.
    pub async fn start(&self, target: &Target, fence: u64) -> Result<Record, ClientError> {
        let (scope, key) = target_to_proto(target);
        let wire = v1::StartRequest { scope, key, fence };
        self.mutate(target, Call::Start(wire)).await
    }

    /// Owner: records `CALLING` before calling a downstream (pass the operation id as the
    /// downstream's idempotency key). Moves a PENDING record to IN_PROGRESS.
    pub async fn record_calling(
        &self,
        target: &Target,
        fence: u64,
        remote_ref: Option<&str>,
    ) -> Result<Record, ClientError> {
        let stage = v1::ExternalCallStage::Calling;
        self.external_call(target, fence, stage, remote_ref.unwrap_or_default())
            .await
    }

    /// Owner: records `REMOTE_CONFIRMED` with the downstream's reference.
    pub async fn record_confirmed(
        &self,
        target: &Target,
        fence: u64,
        remote_ref: &str,
    ) -> Result<Record, ClientError> {
        if remote_ref.is_empty() {
            return Err(ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "REMOTE_CONFIRMED needs the downstream's reference",
            ));
        }
        let stage = v1::ExternalCallStage::RemoteConfirmed;
        self.external_call(target, fence, stage, remote_ref).await
    }

    async fn external_call(
        &self,
        target: &Target,
        fence: u64,
        stage: v1::ExternalCallStage,
        remote_ref: &str,
    ) -> Result<Record, ClientError> {
        let (scope, key) = target_to_proto(target);
        let wire = v1::RecordExternalCallRequest {
            scope,
            key,
            fence,
            stage: stage as i32,
            remote_ref: remote_ref.to_owned(),
        };
        self.mutate(target, Call::RecordExternalCall(wire)).await
    }

    /// Owner: extends the lease to now + `lease` (`None`: the record's lease duration).
    pub async fn renew(
        &self,
        target: &Target,
        fence: u64,
        lease: Option<Duration>,
    ) -> Result<Record, ClientError> {
        let (scope, key) = target_to_proto(target);
        let lease_ms = lease.map(millis);
        let wire = v1::RenewRequest {
            scope,
            key,
            fence,
            lease_ms,
        };
        self.mutate(target, Call::Renew(wire)).await
    }

    /// Owner: stores the result; the record becomes COMPLETED and is replayed.
    pub async fn complete(
        &self,
        target: &Target,
        fence: u64,
        result: &StoredResult,
    ) -> Result<Record, ClientError> {
        result.validate()?;
        let (scope, key) = target_to_proto(target);
        let wire = v1::CompleteRequest {
            scope,
            key,
            fence,
            result: Some(convert::result_to_proto(result)),
        };
        self.mutate(target, Call::Complete(wire)).await
    }

    /// Owner: records a failure, retryable (next claim takes over) or terminal (replayed).
    pub async fn fail(
        &self,
        target: &Target,
        fence: u64,
        kind: FailureKind,
        error: &ErrorSummary,
    ) -> Result<Record, ClientError> {
        error.validate()?;
        let (scope, key) = target_to_proto(target);
        let wire = v1::FailRequest {
            scope,
            key,
            fence,
            retryable: kind == FailureKind::Retryable,
            error: Some(convert::error_to_proto(error)),
        };
        self.mutate(target, Call::Fail(wire)).await
    }

    /// Owner: gives the record up (back to PENDING, no lease); only before any external call.
    pub async fn release(&self, target: &Target, fence: u64) -> Result<Record, ClientError> {
        let (scope, key) = target_to_proto(target);
        let wire = v1::ReleaseRequest { scope, key, fence };
        self.mutate(target, Call::Release(wire)).await
    }

    /// Owner: cancels the operation (CANCELLED, terminal); only before any external call.
    pub async fn cancel(&self, target: &Target, fence: u64) -> Result<Record, ClientError> {
        let (scope, key) = target_to_proto(target);
        let wire = v1::CancelRequest { scope, key, fence };
        self.mutate(target, Call::Cancel(wire)).await
    }

    /// Reads the record of `target` and what a matching claim would decide now.
    pub async fn get(&self, target: &Target) -> Result<Lookup, ClientError> {
        let (scope, key) = target_to_proto(target);
        let wire = v1::GetRequest { scope, key };
        let route = Route::Tenant(target.scope.tenant());
        let response = self
            .idem(Kind::Read, route, self.timeout(), |mut c| {
                let wire = wire.clone();
                async move { c.get(wire).await }
            })
            .await?;
        lookup_from_get(response)
    }

    /// Reads a record by operation id.
    pub async fn get_operation(&self, operation_id: OperationId) -> Result<Lookup, ClientError> {
        let wire = v1::GetOperationRequest {
            operation_id: operation_id.to_string(),
        };
        let response = self
            .idem(Kind::Read, Route::Default, self.timeout(), |mut c| {
                let wire = wire.clone();
                async move { c.get_operation(wire).await }
            })
            .await?;
        lookup_from_get(response)
    }

    /// Waits up to `timeout` (at most [`MAX_WAIT`]) for the record of `target` to settle.
    pub async fn wait(&self, target: &Target, timeout: Duration) -> Result<Lookup, ClientError> {
        let (scope, key) = target_to_proto(target);
        let route = Route::Tenant(target.scope.tenant());
        self.wait_for(route, scope, key, String::new(), timeout)
            .await
    }

    /// Waits up to `timeout` (at most [`MAX_WAIT`]) for the record of an operation to settle.
    pub async fn wait_operation(
        &self,
        operation_id: OperationId,
        timeout: Duration,
    ) -> Result<Lookup, ClientError> {
        let id = operation_id.to_string();
        self.wait_for(Route::Default, None, String::new(), id, timeout)
            .await
    }

    async fn wait_for(
        &self,
        route: Route<'_>,
        scope: Option<v1::Scope>,
        key: String,
        operation_id: String,
        timeout: Duration,
    ) -> Result<Lookup, ClientError> {
        let budget = timeout.clamp(Duration::from_millis(1), MAX_WAIT);
        let wire = v1::WaitRequest {
            scope,
            key,
            operation_id,
            timeout_ms: millis(budget),
        };
        let response = self
            .idem(Kind::Read, route, self.timeout() + budget, |mut c| {
                let wire = wire.clone();
                async move { c.wait(wire).await }
            })
            .await?;
        lookup_from_wait(response)
    }

    /// Admin: one page of records by state and age.
    pub async fn list_operations(&self, query: &ListQuery) -> Result<Page, ClientError> {
        let wire = list_query_to_proto(query);
        let response = self
            .admin(Kind::Read, |mut c| {
                let wire = wire.clone();
                async move { c.list_operations(wire).await }
            })
            .await?;
        page_from_proto(response)
    }

    /// Admin: decides a non-terminal record (version-checked, audited); answers the record
    /// after the change.
    pub async fn reconcile(&self, decision: &Reconciliation) -> Result<Record, ClientError> {
        let wire = reconciliation_to_proto(decision)?;
        let response = self
            .admin(Kind::Write, |mut c| {
                let wire = wire.clone();
                async move { c.reconcile(wire).await }
            })
            .await?;
        required_record(response.record)
    }

    /// Admin: scrubs the stored result fields of every record of `(tenant, actor)`, keeping
    /// the anti-duplicate tombstones; answers the number of records scrubbed.
    pub async fn purge_subject(
        &self,
        tenant: &str,
        actor: &str,
        why: &str,
        operator: &str,
    ) -> Result<u64, ClientError> {
        validate_tenant(tenant)?;
        validate_actor(actor)?;
        if why.trim().is_empty() {
            return Err(ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "a purge needs a reason",
            ));
        }
        let wire = v1::PurgeSubjectRequest {
            tenant: tenant.to_owned(),
            actor: actor.to_owned(),
            reason: why.to_owned(),
            operator: operator.to_owned(),
        };
        let response = self
            .transport
            .call(
                Kind::Write,
                Route::Tenant(tenant),
                self.timeout(),
                |channel| {
                    let wire = wire.clone();
                    async move { AdminClient::new(channel).purge_subject(wire).await }
                },
            )
            .await?;
        Ok(response.records_scrubbed)
    }

    /// Admin: the status of the preferred node (any node answers, not linearizable).
    pub async fn status(&self) -> Result<NodeStatus, ClientError> {
        self.admin(Kind::Read, |mut c| async move {
            c.status(v1::StatusRequest {}).await
        })
        .await
        .map(node_status_from_proto)
    }

    /// Admin: the status of one given node, in one attempt, without routing elsewhere
    /// (`endpoint` need not be one of the client's).
    pub async fn status_of(&self, endpoint: &str) -> Result<NodeStatus, ClientError> {
        self.transport
            .call_on(endpoint, self.timeout(), |channel| async move {
                AdminClient::new(channel).status(v1::StatusRequest {}).await
            })
            .await
            .map(node_status_from_proto)
    }

    /// Admin: the members with the leader's view of their replication (matched index,
    /// lag). Answered by the leader (any node forwards it).
    pub async fn list_members(&self) -> Result<Membership, ClientError> {
        self.admin(Kind::Read, |mut c| async move {
            c.list_members(v1::ListMembersRequest {}).await
        })
        .await
        .map(membership_from_proto)
    }

    /// Admin: adds `member` as a learner; returns once it caught up with the leader's log
    /// (`caught_up`) or the server's bound passed (then `caught_up` is false: check its lag
    /// before promoting). Adding an existing member with the same addresses is a no-op.
    pub async fn add_member(&self, member: Member) -> Result<Membership, ClientError> {
        let wire = v1::AddMemberRequest {
            member: Some(member_to_proto(&member)),
        };
        self.admin(Kind::Write, |mut c| {
            let wire = wire.clone();
            async move { c.add_member(wire).await }
        })
        .await
        .map(added_membership_from_proto)
    }

    /// Admin: turns learner `id` into a voter (a no-op for a voter).
    pub async fn promote_member(&self, id: u64) -> Result<Membership, ClientError> {
        self.admin(Kind::Write, |mut c| async move {
            c.promote_member(v1::PromoteMemberRequest { id }).await
        })
        .await
        .map(|r| members_from_proto(r.members))
    }

    /// Admin: removes member `id` (voter or learner); the last voter cannot be removed.
    pub async fn remove_member(&self, id: u64) -> Result<Membership, ClientError> {
        self.admin(Kind::Write, |mut c| async move {
            c.remove_member(v1::RemoveMemberRequest { id }).await
        })
        .await
        .map(|r| members_from_proto(r.members))
    }

    /// Admin: hands leadership of the global group to voter `to`; returns the leader id
    /// once it leads. See [`Client::transfer_leader_in`] for region groups.
    pub async fn transfer_leader(&self, to: u64) -> Result<u64, ClientError> {
        self.transfer_leader_in(GLOBAL_GROUP, to).await
    }

    /// Admin: hands leadership of group `group` ([`GLOBAL_GROUP`], or a region group's id
    /// from [`Client::list_groups`]) to voter `to`; returns the leader id once it leads.
    pub async fn transfer_leader_in(&self, group: GroupId, to: u64) -> Result<u64, ClientError> {
        self.admin(Kind::Write, |mut c| async move {
            c.transfer_leader(v1::TransferLeaderRequest { to, group })
                .await
        })
        .await
        .map(|r| r.leader_id)
    }

    /// Admin: the cluster configuration (mode, regions with their group ids, tenant homes),
    /// read linearizably from the global group.
    pub async fn cluster_config(&self) -> Result<ClusterConfig, ClientError> {
        let response = self
            .admin(Kind::Read, |mut c| async move {
                c.get_cluster_config(v1::GetClusterConfigRequest {}).await
            })
            .await?;
        config_from_proto(response)
    }

    /// Admin: switches the placement mode; answers the configuration after the change.
    /// Switching to [`Mode::Global`] is refused (`PLACEMENT_CONFLICT`) while tenants have
    /// homes. Setting the current mode is a no-op.
    pub async fn set_mode(&self, mode: Mode) -> Result<ClusterConfig, ClientError> {
        let wire = v1::SetModeRequest {
            mode: mode_to_proto(mode) as i32,
        };
        self.config_change(|mut c| async move { c.set_mode(wire).await })
            .await
    }

    /// Admin: defines region `name` (it gets the next group id, a Raft group on every node
    /// whose leader is kept in that region). Defining an existing region is a no-op; more
    /// than 16 regions are refused (`PLACEMENT_CONFLICT`).
    pub async fn add_region(&self, name: &str) -> Result<ClusterConfig, ClientError> {
        validate_region(name)?;
        let wire = v1::AddRegionRequest {
            name: name.to_owned(),
        };
        self.config_change(|mut c| {
            let wire = wire.clone();
            async move { c.add_region(wire).await }
        })
        .await
    }

    /// Admin: makes `region` the home of `tenant` (region-affinity mode): its keys are
    /// decided by that region's group from then on. Refused with `TENANT_HOME_IMMUTABLE`
    /// once the tenant has records, `UNKNOWN_REGION` for an undefined region,
    /// `PLACEMENT_CONFLICT` in global mode. Repeating a bind is a no-op.
    pub async fn bind_tenant(
        &self,
        tenant: &str,
        region: &str,
    ) -> Result<ClusterConfig, ClientError> {
        validate_tenant(tenant)?;
        validate_region(region)?;
        let wire = v1::BindTenantRequest {
            tenant: tenant.to_owned(),
            region: region.to_owned(),
        };
        self.config_change(|mut c| {
            let wire = wire.clone();
            async move { c.bind_tenant(wire).await }
        })
        .await
    }

    /// Admin: gives `tenant` back to the global group. Refused with
    /// `TENANT_HOME_IMMUTABLE` once it has records in its region group; unbinding an
    /// unbound tenant is a no-op.
    pub async fn unbind_tenant(&self, tenant: &str) -> Result<ClusterConfig, ClientError> {
        validate_tenant(tenant)?;
        let wire = v1::UnbindTenantRequest {
            tenant: tenant.to_owned(),
        };
        self.config_change(|mut c| {
            let wire = wire.clone();
            async move { c.unbind_tenant(wire).await }
        })
        .await
    }

    /// Admin: every group as the preferred node sees it (leader, its region, whether it is
    /// home, failover state, tenants); not linearizable.
    pub async fn list_groups(&self) -> Result<Groups, ClientError> {
        let response = self
            .admin(Kind::Read, |mut c| async move {
                c.list_groups(v1::ListGroupsRequest {}).await
            })
            .await?;
        groups_from_proto(response)
    }

    /// Admin: every group as the node at `endpoint` sees it, in one attempt, without routing
    /// elsewhere (`endpoint` need not be one of the client's).
    pub async fn list_groups_of(&self, endpoint: &str) -> Result<Groups, ClientError> {
        let response = self
            .transport
            .call_on(endpoint, self.timeout(), |channel| async move {
                AdminClient::new(channel)
                    .list_groups(v1::ListGroupsRequest {})
                    .await
            })
            .await?;
        groups_from_proto(response)
    }

    /// Admin: declares `new_home` the home of region group `group`, ending its failover
    /// (new epoch, audited with `reason` and `admin`). For a home region lost for good:
    /// the group's leader is then kept in `new_home`. Refused with `NOT_IN_FAILOVER` when
    /// the group is not in failover (also the answer to a retry whose first attempt did
    /// apply: check with [`Client::list_groups`]), `NOT_FOUND` for an unknown group.
    pub async fn confirm_failover(
        &self,
        group: GroupId,
        new_home: &str,
        why: &str,
        admin: &str,
    ) -> Result<GroupStatus, ClientError> {
        if group == GLOBAL_GROUP {
            return Err(ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "the global group has no home region: name a region group",
            ));
        }
        validate_region(new_home)?;
        if why.trim().is_empty() {
            return Err(ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "confirming a new home needs a reason",
            ));
        }
        let wire = v1::ConfirmFailoverRequest {
            group,
            new_home: new_home.to_owned(),
            reason: why.to_owned(),
            admin: admin.to_owned(),
        };
        self.admin(Kind::Write, |mut c| {
            let wire = wire.clone();
            async move { c.confirm_failover(wire).await }
        })
        .await
        .map(group_status_from_proto)
    }

    async fn config_change<F, Fut>(&self, rpc: F) -> Result<ClusterConfig, ClientError>
    where
        F: Fn(AdminClient<Connection>) -> Fut,
        Fut: Future<Output = Rpc<v1::ClusterConfig>>,
    {
        config_from_proto(self.admin(Kind::Write, rpc).await?)
    }

    fn timeout(&self) -> Duration {
        self.transport.options().request_timeout
    }

    async fn idem<T, F, Fut>(
        &self,
        kind: Kind,
        route: Route<'_>,
        timeout: Duration,
        rpc: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(IdempotencyClient<Connection>) -> Fut,
        Fut: Future<Output = Rpc<T>>,
    {
        self.transport
            .call(kind, route, timeout, |channel| {
                rpc(IdempotencyClient::new(channel))
            })
            .await
    }

    /// A worker command on `target`, on the route of its tenant.
    async fn mutate(&self, target: &Target, call: Call) -> Result<Record, ClientError> {
        let route = Route::Tenant(target.scope.tenant());
        match self
            .transport
            .call_coalesced(route, self.timeout(), call)
            .await?
        {
            Reply::Record(response) => required_record(response.record),
            _ => Err(ClientError::invalid_response(
                "a worker command answered without a record",
            )),
        }
    }

    async fn admin<T, F, Fut>(&self, kind: Kind, rpc: F) -> Result<T, ClientError>
    where
        F: Fn(AdminClient<Connection>) -> Fut,
        Fut: Future<Output = Rpc<T>>,
    {
        self.transport
            .call(kind, Route::Default, self.timeout(), |channel| {
                rpc(AdminClient::new(channel))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn client_is_send_sync_clone() {
        assert_send_sync::<Client>();
    }

    #[test]
    fn connect_is_lazy_and_validates_endpoints() {
        // No runtime and no server needed: nothing connects until the first call.
        let client = Client::connect(vec!["127.0.0.1:1".into()], ClientOptions::default()).unwrap();
        assert_eq!(client.endpoints(), ["http://127.0.0.1:1"]);
        assert_eq!(client.preferred_endpoint(), "http://127.0.0.1:1");
        let err =
            Client::connect(vec!["https://x:1".into()], ClientOptions::default()).unwrap_err();
        assert_eq!(err.reason(), "INVALID_ARGUMENT");
        assert!(Client::connect(vec!["a b:1".into()], ClientOptions::default()).is_err());
    }
}
