//! A region group's placement state at one moment, as one node saw it: the part of
//! `ListGroups` the isolation step reasons about.

use idem_client::GroupStatus;
use serde::Serialize;

/// Where a group's leader is and whether the group is in failover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupView {
    /// The node that answered.
    pub seen_by: usize,
    /// The leader it knows of.
    pub leader: Option<u64>,
    /// That leader's region.
    pub leader_region: Option<String>,
    /// True when the leader is in the group's home region.
    pub leader_home: bool,
    /// True while the group is in failover.
    pub failover: bool,
    /// The failover epoch (bumped when a failover starts and when it ends).
    pub epoch: u64,
}

impl GroupView {
    /// The view of `status`, answered by node `seen_by`.
    pub fn of(seen_by: usize, status: &GroupStatus) -> GroupView {
        GroupView {
            seen_by,
            leader: status.leader_id,
            leader_region: status.leader_region.clone(),
            leader_home: status.leader_home,
            failover: status.in_failover(),
            epoch: status.failover.as_ref().map_or(0, |f| f.epoch),
        }
    }

    /// Led from its home region, not in failover.
    pub fn at_home(&self) -> bool {
        self.leader.is_some() && self.leader_home && !self.failover
    }

    /// Led from outside its home region, in failover.
    pub fn failed_over(&self) -> bool {
        self.leader.is_some() && !self.leader_home && self.failover
    }

    /// One line for reports: `leader n4 (r1), failover active, epoch 2`.
    pub fn describe(&self) -> String {
        let leader = self
            .leader
            .map_or("no leader".to_owned(), |l| format!("leader n{l}"));
        let region = self.leader_region.as_deref().unwrap_or("?");
        let state = if self.failover {
            "failover active"
        } else {
            "no failover"
        };
        format!("{leader} ({region}), {state}, epoch {}", self.epoch)
    }
}
