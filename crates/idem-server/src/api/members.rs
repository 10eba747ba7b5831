//! The membership RPCs of `idem.v1.Admin`: translation between the wire messages and
//! [`MembershipChange`] / [`MembershipView`]. The work happens on the leader, reached
//! through [`crate::backend::Backend::membership`] (forwarded from a follower).
//!
//! A membership change is an openraft membership log entry, which names the members but
//! not who asked. So before making a change, the node commits a `MembershipIntent` (the
//! caller's principal, its `idem-audit-reason`, which change) to the global group; the
//! state machine writes the `membership` audit entry when it applies the membership entry
//! that fulfils the intent, in the same write batch (idem-core's `apply::membership`). A
//! change is thus never applied without its entry; an intent whose change never happens
//! (a failure in between, a no-op call) writes nothing.

use idem_core::audit::{MembershipIntent, MembershipKind};
use idem_core::{Command, Outcome};
use idem_proto::v1 as pb;

use crate::api::attribution::Attribution;
use crate::api::ApiContext;
use crate::backend::{
    MemberInfo, MembershipChange, MembershipView, PlacementAnswer, PlacementCall, RequestError,
};
use crate::config::values::{address, location};

/// `ListMembers`.
pub(crate) async fn list(ctx: &ApiContext) -> Result<pb::ListMembersResponse, RequestError> {
    let view = ctx.backend.membership(MembershipChange::List).await?;
    Ok(pb::ListMembersResponse {
        members: members_pb(&view),
        leader_id: view.leader_id,
        term: view.term,
        commit_index: view.commit_index,
    })
}

/// `AddMember`.
pub(crate) async fn add(
    ctx: &ApiContext,
    req: pb::AddMemberRequest,
    by: Attribution,
) -> Result<pb::AddMemberResponse, RequestError> {
    let member = req
        .member
        .ok_or_else(|| RequestError::argument("member is required"))?;
    let info = new_member(member)?;
    tracing::info!(id = info.id, raft_addr = %info.raft_addr, "adding a learner");
    intend(ctx, MembershipKind::Add, info.id, &by).await?;
    let view = ctx.backend.membership(MembershipChange::Add(info)).await?;
    Ok(pb::AddMemberResponse {
        members: members_pb(&view),
        caught_up: view.caught_up,
    })
}

/// `PromoteMember`.
pub(crate) async fn promote(
    ctx: &ApiContext,
    req: pb::PromoteMemberRequest,
    by: Attribution,
) -> Result<pb::MembersResponse, RequestError> {
    let id = member_id(req.id)?;
    tracing::info!(id, "promoting a learner");
    intend(ctx, MembershipKind::Promote, id, &by).await?;
    let view = ctx
        .backend
        .membership(MembershipChange::Promote(id))
        .await?;
    Ok(pb::MembersResponse {
        members: members_pb(&view),
    })
}

/// `RemoveMember`.
pub(crate) async fn remove(
    ctx: &ApiContext,
    req: pb::RemoveMemberRequest,
    by: Attribution,
) -> Result<pb::MembersResponse, RequestError> {
    let id = member_id(req.id)?;
    tracing::info!(id, "removing a member");
    intend(ctx, MembershipKind::Remove, id, &by).await?;
    let view = ctx.backend.membership(MembershipChange::Remove(id)).await?;
    Ok(pb::MembersResponse {
        members: members_pb(&view),
    })
}

/// `TransferLeader`.
pub(crate) async fn transfer(
    ctx: &ApiContext,
    req: pb::TransferLeaderRequest,
) -> Result<pb::TransferLeaderResponse, RequestError> {
    let to = member_id(req.to)?;
    tracing::info!(to, group = req.group, "transferring leadership");
    if req.group != idem_core::placement::GLOBAL_GROUP {
        let call = PlacementCall::TransferLeader {
            group: req.group,
            to,
        };
        return match ctx.backend.placement(call).await? {
            PlacementAnswer::Group(group) => Ok(pb::TransferLeaderResponse {
                leader_id: group.leader_id.unwrap_or(0),
                term: group.term,
            }),
            PlacementAnswer::Config(_) => Err(RequestError::Internal(
                "transfer: unexpected placement answer".into(),
            )),
        };
    }
    let view = ctx
        .backend
        .membership(MembershipChange::TransferLeader(to))
        .await?;
    Ok(pb::TransferLeaderResponse {
        leader_id: view.leader_id,
        term: view.term,
    })
}

/// Commits who is about to make which membership change, and why (see the module docs).
async fn intend(
    ctx: &ApiContext,
    kind: MembershipKind,
    member: u64,
    by: &Attribution,
) -> Result<(), RequestError> {
    let command = Command::MembershipIntent(by.audited(MembershipIntent { kind, member }));
    match ctx.backend.propose(command).await? {
        Outcome::Placement(_) => Ok(()),
        Outcome::Rejected(rejection) => Err(rejection.into()),
        other => Err(RequestError::Internal(format!(
            "the membership change was not attempted: unexpected outcome {other:?}"
        ))),
    }
}

fn member_id(id: u64) -> Result<u64, RequestError> {
    if id == 0 {
        return Err(RequestError::argument("id: a member id is ≥ 1"));
    }
    Ok(id)
}

/// A validated new member: id, both addresses as `IP:port`, region and zone (defaults
/// `local` / `local-a`), by the rules of a node's own configuration: what is accepted
/// here is written into the membership of every group.
fn new_member(member: pb::Member) -> Result<MemberInfo, RequestError> {
    let id = member_id(member.id)?;
    let checked = |what: &str, text: &str, rule: fn(&str) -> Result<(), String>| {
        rule(text).map_err(|e| RequestError::argument(format!("{what} {}: {e}", quoted(text))))
    };
    checked("raft_addr", &member.raft_addr, |t| address(t).map(drop))?;
    checked("api_addr", &member.api_addr, |t| address(t).map(drop))?;
    let or = |value: String, default: &str| {
        if value.is_empty() {
            default.to_owned()
        } else {
            value
        }
    };
    let region = or(member.region, "local");
    let zone = or(member.zone, "local-a");
    checked("region", &region, |t| location(t).map(drop))?;
    checked("zone", &zone, |t| location(t).map(drop))?;
    Ok(MemberInfo {
        id,
        region,
        zone,
        raft_addr: member.raft_addr,
        api_addr: member.api_addr,
        voter: false,
    })
}

/// `text` quoted for an error message, cut to its first 64 characters: the input may be
/// as long as the request allows.
fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

fn members_pb(view: &MembershipView) -> Vec<pb::Member> {
    view.members
        .iter()
        .map(|m| pb::Member {
            id: m.member.id,
            region: m.member.region.clone(),
            zone: m.member.zone.clone(),
            raft_addr: m.member.raft_addr.clone(),
            api_addr: m.member.api_addr.clone(),
            voter: m.member.voter,
            matched_index: m.matched_index,
            lag: m.lag,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_proto::reason;

    fn member(raft_addr: &str, region: &str, zone: &str) -> pb::Member {
        pb::Member {
            id: 4,
            raft_addr: raft_addr.into(),
            api_addr: "127.0.0.1:7404".into(),
            region: region.into(),
            zone: zone.into(),
            ..Default::default()
        }
    }

    /// The refusal's message, after checking it is an `INVALID_ARGUMENT`.
    fn refused(member: pb::Member) -> String {
        match new_member(member) {
            Err(RequestError::Invalid { reason, message }) => {
                assert_eq!(reason, reason::INVALID_ARGUMENT);
                message
            }
            other => panic!("accepted or refused otherwise: {other:?}"),
        }
    }

    #[test]
    fn a_new_member_is_checked_like_a_nodes_own_configuration() {
        let ok = new_member(member("127.0.0.1:7414", "", "")).unwrap();
        assert_eq!((ok.region.as_str(), ok.zone.as_str()), ("local", "local-a"));
        let ok = new_member(member("[::1]:7414", "eu-west.1", "eu_west-a")).unwrap();
        assert_eq!(ok.region, "eu-west.1");

        assert!(refused(member("node4:7414", "r1", "a")).starts_with("raft_addr \"node4:7414\""));
        assert!(refused(member("127.0.0.1:7414", "r 1", "a")).starts_with("region \"r 1\""));
        assert!(refused(member("127.0.0.1:7414", "r1", "a/b")).starts_with("zone \"a/b\""));
        // An unbounded name never reaches the membership, nor whole into the message.
        let message = refused(member("127.0.0.1:7414", &"r".repeat(100_000), "a"));
        assert!(message.len() < 300, "{message}");
        assert!(message.contains("1 to 64 characters"), "{message}");
    }
}
