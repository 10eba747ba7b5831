//! Regions as the SDK returns them: the cluster configuration (idem-core's own
//! [`ClusterConfig`], with its [`Mode`](idem_core::placement::Mode)) and each Raft group as a
//! node sees it ([`GroupStatus`], with its [`GroupFailover`] state).
//!
//! The wire's "zero or empty means absent" conventions become `Option`s (in
//! [`crate::convert`]): the global group has no region, home or failover state; a leader id
//! of 0 is "no leader known".

use idem_core::placement::{ClusterConfig, GroupId, GLOBAL_GROUP};
use idem_core::Timestamp;

/// A region group's failover state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFailover {
    /// True while the group's leader is outside its home region: HIGH-risk claims and
    /// takeovers get `REGION_FAILOVER`.
    pub active: bool,
    /// Bumped by every failover transition and confirmed re-homing.
    pub epoch: u64,
    /// Active only: when the failover was recorded (replicated time).
    pub since: Option<Timestamp>,
    /// Active only: the leader that recorded it.
    pub leader_id: Option<u64>,
    /// Active only: that leader's region.
    pub leader_region: Option<String>,
}

/// One Raft group as the answering node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStatus {
    /// The group id: [`GLOBAL_GROUP`] (0), or a region group (1, 2, ...).
    pub group: GroupId,
    /// The region the group was created for; `None` for the global group.
    pub region: Option<String>,
    /// Where its leader belongs (the region, or a home confirmed by an operator); `None` for
    /// the global group.
    pub home: Option<String>,
    /// The leader the node knows of.
    pub leader_id: Option<u64>,
    /// That leader's region, when known.
    pub leader_region: Option<String>,
    /// True when the leader is in the home region (always true for the global group).
    pub leader_home: bool,
    /// The group's Raft term.
    pub term: u64,
    /// Its commit index.
    pub commit_index: u64,
    /// Its index applied on the answering node.
    pub applied_index: u64,
    /// Region groups only: the failover state.
    pub failover: Option<GroupFailover>,
    /// Region groups only: the tenants whose keys it decides.
    pub tenants: Vec<String>,
}

impl GroupStatus {
    /// True for the global group.
    pub fn is_global(&self) -> bool {
        self.group == GLOBAL_GROUP
    }

    /// True while the group is in region failover.
    pub fn in_failover(&self) -> bool {
        self.failover.as_ref().is_some_and(|f| f.active)
    }
}

/// Every group as one node sees it (`list_groups`): not linearizable, a node's view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Groups {
    /// The answering node.
    pub node_id: u64,
    /// Its region.
    pub region: String,
    /// The configuration it has applied.
    pub config: ClusterConfig,
    /// The global group first, then region groups by id.
    pub groups: Vec<GroupStatus>,
}

impl Groups {
    /// The group with id `group`.
    pub fn group(&self, group: GroupId) -> Option<&GroupStatus> {
        self.groups.iter().find(|g| g.group == group)
    }
}
