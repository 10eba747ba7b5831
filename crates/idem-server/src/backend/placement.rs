//! Placement calls (regions, tenant homes, failover) as the admin API asks for them.
//!
//! A binding touches up to three groups (release from the old region group, bind in the
//! global group, admit in the new one), so these calls are orchestrated by the node's
//! router ([`crate::groups::Router`]) rather than being single proposals.

use idem_core::command::Audited;
use idem_core::placement::{ClusterChange, ClusterConfig, Failover, GroupId};

/// A placement call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementCall {
    /// The configuration, linearizable.
    Config,
    /// A change of the configuration (mode, region, tenant home), audited.
    Change(Audited<ClusterChange>),
    /// Declare a new home for a region group in failover.
    ConfirmFailover {
        /// The region group.
        group: GroupId,
        /// Its new home region.
        new_home: String,
        /// Why (audited).
        reason: String,
        /// Who (audited).
        admin: String,
    },
    /// Hand a group's leadership to a voter.
    TransferLeader {
        /// The group.
        group: GroupId,
        /// The voter.
        to: u64,
    },
}

/// The answer to a placement call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementAnswer {
    /// The configuration after the call.
    Config(ClusterConfig),
    /// The group after the call.
    Group(GroupView),
}

/// One Raft group as this node sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupView {
    /// The group id (0: global).
    pub group: GroupId,
    /// The region it was created for (empty for the global group).
    pub region: String,
    /// Where its leader belongs (empty for the global group).
    pub home: String,
    /// The leader this node knows of.
    pub leader_id: Option<u64>,
    /// The leader's region (empty when unknown).
    pub leader_region: String,
    /// The leader is in the home region (always true for the global group).
    pub leader_home: bool,
    /// Raft term.
    pub term: u64,
    /// Commit index.
    pub commit_index: u64,
    /// Applied here.
    pub applied_index: u64,
    /// Failover epoch (region groups).
    pub epoch: u64,
    /// The failover in progress (region groups).
    pub failover: Option<Failover>,
    /// Tenants the group decides (region groups).
    pub tenants: Vec<String>,
}
