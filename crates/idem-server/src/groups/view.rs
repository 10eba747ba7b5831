//! A group as `Admin.ListGroups` and the failover calls report it, read from this node's
//! Raft metrics and applied placement (not linearizable).

use openraft::async_runtime::WatchReceiver;

use super::group::Group;
use crate::backend::GroupView;

/// This node's view of a group.
pub(super) fn of(group: &Group) -> GroupView {
    let metrics = group.raft().metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let leader_region = metrics
        .current_leader
        .and_then(|id| membership.get_node(&id))
        .map(|n| n.region.clone())
        .unwrap_or_default();
    let state = group.placement().group.clone();
    let home = state.as_ref().map(|s| s.home.clone()).unwrap_or_default();
    GroupView {
        group: group.id(),
        region: state.as_ref().map(|s| s.region.clone()).unwrap_or_default(),
        leader_id: metrics.current_leader,
        leader_home: state.is_none() || (!leader_region.is_empty() && leader_region == home),
        leader_region,
        home,
        term: metrics.current_term,
        commit_index: metrics
            .cluster_committed
            .as_ref()
            .map_or(0, |id| id.index()),
        applied_index: metrics.last_applied.as_ref().map_or(0, |id| id.index()),
        epoch: state.as_ref().map_or(0, |s| s.epoch),
        failover: state.as_ref().and_then(|s| s.failover.clone()),
        tenants: state
            .map(|s| s.admitted.into_iter().collect())
            .unwrap_or_default(),
    }
}
