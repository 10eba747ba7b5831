//! The node's request router: sends each request to the group that decides its tenant.
//!
//! With one group (global mode, no regions) every call goes to the global group's
//! [`Replica`], exactly as before regions existed. With region groups:
//!
//! - **Writes** go to the group the locally applied configuration names for the
//!   command's tenant. The configuration may be stale on this node; the group then
//!   refuses the command with `WRONG_GROUP` before changing anything, and the router
//!   refreshes the configuration (a read barrier on the global group) and routes again.
//! - **Reads of a key** barrier the tenant's group, then check that this group still
//!   admits the tenant (fresh after the barrier); if not, the configuration is refreshed
//!   and the read routed again. Records never move between groups, so reading the group
//!   that admits the tenant is reading the only place its records can be.
//! - **Reads by operation id or scans** barrier and read every group (operation ids are
//!   unique across groups; scans merge in key order).

use std::sync::Arc;
use std::time::Duration;

use idem_core::placement::{ClusterConfig, GroupId, GLOBAL_GROUP};
use idem_core::{Command, OperationId, Outcome, Rejection};
use tokio::time::Instant;

use super::group::Group;
use super::set::GroupSet;
use crate::backend::RequestError;
use crate::replica::Replica;

/// Pause before routing again after a stale configuration.
const REROUTE_PAUSE: Duration = Duration::from_millis(20);

/// Routes API calls to groups.
pub struct Router {
    groups: GroupSet,
    write_timeout: Duration,
    read_timeout: Duration,
}

impl Router {
    /// A router over this node's groups.
    pub fn new(groups: GroupSet, write_timeout: Duration, read_timeout: Duration) -> Self {
        Router {
            groups,
            write_timeout,
            read_timeout,
        }
    }

    /// The groups.
    pub fn group_set(&self) -> &GroupSet {
        &self.groups
    }

    /// The bound of one write.
    pub fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// The global group's backend.
    pub fn global(&self) -> Arc<Replica> {
        Arc::clone(self.groups.global().backend())
    }

    /// The configuration as applied here.
    pub fn config(&self) -> ClusterConfig {
        self.groups.global().placement().cluster.clone()
    }

    /// The group the configuration applied here names for `tenant`.
    fn group_for(&self, tenant: &str) -> GroupId {
        self.groups.global().placement().cluster.group_of(tenant)
    }

    /// The backend of `group`, or `WRONG_GROUP` while this node has not started it yet.
    pub fn backend_of(&self, group: GroupId) -> Result<Arc<Replica>, RequestError> {
        self.groups
            .get(group)
            .map(|g| Arc::clone(g.backend()))
            .ok_or(RequestError::Rejected(Rejection::WrongGroup))
    }

    /// The group a command goes to, by the configuration applied here.
    fn group_of(&self, command: &Command) -> GroupId {
        if let Some(tenant) = command.tenant() {
            return self.group_for(tenant);
        }
        match command {
            Command::Reconcile(reconcile) => self
                .group_holding(&reconcile.operation_id)
                .unwrap_or(GLOBAL_GROUP),
            _ => GLOBAL_GROUP,
        }
    }

    /// The group whose applied state holds the operation.
    fn group_holding(&self, id: &OperationId) -> Option<GroupId> {
        self.groups.all().into_iter().find_map(|group| {
            let found = group.backend().reader().operation(id).ok().flatten();
            found.map(|_| group.id())
        })
    }

    /// Proposes to the tenant's group; routes again after `WRONG_GROUP`.
    pub(super) async fn propose_routed(&self, command: Command) -> Result<Outcome, RequestError> {
        let deadline = Instant::now() + self.write_timeout;
        loop {
            let result = match self.backend_of(self.group_of(&command)) {
                Ok(backend) => backend.propose_ref(&command).await,
                Err(error) => Err(error),
            };
            if !is_wrong_group(&result) || Instant::now() + REROUTE_PAUSE >= deadline {
                return result;
            }
            self.refresh().await?;
        }
    }

    /// Brings this node's configuration up to date (read barrier on the global group).
    async fn refresh(&self) -> Result<(), RequestError> {
        tokio::time::sleep(REROUTE_PAUSE).await;
        self.global().read_barrier().await
    }

    /// Barriers the tenant's group and checks it admits the tenant; returns that group.
    pub(super) async fn barrier_tenant(&self, tenant: &str) -> Result<Arc<Group>, RequestError> {
        let deadline = Instant::now() + self.read_timeout;
        loop {
            let id = self.group_for(tenant);
            if let Some(group) = self.groups.get(id) {
                group.backend().read_barrier().await?;
                if group.placement().admits(tenant) {
                    return Ok(group);
                }
            }
            if Instant::now() + REROUTE_PAUSE >= deadline {
                return Err(RequestError::Rejected(Rejection::WrongGroup));
            }
            self.refresh().await?;
        }
    }

    /// The group the applied configuration names for `tenant` (the global group if this
    /// node has not started it yet).
    pub(super) fn tenant_group(&self, tenant: &str) -> Arc<Group> {
        self.groups
            .get(self.group_for(tenant))
            .unwrap_or_else(|| self.groups.global())
    }
}

fn is_wrong_group(result: &Result<Outcome, RequestError>) -> bool {
    matches!(
        result,
        Ok(Outcome::Rejected(Rejection::WrongGroup))
            | Err(RequestError::Rejected(Rejection::WrongGroup))
    )
}

impl Router {
    /// Every group this node runs, the global group first.
    pub(super) fn all_groups(&self) -> Vec<Arc<Group>> {
        self.groups.all()
    }
}
