//! `Admin` region calls: cluster configuration, tenant homes, groups, failover.
//!
//! Translation only: the multi-group orchestration lives in the node's router
//! ([`crate::groups::Router`]) behind [`crate::backend::Backend::placement`].

use idem_core::placement::{ClusterChange, ClusterConfig, Mode};
use idem_proto::v1 as pb;

use crate::api::attribution::Attribution;
use crate::api::ApiContext;
use crate::backend::{GroupView, PlacementAnswer, PlacementCall, RequestError};

/// `GetClusterConfig`.
pub(crate) async fn config(ctx: &ApiContext) -> Result<pb::ClusterConfig, RequestError> {
    answer_config(ctx.backend.placement(PlacementCall::Config).await?)
}

/// `SetMode`.
pub(crate) async fn set_mode(
    ctx: &ApiContext,
    req: pb::SetModeRequest,
    by: Attribution,
) -> Result<pb::ClusterConfig, RequestError> {
    let mode = match pb::Mode::try_from(req.mode) {
        Ok(pb::Mode::Global) => Mode::Global,
        Ok(pb::Mode::RegionAffinity) => Mode::RegionAffinity,
        _ => {
            return Err(RequestError::argument(
                "mode: MODE_GLOBAL or MODE_REGION_AFFINITY",
            ))
        }
    };
    tracing::info!(mode = mode.name(), "setting the placement mode");
    change(ctx, ClusterChange::SetMode(mode), by).await
}

/// `AddRegion`.
pub(crate) async fn add_region(
    ctx: &ApiContext,
    req: pb::AddRegionRequest,
    by: Attribution,
) -> Result<pb::ClusterConfig, RequestError> {
    idem_core::placement::validate_region(&req.name)?;
    tracing::info!(region = %req.name, "adding a region");
    change(ctx, ClusterChange::AddRegion { name: req.name }, by).await
}

/// `BindTenant`.
pub(crate) async fn bind(
    ctx: &ApiContext,
    req: pb::BindTenantRequest,
    by: Attribution,
) -> Result<pb::ClusterConfig, RequestError> {
    let bind = ClusterChange::Bind {
        tenant: req.tenant,
        region: req.region,
    };
    bind.validate()?;
    change(ctx, bind, by).await
}

/// `UnbindTenant`.
pub(crate) async fn unbind(
    ctx: &ApiContext,
    req: pb::UnbindTenantRequest,
    by: Attribution,
) -> Result<pb::ClusterConfig, RequestError> {
    let unbind = ClusterChange::Unbind { tenant: req.tenant };
    unbind.validate()?;
    change(ctx, unbind, by).await
}

/// `ListGroups`.
pub(crate) fn list(ctx: &ApiContext) -> pb::ListGroupsResponse {
    let config = ctx.backend.cluster_config();
    pb::ListGroupsResponse {
        groups: ctx.backend.groups().iter().map(group_pb).collect(),
        node_id: ctx.backend.raft_status().node_id,
        region: ctx.region.clone(),
        config: Some(config_pb(&config)),
    }
}

/// `ConfirmFailover`.
pub(crate) async fn confirm(
    ctx: &ApiContext,
    req: pb::ConfirmFailoverRequest,
) -> Result<pb::GroupStatus, RequestError> {
    idem_core::placement::validate_region(&req.new_home)?;
    let admin = if req.admin.is_empty() {
        "unknown".to_owned()
    } else {
        req.admin
    };
    tracing::warn!(group = req.group, new_home = %req.new_home, %admin, "operator confirms a new home region");
    let call = PlacementCall::ConfirmFailover {
        group: req.group,
        new_home: req.new_home,
        reason: req.reason,
        admin,
    };
    match ctx.backend.placement(call).await? {
        PlacementAnswer::Group(group) => Ok(group_pb(&group)),
        PlacementAnswer::Config(_) => Err(unexpected()),
    }
}

/// Runs an audited cluster change (refused by validation before anything is proposed).
async fn change(
    ctx: &ApiContext,
    change: ClusterChange,
    by: Attribution,
) -> Result<pb::ClusterConfig, RequestError> {
    let audited = by.audited(change);
    idem_core::Command::AuditedCluster(audited.clone()).validate()?;
    answer_config(
        ctx.backend
            .placement(PlacementCall::Change(audited))
            .await?,
    )
}

fn answer_config(answer: PlacementAnswer) -> Result<pb::ClusterConfig, RequestError> {
    match answer {
        PlacementAnswer::Config(config) => Ok(config_pb(&config)),
        PlacementAnswer::Group(_) => Err(unexpected()),
    }
}

fn unexpected() -> RequestError {
    RequestError::Internal("unexpected placement answer".into())
}

fn config_pb(config: &ClusterConfig) -> pb::ClusterConfig {
    let mode = match config.mode {
        Mode::Global => pb::Mode::Global,
        Mode::RegionAffinity => pb::Mode::RegionAffinity,
    };
    pb::ClusterConfig {
        mode: mode.into(),
        regions: config
            .regions
            .iter()
            .map(|(name, group)| pb::Region {
                name: name.clone(),
                group: *group,
            })
            .collect(),
        homes: config
            .homes
            .iter()
            .map(|(tenant, region)| pb::TenantHome {
                tenant: tenant.clone(),
                region: region.clone(),
            })
            .collect(),
        version: config.version,
    }
}

fn group_pb(group: &GroupView) -> pb::GroupStatus {
    let failover = (group.group != idem_core::placement::GLOBAL_GROUP).then(|| pb::Failover {
        active: group.failover.is_some(),
        epoch: group.epoch,
        since_ms: group
            .failover
            .as_ref()
            .map_or(0, |f| i64::try_from(f.since.millis()).unwrap_or(i64::MAX)),
        leader_id: group.failover.as_ref().map_or(0, |f| f.leader_id),
        leader_region: group
            .failover
            .as_ref()
            .map(|f| f.leader_region.clone())
            .unwrap_or_default(),
    });
    pb::GroupStatus {
        group: group.group,
        region: group.region.clone(),
        home: group.home.clone(),
        leader_id: group.leader_id.unwrap_or(0),
        leader_region: group.leader_region.clone(),
        leader_home: group.leader_home,
        term: group.term,
        commit_index: group.commit_index,
        applied_index: group.applied_index,
        failover,
        tenants: group.tenants.clone(),
    }
}
