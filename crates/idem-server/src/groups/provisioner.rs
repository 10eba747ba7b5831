//! Starts this node's replica of every region group the cluster configuration defines.
//!
//! The configuration is replicated state of the global group, so every node learns of a
//! new region from its own log and opens the group's store and Raft instance. Exactly one
//! node initializes the new group — the lowest-id voter of the region (or the lowest-id
//! voter when the region has none), a rule every node evaluates the same way — with every
//! voter of the global group as its voters, so each group is replicated on every node and
//! starts with a leader in its home. The other replicas wait to be replicated to. Once a
//! leader exists it proposes the group's `Init`, marking it as that region's group; until
//! then the group refuses claims.

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::placement::GroupChange;
use idem_core::{Command, Outcome};
use idem_store::NodeInfo;
use openraft::async_runtime::WatchReceiver;
use openraft::error::{InitializeError, RaftError};
use tokio_util::sync::CancellationToken;

use super::group::{Group, GroupKit};
use super::set::GroupSet;
use crate::node::error::NodeError;

/// How often the configuration is looked at besides on every change.
const POLL: Duration = Duration::from_millis(500);

/// Runs until `shutdown`: provisions the region groups the configuration names.
pub async fn run(groups: GroupSet, kit: GroupKit, shutdown: CancellationToken) {
    let mut applied = groups.global().backend().reader().subscribe();
    loop {
        if let Err(error) = provision(&groups, &kit).await {
            tracing::warn!(%error, "provisioning region groups; retrying");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = applied.changed() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// One pass: open, initialize and `Init` what is missing.
async fn provision(groups: &GroupSet, kit: &GroupKit) -> Result<(), NodeError> {
    let config = groups.global().placement().cluster.clone();
    for (region, id) in &config.regions {
        let group = match groups.get(*id) {
            Some(group) => group,
            None => {
                let group = groups.insert(Group::open(kit, *id).await?);
                tracing::info!(group = id, %region, "region group started");
                group
            }
        };
        initialize(groups, &group, region, kit.node_id).await?;
        mark(&group, region, kit.node_id).await;
    }
    Ok(())
}

/// Initializes a new group on the designated node.
async fn initialize(
    groups: &GroupSet,
    group: &Group,
    region: &str,
    node_id: u64,
) -> Result<(), NodeError> {
    let initialized = group
        .raft()
        .is_initialized()
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    if initialized {
        return Ok(());
    }
    let voters = global_voters(groups);
    if designated(&voters, region) != Some(node_id) {
        return Ok(());
    }
    tracing::info!(group = group.id(), %region, voters = ?voters.keys().collect::<Vec<_>>(), "initializing region group");
    match group.raft().initialize(voters).await {
        Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(NodeError::Raft(format!(
            "initializing group {}: {e}",
            group.id()
        ))),
    }
}

/// The voters of the global group with their records.
fn global_voters(groups: &GroupSet) -> BTreeMap<u64, NodeInfo> {
    let global = groups.global();
    let metrics = global.raft().metrics();
    let metrics = metrics.borrow_watched();
    let membership = metrics.membership_config.membership();
    membership
        .voter_ids()
        .filter_map(|id| membership.get_node(&id).map(|n| (id, n.clone())))
        .collect()
}

/// The node that initializes the group of `region`: its lowest-id voter in that region,
/// else the lowest-id voter.
fn designated(voters: &BTreeMap<u64, NodeInfo>, region: &str) -> Option<u64> {
    voters
        .iter()
        .find(|(_, node)| node.region == region)
        .or_else(|| voters.iter().next())
        .map(|(id, _)| *id)
}

/// On the group's leader: proposes `Init` until the group knows its region.
async fn mark(group: &Group, region: &str, node_id: u64) {
    if group.placement().group.is_some() || !leads(group, node_id) {
        return;
    }
    let init = Command::Group(GroupChange::Init {
        region: region.to_owned(),
    });
    match group.backend().propose_here(init).await {
        Ok(Outcome::Placement(_)) => {
            tracing::info!(group = group.id(), %region, "region group ready");
        }
        Ok(other) => tracing::error!(group = group.id(), ?other, "region group Init refused"),
        Err(error) => {
            tracing::warn!(group = group.id(), %error, "region group Init failed; retrying")
        }
    }
}

/// True when this node leads `group`.
pub fn leads(group: &Group, node_id: u64) -> bool {
    group.raft().metrics().borrow_watched().current_leader == Some(node_id)
}
