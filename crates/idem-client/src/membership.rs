//! Cluster membership as the SDK returns it: the members with the leader's view of each
//! one's replication ([`MemberProgress`]) and the leader's position ([`Membership`]).
//!
//! Membership calls are answered by the leader (a follower forwards them), so these are
//! the leader's numbers: how far each member has replicated and how far it lags.

use crate::types::Member;

/// One member with the leader's replication view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberProgress {
    /// The member.
    pub member: Member,
    /// Highest log index the leader knows this member has.
    pub matched_index: u64,
    /// The leader's last log index minus `matched_index`.
    pub lag: u64,
}

/// The membership as the leader sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    /// Voters and learners, by id.
    pub members: Vec<MemberProgress>,
    /// The leader that answered (`list_members` only).
    pub leader_id: Option<u64>,
    /// Its term (`list_members` only).
    pub term: u64,
    /// Its commit index (`list_members` only).
    pub commit_index: u64,
    /// `add_member` only: the learner caught up with the leader within the bound.
    pub caught_up: bool,
}
