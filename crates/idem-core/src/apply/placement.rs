//! Placement commands: the cluster configuration (global group) and a region group's own
//! state (see [`crate::placement`]).
//!
//! A change that is already in place answers the current state and writes nothing but the
//! metadata, so the proposer may repeat any step of a multi-group change.
//!
//! An audited change (`by` is `Some`) writes its audit entry in the same write set as the
//! change, and only when it changed something: a refused or repeated change writes none.

use crate::apply::admin::audit;
use crate::apply::Ctx;
use crate::audit::AuditAction;
use crate::command::Audited;
use crate::error::StoreError;
use crate::outcome::{Outcome, Rejection};
use crate::placement::{
    ClusterChange, ClusterConfig, Failover, GroupChange, Mode, Placement, RegionGroup, MAX_REGIONS,
};
use crate::record::RecordKey;
use crate::store::StateStore;

/// Whether a change altered the state.
type Changed = Result<bool, Rejection>;

/// Who asked for an audited change, and why.
pub(crate) struct By<'a> {
    admin: &'a str,
    reason: &'a str,
}

impl<'a> By<'a> {
    /// The attribution of an audited command.
    pub(crate) fn of<T>(audited: &'a Audited<T>) -> Self {
        By {
            admin: &audited.admin,
            reason: &audited.reason,
        }
    }
}

pub(crate) fn cluster<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    change: &ClusterChange,
    by: Option<By<'_>>,
) -> Result<Outcome, StoreError> {
    let mut placement = state.placement()?;
    if placement.group.is_some() {
        return Ok(conflict(
            "the cluster configuration lives in the global group",
        ));
    }
    let has_records = |tenant: &str| has_records(state, tenant);
    let before = placement.cluster.clone();
    let config = &mut placement.cluster;
    let changed = match change {
        ClusterChange::SetMode(mode) => set_mode(config, *mode),
        ClusterChange::AddRegion { name } => add_region(config, name),
        ClusterChange::Bind { tenant, region } => bind(config, tenant, region, has_records)?,
        ClusterChange::Unbind { tenant } => Ok(config.homes.remove(tenant).is_some()),
    };
    if let (Ok(true), Some(by)) = (&changed, by) {
        let action = cluster_action(change, &before, &placement.cluster);
        audit(ctx, by.admin, by.reason, action);
    }
    Ok(finish(ctx, placement, changed, |p| p.cluster.version += 1))
}

/// The audit action of a cluster change that changed `before` into `after`.
fn cluster_action(
    change: &ClusterChange,
    before: &ClusterConfig,
    after: &ClusterConfig,
) -> AuditAction {
    match change {
        ClusterChange::SetMode(mode) => AuditAction::SetMode {
            from: before.mode,
            to: *mode,
        },
        ClusterChange::AddRegion { name } => AuditAction::AddRegion {
            name: name.clone(),
            group: after.regions.get(name).copied().unwrap_or_default(),
        },
        ClusterChange::Bind { tenant, region } => AuditAction::BindTenant {
            tenant: tenant.clone(),
            from: before.homes.get(tenant).cloned(),
            region: region.clone(),
        },
        ClusterChange::Unbind { tenant } => AuditAction::UnbindTenant {
            tenant: tenant.clone(),
            from: before.homes.get(tenant).cloned().unwrap_or_default(),
        },
    }
}

pub(crate) fn group<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    change: &GroupChange,
    by: Option<By<'_>>,
) -> Result<Outcome, StoreError> {
    let mut placement = state.placement()?;
    if let GroupChange::Init { region } = change {
        // A group holding records is the global group, whatever its configuration says.
        let has_records = !state.scan(&[], None, 1)?.is_empty();
        let changed = init(&mut placement, region, has_records);
        return Ok(finish(ctx, placement, changed, |_| {}));
    }
    let Some(group) = placement.group.as_mut() else {
        return Ok(conflict("not a region group (no Init applied)"));
    };
    let now = ctx.now;
    let changed = match change {
        GroupChange::Init { .. } => unreachable!("handled above"),
        GroupChange::Admit { tenant } => Ok(group.admitted.insert(tenant.clone())),
        GroupChange::Release { tenant } => release(group, tenant, has_records(state, tenant)?),
        GroupChange::EnterFailover {
            leader_id,
            leader_region,
        } => enter_failover(group, *leader_id, leader_region, now),
        GroupChange::EndFailover { .. } => Ok(group.failover.take().is_some()),
        GroupChange::ConfirmHome {
            new_home,
            reason,
            admin,
        } => match confirm_home(group, new_home) {
            Ok(action) => {
                audit(ctx, admin, reason, action);
                Ok(true)
            }
            Err(rejection) => Err(rejection),
        },
    };
    if let (Ok(true), Some(by)) = (&changed, by) {
        if let Some(action) = failover_action(change, group) {
            audit(ctx, by.admin, by.reason, action);
        }
    }
    let epoch_bump = matches!(
        change,
        GroupChange::EnterFailover { .. }
            | GroupChange::EndFailover { .. }
            | GroupChange::ConfirmHome { .. }
    );
    Ok(finish(ctx, placement, changed, |p| {
        if let (true, Some(group)) = (epoch_bump, p.group.as_mut()) {
            group.epoch += 1;
        }
    }))
}

/// The audit action of a failover change applied to `group` (epoch not bumped yet); `None`
/// for the other group changes, which are steps of an audited cluster change or carry
/// their own audit (`ConfirmHome`).
fn failover_action(change: &GroupChange, group: &RegionGroup) -> Option<AuditAction> {
    match change {
        GroupChange::EnterFailover {
            leader_id,
            leader_region,
        } => Some(AuditAction::EnterFailover {
            group_region: group.region.clone(),
            leader_id: *leader_id,
            leader_region: leader_region.clone(),
            epoch: group.epoch + 1,
        }),
        GroupChange::EndFailover { leader_id } => Some(AuditAction::EndFailover {
            group_region: group.region.clone(),
            leader_id: *leader_id,
            epoch: group.epoch + 1,
        }),
        _ => None,
    }
}

/// Writes the new placement if it changed (after `bump`), and answers it.
fn finish(
    ctx: &mut Ctx,
    mut placement: Placement,
    changed: Changed,
    bump: impl FnOnce(&mut Placement),
) -> Outcome {
    match changed {
        Err(rejection) => Outcome::Rejected(rejection),
        Ok(false) => Outcome::Placement(placement),
        Ok(true) => {
            bump(&mut placement);
            ctx.writes.placement = Some(placement.clone());
            Outcome::Placement(placement)
        }
    }
}

fn conflict(message: &str) -> Outcome {
    Outcome::Rejected(Rejection::PlacementConflict {
        message: message.to_owned(),
    })
}

fn has_records<S: StateStore + ?Sized>(state: &S, tenant: &str) -> Result<bool, StoreError> {
    Ok(!state
        .scan(&RecordKey::tenant_prefix(tenant), None, 1)?
        .is_empty())
}

fn set_mode(config: &mut ClusterConfig, mode: Mode) -> Changed {
    if mode == Mode::Global && !config.homes.is_empty() {
        return Err(Rejection::PlacementConflict {
            message: format!(
                "{} tenant(s) have a home region; unbind them before switching to global mode",
                config.homes.len()
            ),
        });
    }
    let changed = config.mode != mode;
    config.mode = mode;
    Ok(changed)
}

fn add_region(config: &mut ClusterConfig, name: &str) -> Changed {
    if config.regions.contains_key(name) {
        return Ok(false);
    }
    if config.regions.len() >= MAX_REGIONS {
        return Err(Rejection::PlacementConflict {
            message: format!("at most {MAX_REGIONS} regions"),
        });
    }
    let group = config.next_group();
    config.regions.insert(name.to_owned(), group);
    Ok(true)
}

fn bind(
    config: &mut ClusterConfig,
    tenant: &str,
    region: &str,
    has_records: impl Fn(&str) -> Result<bool, StoreError>,
) -> Result<Changed, StoreError> {
    if config.mode != Mode::RegionAffinity {
        return Ok(Err(Rejection::PlacementConflict {
            message: "tenant homes need region-affinity mode".into(),
        }));
    }
    if !config.regions.contains_key(region) {
        return Ok(Err(Rejection::UnknownRegion {
            region: region.to_owned(),
        }));
    }
    match config.homes.get(tenant) {
        Some(home) if home == region => return Ok(Ok(false)),
        // Moving between regions: the proposer released it from the old group first.
        Some(_) => {}
        None if has_records(tenant)? => {
            return Ok(Err(Rejection::TenantHomeImmutable {
                tenant: tenant.to_owned(),
            }))
        }
        None => {}
    }
    config.homes.insert(tenant.to_owned(), region.to_owned());
    Ok(Ok(true))
}

fn init(placement: &mut Placement, region: &str, has_records: bool) -> Changed {
    match &placement.group {
        Some(group) if group.region == region => Ok(false),
        Some(group) => Err(Rejection::PlacementConflict {
            message: format!("this is the group of region {}", group.region),
        }),
        None if placement.cluster.version > 0 || has_records => Err(Rejection::PlacementConflict {
            message: "this is the global group".into(),
        }),
        None => {
            placement.group = Some(RegionGroup::new(region.to_owned()));
            Ok(true)
        }
    }
}

fn release(group: &mut RegionGroup, tenant: &str, has_records: bool) -> Changed {
    if !group.admitted.contains(tenant) {
        return Ok(false);
    }
    if has_records {
        return Err(Rejection::TenantHomeImmutable {
            tenant: tenant.to_owned(),
        });
    }
    group.admitted.remove(tenant);
    Ok(true)
}

fn enter_failover(
    group: &mut RegionGroup,
    leader_id: u64,
    leader_region: &str,
    now: crate::time::Timestamp,
) -> Changed {
    if group.failover.is_some() {
        return Ok(false);
    }
    if leader_region == group.home {
        return Err(Rejection::PlacementConflict {
            message: format!("leader region {leader_region} is the home region"),
        });
    }
    group.failover = Some(Failover {
        since: now,
        leader_id,
        leader_region: leader_region.to_owned(),
    });
    Ok(true)
}

fn confirm_home(group: &mut RegionGroup, new_home: &str) -> Result<AuditAction, Rejection> {
    if group.failover.is_none() {
        return Err(Rejection::NotInFailover);
    }
    let from = std::mem::replace(&mut group.home, new_home.to_owned());
    group.failover = None;
    Ok(AuditAction::ConfirmHome {
        group_region: group.region.clone(),
        from,
        to: new_home.to_owned(),
        epoch: group.epoch + 1,
    })
}
