//! Cluster membership as the SDK returns it: the members with the leader's view of each
//! one's replication ([`MemberProgress`]) and the leader's position ([`Membership`]).
//!
//! Membership calls are answered by the leader (a follower forwards them), so these are
//! the leader's numbers: how far each member has replicated and how far it lags.

use idem_proto::v1;

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

impl MemberProgress {
    /// From the wire form.
    pub(crate) fn from_proto(m: v1::Member) -> Self {
        MemberProgress {
            matched_index: m.matched_index,
            lag: m.lag,
            member: Member::from(m),
        }
    }
}

impl Membership {
    /// The members of a membership-change answer.
    pub(crate) fn of(members: Vec<v1::Member>) -> Self {
        Membership {
            members: members
                .into_iter()
                .map(MemberProgress::from_proto)
                .collect(),
            ..Membership::default()
        }
    }
}

impl From<v1::ListMembersResponse> for Membership {
    fn from(r: v1::ListMembersResponse) -> Self {
        Membership {
            leader_id: (r.leader_id != 0).then_some(r.leader_id),
            term: r.term,
            commit_index: r.commit_index,
            ..Membership::of(r.members)
        }
    }
}

impl From<v1::AddMemberResponse> for Membership {
    fn from(r: v1::AddMemberResponse) -> Self {
        Membership {
            caught_up: r.caught_up,
            ..Membership::of(r.members)
        }
    }
}
