//! Membership changes as the API asks for them and the leader answers them.
//!
//! These types cross the node-internal `Forward.Membership` RPC (bincode), because a
//! follower hands every membership call to the leader, which alone can change the
//! membership and knows how far each member has replicated.

use serde::{Deserialize, Serialize};

use super::MemberInfo;

/// A membership call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipChange {
    /// No change: the members with the leader's replication view.
    List,
    /// Add a learner and wait, bounded, until it caught up.
    Add(MemberInfo),
    /// Turn a learner into a voter.
    Promote(u64),
    /// Remove a voter or learner (never the last voter).
    Remove(u64),
    /// Hand leadership to a voter.
    TransferLeader(u64),
}

impl MembershipChange {
    /// True for [`MembershipChange::List`], which changes nothing and may be retried freely.
    pub fn is_read(&self) -> bool {
        matches!(self, MembershipChange::List)
    }
}

/// One member with the leader's view of its replication.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// The member.
    pub member: MemberInfo,
    /// Highest log index the leader knows this member has (the leader's last log index for
    /// itself, 0 when unknown).
    pub matched_index: u64,
    /// The leader's last log index minus `matched_index`.
    pub lag: u64,
}

/// The membership as the leader sees it, after a call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipView {
    /// Voters and learners, by id.
    pub members: Vec<MemberView>,
    /// The leader that answered (after a transfer: the new leader, when known).
    pub leader_id: u64,
    /// Its term.
    pub term: u64,
    /// Its commit index.
    pub commit_index: u64,
    /// `Add` only: the learner caught up within the bound.
    pub caught_up: bool,
}
