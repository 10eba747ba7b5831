//! Placement and membership calls that span groups, run by the [`Router`].
//!
//! **Binding a tenant** is three single-group steps, always in this order, each
//! idempotent so a failed call can simply be repeated:
//!
//! 1. if the tenant has another home: `Release` it in that region group — refused with
//!    `TENANT_HOME_IMMUTABLE` once it has records there; afterwards that group refuses
//!    the tenant;
//! 2. `Bind` it in the global group — refused once it has records in the global group;
//!    afterwards the global group refuses the tenant;
//! 3. `Admit` it in the new home's group; afterwards that group decides its keys.
//!
//! Between the steps no group accepts the tenant (claims get `WRONG_GROUP` and are routed
//! again until the deadline), so a key is never decided in two logs. Unbinding is steps
//! 1 and 2 with `Unbind`. Step 2 is the audited one (`AuditedCluster`, the caller's name
//! and reason); steps 1 and 3 are its mechanics and are not audited on their own.
//!
//! **Membership changes** apply to the global group first, then to every region group,
//! so every group keeps the same voters. A change waits (bounded) until this node has
//! opened every group the configuration names: right after a restart the provisioner may
//! still be opening them, and a change that skipped one would leave it without the member.

use std::sync::Arc;
use std::time::Duration;

use idem_core::command::Audited;
use idem_core::placement::{ClusterChange, GroupChange, GroupId, GLOBAL_GROUP};
use idem_core::{Command, Outcome, Placement, Rejection};
use idem_proto::reason;
use openraft::async_runtime::WatchReceiver;
use tokio::time::Instant;

use super::router::Router;
use super::view;
use crate::backend::{
    MembershipChange, MembershipView, PlacementAnswer, PlacementCall, RequestError,
};
use crate::replica::Replica;

/// How often a membership change looks again for a region group this node is opening.
const GROUP_WAIT_POLL: Duration = Duration::from_millis(20);

/// Runs a placement call.
pub(super) async fn run(
    router: &Router,
    call: PlacementCall,
) -> Result<PlacementAnswer, RequestError> {
    match call {
        PlacementCall::Config => {
            router.global().read_barrier().await?;
            Ok(PlacementAnswer::Config(router.config()))
        }
        PlacementCall::Change(audited) => match &audited.change {
            ClusterChange::Bind { tenant, region } => {
                bind(router, tenant.clone(), region.clone(), audited).await
            }
            ClusterChange::Unbind { tenant } => unbind(router, tenant.clone(), audited).await,
            _ => {
                let command = Command::AuditedCluster(audited);
                let placement = propose(&router.global(), command).await?;
                Ok(PlacementAnswer::Config(placement.cluster))
            }
        },
        PlacementCall::ConfirmFailover {
            group,
            new_home,
            reason,
            admin,
        } => confirm(router, group, new_home, reason, admin).await,
        PlacementCall::TransferLeader { group, to } => {
            let backend = region_group(router, group)?;
            backend
                .membership_call(MembershipChange::TransferLeader(to))
                .await?;
            let group = router
                .group_set()
                .get(group)
                .ok_or_else(|| no_group(group))?;
            Ok(PlacementAnswer::Group(view::of(&group)))
        }
    }
}

/// Membership calls: reads and transfers on the global group, changes on every group.
pub(super) async fn membership(
    router: &Router,
    change: MembershipChange,
) -> Result<MembershipView, RequestError> {
    let global = router.global();
    if matches!(
        change,
        MembershipChange::List | MembershipChange::TransferLeader(_)
    ) {
        return global.membership_call(change).await;
    }
    let regions = region_groups(router).await?;
    let view = global.membership_call(change.clone()).await?;
    for backend in regions {
        backend.membership_call(change.clone()).await?;
    }
    Ok(view)
}

/// The backends of every region group the configuration names. A change must reach all of
/// them, or the groups would disagree on their voters (a node added to some groups only
/// could never be promoted in the others). Just after a start this node may still be
/// opening some groups, so this waits for them up to the write timeout; past it, nothing
/// has changed yet and the call is refused as one to repeat.
async fn region_groups(router: &Router) -> Result<Vec<Arc<Replica>>, RequestError> {
    let deadline = Instant::now() + router.write_timeout();
    loop {
        let config = router.config();
        let opened: Option<Vec<Arc<Replica>>> = config
            .regions
            .values()
            .map(|id| router.group_set().get(*id).map(|g| Arc::clone(g.backend())))
            .collect();
        match opened {
            Some(backends) => return Ok(backends),
            None if Instant::now() + GROUP_WAIT_POLL < deadline => {
                tokio::time::sleep(GROUP_WAIT_POLL).await;
            }
            None => return Err(RequestError::refused(
                reason::WRONG_STATE,
                "this node is still opening its region groups; nothing changed; repeat the call",
            )),
        }
    }
}

async fn bind(
    router: &Router,
    tenant: String,
    region: String,
    audited: Audited<ClusterChange>,
) -> Result<PlacementAnswer, RequestError> {
    let global = router.global();
    global.read_barrier().await?;
    let config = router.config();
    let Some(&target) = config.regions.get(&region) else {
        return Err(Rejection::UnknownRegion { region }.into());
    };
    if !has_voter_in(&global, &region) {
        return Err(Rejection::PlacementConflict {
            message: format!(
                "no voter runs in region {region}: its group could never lead from home"
            ),
        }
        .into());
    }
    if let Some(old) = config.homes.get(&tenant).filter(|old| **old != region) {
        let old_group = config.regions.get(old).copied().unwrap_or(GLOBAL_GROUP);
        release(router, old_group, &tenant).await?;
    }
    let placement = propose(&global, Command::AuditedCluster(audited)).await?;
    admit(router, target, &tenant).await?;
    tracing::info!(%tenant, %region, "tenant bound to its home region");
    Ok(PlacementAnswer::Config(placement.cluster))
}

async fn unbind(
    router: &Router,
    tenant: String,
    audited: Audited<ClusterChange>,
) -> Result<PlacementAnswer, RequestError> {
    let global = router.global();
    global.read_barrier().await?;
    let config = router.config();
    let Some(old) = config.homes.get(&tenant) else {
        return Ok(PlacementAnswer::Config(config));
    };
    let old_group = config.regions.get(old).copied().unwrap_or(GLOBAL_GROUP);
    release(router, old_group, &tenant).await?;
    let placement = propose(&global, Command::AuditedCluster(audited)).await?;
    tracing::info!(%tenant, "tenant given back to the global group");
    Ok(PlacementAnswer::Config(placement.cluster))
}

async fn release(router: &Router, group: GroupId, tenant: &str) -> Result<(), RequestError> {
    let release = GroupChange::Release {
        tenant: tenant.to_owned(),
    };
    propose(&*router.backend_of(group)?, Command::Group(release))
        .await
        .map(drop)
}

/// Admits the tenant in its new group, waiting (bounded) for this node to run the group
/// and for the group to be marked as its region's (`Init`).
async fn admit(router: &Router, group: GroupId, tenant: &str) -> Result<(), RequestError> {
    let deadline = Instant::now() + router.write_timeout();
    loop {
        let admit = Command::Group(GroupChange::Admit {
            tenant: tenant.to_owned(),
        });
        let result = match router.backend_of(group) {
            Ok(backend) => propose(&backend, admit).await.map(drop),
            Err(error) => Err(error),
        };
        let not_ready = matches!(
            &result,
            Err(RequestError::Rejected(
                Rejection::WrongGroup | Rejection::PlacementConflict { .. }
            ))
        );
        if !not_ready || Instant::now() >= deadline {
            return result;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn confirm(
    router: &Router,
    group: GroupId,
    new_home: String,
    reason: String,
    admin: String,
) -> Result<PlacementAnswer, RequestError> {
    let backend = region_group(router, group)?;
    let metrics = backend.raft().metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let has_voter = membership.voter_ids().any(|id| {
        membership
            .get_node(&id)
            .is_some_and(|n| n.region == new_home)
    });
    if !has_voter {
        return Err(Rejection::PlacementConflict {
            message: format!("group {group} has no voter in region {new_home}"),
        }
        .into());
    }
    let change = GroupChange::ConfirmHome {
        new_home: new_home.clone(),
        reason,
        admin: admin.clone(),
    };
    propose(&backend, Command::Group(change)).await?;
    // Answer with this node's view only once it has applied the change.
    backend.read_barrier().await?;
    tracing::warn!(group, %new_home, %admin, "new home region confirmed by an operator: failover ended");
    let group = router
        .group_set()
        .get(group)
        .ok_or_else(|| no_group(group))?;
    Ok(PlacementAnswer::Group(view::of(&group)))
}

/// Whether a voter of the backend's group runs in `region`.
fn has_voter_in(backend: &Replica, region: &str) -> bool {
    let metrics = backend.raft().metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let found = membership
        .voter_ids()
        .any(|id| membership.get_node(&id).is_some_and(|n| n.region == region));
    found
}

/// The backend of a region group, `NOT_FOUND` for the global group or an unknown one.
fn region_group(router: &Router, group: GroupId) -> Result<Arc<Replica>, RequestError> {
    if group == GLOBAL_GROUP {
        return Err(RequestError::refused(
            reason::NOT_FOUND,
            "group 0 is the global group, it has no home region",
        ));
    }
    router
        .group_set()
        .get(group)
        .map(|g| Arc::clone(g.backend()))
        .ok_or_else(|| no_group(group))
}

fn no_group(group: GroupId) -> RequestError {
    RequestError::refused(reason::NOT_FOUND, format!("no group {group} on this node"))
}

/// Proposes a placement command and returns the placement after it.
async fn propose(backend: &Replica, command: Command) -> Result<Placement, RequestError> {
    match backend.propose(command).await? {
        Outcome::Placement(placement) => Ok(placement),
        Outcome::Rejected(rejection) => Err(rejection.into()),
        other => Err(RequestError::Internal(format!(
            "placement: unexpected outcome {other:?}"
        ))),
    }
}
