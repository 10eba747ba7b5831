//! A fake node's `Admin` service, in memory.
//!
//! [`FakeAdmin`] answers the placement and status rpcs as a node would: configuration changes
//! bump the version only when something changed, binding to an undefined region is
//! `UNKNOWN_REGION`, switching to global mode with homed tenants is `PLACEMENT_CONFLICT`,
//! confirming a group that is not in failover is `NOT_IN_FAILOVER`. It records the `Debug`
//! form of every request, so a test asserts exactly what its client sent.
//!
//! Several fakes can stand for the nodes of one cluster ([`FakeAdmin::peer`]): they share the
//! configuration, the groups and the membership, and each has its own id, region and log of
//! requests. A test whose node must answer an rpc its own way (e.g. `PurgeSubject` routed
//! by tenant) implements [`AdminFake`] and serves that instead.

use std::future::{ready, Future};
use std::sync::{Arc, Mutex};

use tonic::{Request, Response, Status};

use super::sample;
use crate::v1::admin_server::{Admin, AdminServer};
use crate::{reason, status, v1};

/// A fake's answer to one rpc.
pub type Answer<T> = Result<Response<T>, Status>;

/// What the nodes of one fake cluster share.
#[derive(Debug)]
struct Cluster {
    config: Mutex<v1::ClusterConfig>,
    groups: Mutex<Vec<v1::GroupStatus>>,
    members: Mutex<Vec<v1::Member>>,
}

/// One fake node.
#[derive(Debug)]
struct Node {
    id: u64,
    region: String,
    cluster: Arc<Cluster>,
    requests: Mutex<Vec<String>>,
}

/// A fake node's `Admin` service: cheap to clone (clones are the same node).
#[derive(Clone, Debug)]
pub struct FakeAdmin(Arc<Node>);

impl FakeAdmin {
    /// Node `id` in `region` of a new cluster: global mode, configuration version 0, the
    /// groups of [`sample::group_statuses`], no members (see [`FakeAdmin::edit_members`]).
    pub fn new(id: u64, region: &str) -> Self {
        let cluster = Cluster {
            config: Mutex::new(v1::ClusterConfig {
                mode: v1::Mode::Global as i32,
                ..v1::ClusterConfig::default()
            }),
            groups: Mutex::new(sample::group_statuses()),
            members: Mutex::new(Vec::new()),
        };
        Self::in_cluster(id, region, Arc::new(cluster))
    }

    /// Node `id` in `region` of this node's cluster.
    pub fn peer(&self, id: u64, region: &str) -> Self {
        Self::in_cluster(id, region, Arc::clone(&self.0.cluster))
    }

    fn in_cluster(id: u64, region: &str, cluster: Arc<Cluster>) -> Self {
        FakeAdmin(Arc::new(Node {
            id,
            region: region.to_owned(),
            cluster,
            requests: Mutex::new(Vec::new()),
        }))
    }

    /// Changes the cluster's membership (what `Status` and `ListMembers` answer).
    pub fn edit_members(&self, edit: impl FnOnce(&mut Vec<v1::Member>)) {
        edit(&mut self.0.cluster.members.lock().unwrap());
    }

    /// The `Debug` form of every request this node received, in order.
    pub fn requests(&self) -> Vec<String> {
        self.0.requests.lock().unwrap().clone()
    }

    /// The cluster configuration now.
    pub fn config(&self) -> v1::ClusterConfig {
        self.0.cluster.config.lock().unwrap().clone()
    }

    fn note<T: std::fmt::Debug>(&self, request: Request<T>) -> T {
        let request = request.into_inner();
        self.0.requests.lock().unwrap().push(format!("{request:?}"));
        request
    }

    /// `Status`: this node leads the global group at term 3, index 40, with the members.
    pub fn status(&self, request: Request<v1::StatusRequest>) -> Answer<v1::StatusResponse> {
        self.note(request);
        Ok(Response::new(v1::StatusResponse {
            node_id: self.0.id,
            leader_id: self.0.id,
            term: 3,
            commit_index: 40,
            applied_index: 40,
            last_log_index: 40,
            membership: self.0.cluster.members.lock().unwrap().clone(),
            region: self.0.region.clone(),
            zone: format!("{}-1a", self.0.region),
            ..v1::StatusResponse::default()
        }))
    }

    /// `ListMembers`: the members, every one caught up with this node's log (index 40).
    pub fn list_members(
        &self,
        request: Request<v1::ListMembersRequest>,
    ) -> Answer<v1::ListMembersResponse> {
        self.note(request);
        let members = self.0.cluster.members.lock().unwrap().clone();
        Ok(Response::new(v1::ListMembersResponse {
            members: members
                .into_iter()
                .map(|m| v1::Member {
                    matched_index: 40,
                    lag: 0,
                    ..m
                })
                .collect(),
            leader_id: self.0.id,
            term: 3,
            commit_index: 40,
        }))
    }

    /// `TransferLeader`: the target leads at once, at term 7.
    pub fn transfer_leader(
        &self,
        request: Request<v1::TransferLeaderRequest>,
    ) -> Answer<v1::TransferLeaderResponse> {
        let wire = self.note(request);
        Ok(Response::new(v1::TransferLeaderResponse {
            leader_id: wire.to,
            term: 7,
        }))
    }

    /// `GetClusterConfig`.
    pub fn get_cluster_config(
        &self,
        request: Request<v1::GetClusterConfigRequest>,
    ) -> Answer<v1::ClusterConfig> {
        self.note(request);
        Ok(Response::new(self.config()))
    }

    /// `SetMode`: `PLACEMENT_CONFLICT` for global mode while tenants have homes.
    pub fn set_mode(&self, request: Request<v1::SetModeRequest>) -> Answer<v1::ClusterConfig> {
        let wire = self.note(request);
        self.change(|config| {
            if wire.mode == v1::Mode::Global as i32 && !config.homes.is_empty() {
                return Err(status::error(
                    reason::PLACEMENT_CONFLICT,
                    "tenants have a home region; unbind them before switching to global mode",
                    [],
                ));
            }
            let changed = config.mode != wire.mode;
            config.mode = wire.mode;
            Ok(changed)
        })
    }

    /// `AddRegion`: the next group id; a no-op for a defined region.
    pub fn add_region(&self, request: Request<v1::AddRegionRequest>) -> Answer<v1::ClusterConfig> {
        let wire = self.note(request);
        self.change(|config| {
            if config.regions.iter().any(|r| r.name == wire.name) {
                return Ok(false);
            }
            let group = config.regions.len() as u64 + 1;
            config.regions.push(v1::Region {
                name: wire.name,
                group,
            });
            Ok(true)
        })
    }

    /// `BindTenant`: `UNKNOWN_REGION` for an undefined region.
    pub fn bind_tenant(
        &self,
        request: Request<v1::BindTenantRequest>,
    ) -> Answer<v1::ClusterConfig> {
        let wire = self.note(request);
        self.change(|config| {
            if !config.regions.iter().any(|r| r.name == wire.region) {
                let message = format!("no region named {}", wire.region);
                return Err(status::error(reason::UNKNOWN_REGION, message, []));
            }
            config.homes.retain(|h| h.tenant != wire.tenant);
            config.homes.push(v1::TenantHome {
                tenant: wire.tenant,
                region: wire.region,
            });
            Ok(true)
        })
    }

    /// `UnbindTenant`.
    pub fn unbind_tenant(
        &self,
        request: Request<v1::UnbindTenantRequest>,
    ) -> Answer<v1::ClusterConfig> {
        let wire = self.note(request);
        self.change(|config| {
            config.homes.retain(|h| h.tenant != wire.tenant);
            Ok(true)
        })
    }

    /// Applies `edit` (which says whether it changed anything) and answers the configuration,
    /// its version bumped when it changed.
    fn change(
        &self,
        edit: impl FnOnce(&mut v1::ClusterConfig) -> Result<bool, Status>,
    ) -> Answer<v1::ClusterConfig> {
        let mut config = self.0.cluster.config.lock().unwrap();
        if edit(&mut config)? {
            config.version += 1;
        }
        Ok(Response::new(config.clone()))
    }

    /// `ListGroups`: the cluster's groups as this node sees them, with the configuration.
    pub fn list_groups(
        &self,
        request: Request<v1::ListGroupsRequest>,
    ) -> Answer<v1::ListGroupsResponse> {
        self.note(request);
        Ok(Response::new(v1::ListGroupsResponse {
            groups: self.0.cluster.groups.lock().unwrap().clone(),
            node_id: self.0.id,
            region: self.0.region.clone(),
            config: Some(self.config()),
        }))
    }

    /// `ConfirmFailover`: the group's home becomes `new_home`, its failover ends at the next
    /// epoch. `NOT_FOUND` for an unknown group, `NOT_IN_FAILOVER` for one not in failover.
    pub fn confirm_failover(
        &self,
        request: Request<v1::ConfirmFailoverRequest>,
    ) -> Answer<v1::GroupStatus> {
        let wire = self.note(request);
        let mut groups = self.0.cluster.groups.lock().unwrap();
        let group = groups
            .iter_mut()
            .find(|g| g.group == wire.group)
            .ok_or_else(|| status::error(reason::NOT_FOUND, "no such group", []))?;
        let epoch = match &group.failover {
            Some(failover) if failover.active => failover.epoch + 1,
            _ => {
                let message = "the group is not in failover";
                return Err(status::error(reason::NOT_IN_FAILOVER, message, []));
            }
        };
        group.leader_home = group.leader_region == wire.new_home;
        group.home = wire.new_home;
        group.failover = Some(v1::Failover {
            epoch,
            ..v1::Failover::default()
        });
        Ok(Response::new(group.clone()))
    }
}

fn unimplemented<T>() -> Answer<T> {
    Err(Status::unimplemented("not part of this fake"))
}

/// A fake node as [`service`] serves it: [`FakeAdmin`]'s answers, and the rpcs a test answers
/// its own way. Every rpc that neither answers is UNIMPLEMENTED.
pub trait AdminFake: Send + Sync + 'static {
    /// The node's standard answers.
    fn admin(&self) -> &FakeAdmin;

    /// `PurgeSubject`: UNIMPLEMENTED unless the test answers it.
    fn purge_subject(
        &self,
        _: Request<v1::PurgeSubjectRequest>,
    ) -> impl Future<Output = Answer<v1::PurgeSubjectResponse>> + Send {
        ready(unimplemented())
    }

    /// `ListAudit`: UNIMPLEMENTED unless the test answers it.
    fn list_audit(
        &self,
        _: Request<v1::ListAuditRequest>,
    ) -> impl Future<Output = Answer<v1::ListAuditResponse>> + Send {
        ready(unimplemented())
    }
}

impl AdminFake for FakeAdmin {
    fn admin(&self) -> &FakeAdmin {
        self
    }
}

/// A fake as the tonic `Admin` service.
#[derive(Debug)]
pub struct Served<F>(F);

/// The tonic service of `fake`, to add to a `tonic::transport::Server`.
pub fn service<F: AdminFake>(fake: F) -> AdminServer<Served<F>> {
    AdminServer::new(Served(fake))
}

#[tonic::async_trait]
impl<F: AdminFake> Admin for Served<F> {
    async fn list_operations(
        &self,
        _: Request<v1::ListOperationsRequest>,
    ) -> Answer<v1::ListOperationsResponse> {
        unimplemented()
    }

    async fn reconcile(&self, _: Request<v1::ReconcileRequest>) -> Answer<v1::ReconcileResponse> {
        unimplemented()
    }

    async fn purge_subject(
        &self,
        r: Request<v1::PurgeSubjectRequest>,
    ) -> Answer<v1::PurgeSubjectResponse> {
        self.0.purge_subject(r).await
    }

    async fn status(&self, r: Request<v1::StatusRequest>) -> Answer<v1::StatusResponse> {
        self.0.admin().status(r)
    }

    async fn top_keys(&self, _: Request<v1::TopKeysRequest>) -> Answer<v1::TopKeysResponse> {
        unimplemented()
    }

    async fn top_tenants(
        &self,
        _: Request<v1::TopTenantsRequest>,
    ) -> Answer<v1::TopTenantsResponse> {
        unimplemented()
    }

    async fn list_members(
        &self,
        r: Request<v1::ListMembersRequest>,
    ) -> Answer<v1::ListMembersResponse> {
        self.0.admin().list_members(r)
    }

    async fn add_member(&self, _: Request<v1::AddMemberRequest>) -> Answer<v1::AddMemberResponse> {
        unimplemented()
    }

    async fn promote_member(
        &self,
        _: Request<v1::PromoteMemberRequest>,
    ) -> Answer<v1::MembersResponse> {
        unimplemented()
    }

    async fn remove_member(
        &self,
        _: Request<v1::RemoveMemberRequest>,
    ) -> Answer<v1::MembersResponse> {
        unimplemented()
    }

    async fn transfer_leader(
        &self,
        r: Request<v1::TransferLeaderRequest>,
    ) -> Answer<v1::TransferLeaderResponse> {
        self.0.admin().transfer_leader(r)
    }

    async fn get_cluster_config(
        &self,
        r: Request<v1::GetClusterConfigRequest>,
    ) -> Answer<v1::ClusterConfig> {
        self.0.admin().get_cluster_config(r)
    }

    async fn set_mode(&self, r: Request<v1::SetModeRequest>) -> Answer<v1::ClusterConfig> {
        self.0.admin().set_mode(r)
    }

    async fn add_region(&self, r: Request<v1::AddRegionRequest>) -> Answer<v1::ClusterConfig> {
        self.0.admin().add_region(r)
    }

    async fn bind_tenant(&self, r: Request<v1::BindTenantRequest>) -> Answer<v1::ClusterConfig> {
        self.0.admin().bind_tenant(r)
    }

    async fn unbind_tenant(
        &self,
        r: Request<v1::UnbindTenantRequest>,
    ) -> Answer<v1::ClusterConfig> {
        self.0.admin().unbind_tenant(r)
    }

    async fn list_groups(
        &self,
        r: Request<v1::ListGroupsRequest>,
    ) -> Answer<v1::ListGroupsResponse> {
        self.0.admin().list_groups(r)
    }

    async fn confirm_failover(
        &self,
        r: Request<v1::ConfirmFailoverRequest>,
    ) -> Answer<v1::GroupStatus> {
        self.0.admin().confirm_failover(r)
    }

    async fn list_audit(&self, r: Request<v1::ListAuditRequest>) -> Answer<v1::ListAuditResponse> {
        self.0.list_audit(r).await
    }

    async fn create_token(
        &self,
        _: Request<v1::CreateTokenRequest>,
    ) -> Answer<v1::CreateTokenResponse> {
        unimplemented()
    }

    async fn revoke_token(
        &self,
        _: Request<v1::RevokeTokenRequest>,
    ) -> Answer<v1::RevokeTokenResponse> {
        unimplemented()
    }

    async fn list_tokens(
        &self,
        _: Request<v1::ListTokensRequest>,
    ) -> Answer<v1::ListTokensResponse> {
        unimplemented()
    }
}
