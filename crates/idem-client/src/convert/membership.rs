//! Members and memberships on the wire.
//!
//! A member id or leader id of 0 on the wire means "none"; the SDK's [`Membership`] says so
//! with an `Option`. The replication numbers (matched index, lag) are the answering leader's.

use idem_proto::v1;

use crate::membership::{MemberProgress, Membership};
use crate::types::Member;

/// A member from the wire (its replication numbers are dropped: see
/// [`member_progress_from_proto`]).
pub(crate) fn member_from_proto(m: v1::Member) -> Member {
    Member {
        id: m.id,
        region: m.region,
        zone: m.zone,
        raft_addr: m.raft_addr,
        api_addr: m.api_addr,
        voter: m.voter,
    }
}

/// The wire form of a member (what `AddMember` sends; `voter` is ignored there).
pub(crate) fn member_to_proto(member: &Member) -> v1::Member {
    v1::Member {
        id: member.id,
        region: member.region.clone(),
        zone: member.zone.clone(),
        raft_addr: member.raft_addr.clone(),
        api_addr: member.api_addr.clone(),
        voter: member.voter,
        ..v1::Member::default()
    }
}

/// A member with the leader's replication view of it.
pub(crate) fn member_progress_from_proto(m: v1::Member) -> MemberProgress {
    MemberProgress {
        matched_index: m.matched_index,
        lag: m.lag,
        member: member_from_proto(m),
    }
}

/// The members of a membership-change answer (`PromoteMember`, `RemoveMember`).
pub(crate) fn members_from_proto(members: Vec<v1::Member>) -> Membership {
    Membership {
        members: members
            .into_iter()
            .map(member_progress_from_proto)
            .collect(),
        ..Membership::default()
    }
}

/// The membership of a `ListMembers` answer, with the answering leader's position.
pub(crate) fn membership_from_proto(r: v1::ListMembersResponse) -> Membership {
    Membership {
        leader_id: (r.leader_id != 0).then_some(r.leader_id),
        term: r.term,
        commit_index: r.commit_index,
        ..members_from_proto(r.members)
    }
}

/// The membership of an `AddMember` answer, with whether the learner caught up.
pub(crate) fn added_membership_from_proto(r: v1::AddMemberResponse) -> Membership {
    Membership {
        caught_up: r.caught_up,
        ..members_from_proto(r.members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(id: u64, voter: bool) -> v1::Member {
        v1::Member {
            id,
            region: "eu-west".into(),
            zone: "a".into(),
            raft_addr: format!("10.0.0.{id}:7401"),
            api_addr: format!("10.0.0.{id}:7400"),
            voter,
            matched_index: 40 + id,
            lag: id,
        }
    }

    #[test]
    fn members_round_trip_without_replication_numbers() {
        let member = member_from_proto(wire(2, true));
        assert_eq!(member.api_addr, "10.0.0.2:7400");
        let back = member_to_proto(&member);
        assert_eq!((back.matched_index, back.lag), (0, 0));
        assert_eq!(
            back,
            v1::Member {
                matched_index: 0,
                lag: 0,
                ..wire(2, true)
            }
        );
    }

    #[test]
    fn memberships_keep_the_leaders_view() {
        let listed = membership_from_proto(v1::ListMembersResponse {
            members: vec![wire(1, true), wire(3, false)],
            leader_id: 1,
            term: 7,
            commit_index: 41,
        });
        assert_eq!(
            (listed.leader_id, listed.term, listed.commit_index),
            (Some(1), 7, 41)
        );
        assert!(!listed.caught_up);
        let learner = &listed.members[1];
        assert_eq!((learner.matched_index, learner.lag), (43, 3));
        assert!(!learner.member.voter);

        let leaderless = membership_from_proto(v1::ListMembersResponse::default());
        assert_eq!(leaderless.leader_id, None);

        let added = added_membership_from_proto(v1::AddMemberResponse {
            members: vec![wire(4, false)],
            caught_up: true,
        });
        assert!(added.caught_up);
        assert_eq!((added.leader_id, added.term), (None, 0));
        assert_eq!(added.members[0].member.id, 4);

        let changed = members_from_proto(vec![wire(1, true)]);
        assert_eq!(changed.members.len(), 1);
        assert_eq!(changed.leader_id, None);
    }
}
