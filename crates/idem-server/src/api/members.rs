//! The membership RPCs of `idem.v1.Admin`: translation between the wire messages and
//! [`MembershipChange`] / [`MembershipView`]. The work happens on the leader, reached
//! through [`crate::backend::Backend::membership`] (forwarded from a follower).
//!
//! A membership change is an openraft membership log entry, which never reaches the state
//! machine, so it cannot carry its audit entry. Once it is committed, the node that made
//! it proposes `NoteMembership` (who, why, the resulting voters and learners) to the
//! global group. The two are not atomic: a node that fails between them leaves a change
//! without its entry. The call then fails rather than answer success without one, and
//! repeating it (a no-op for the membership) writes the entry.

use std::net::SocketAddr;

use idem_core::audit::{MembershipKind, MembershipNote};
use idem_core::{Command, Outcome};
use idem_proto::v1 as pb;

use crate::api::attribution::Attribution;
use crate::api::ApiContext;
use crate::backend::{
    MemberInfo, MembershipChange, MembershipView, PlacementAnswer, PlacementCall, RequestError,
};

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
    let id = info.id;
    let view = ctx.backend.membership(MembershipChange::Add(info)).await?;
    note(ctx, MembershipKind::Add, id, &view, by).await?;
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
    let view = ctx
        .backend
        .membership(MembershipChange::Promote(id))
        .await?;
    note(ctx, MembershipKind::Promote, id, &view, by).await?;
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
    let view = ctx.backend.membership(MembershipChange::Remove(id)).await?;
    note(ctx, MembershipKind::Remove, id, &view, by).await?;
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

/// Writes the audit entry of a committed membership change (see the module docs).
async fn note(
    ctx: &ApiContext,
    kind: MembershipKind,
    member: u64,
    view: &MembershipView,
    by: Attribution,
) -> Result<(), RequestError> {
    let ids = |voter: bool| {
        view.members
            .iter()
            .filter(|m| m.member.voter == voter)
            .map(|m| m.member.id)
            .collect()
    };
    let note = MembershipNote {
        kind,
        member,
        voters: ids(true),
        learners: ids(false),
    };
    let command = Command::NoteMembership(by.audited(note));
    match ctx.backend.propose(command).await {
        Ok(Outcome::Audited { .. }) => Ok(()),
        Ok(Outcome::Rejected(rejection)) => Err(unaudited(rejection.to_string())),
        Ok(other) => Err(unaudited(format!("unexpected outcome {other:?}"))),
        Err(error) => Err(unaudited(error.to_string())),
    }
}

fn unaudited(why: String) -> RequestError {
    tracing::error!(%why, "a membership change was committed without its audit entry");
    RequestError::Internal(format!(
        "the membership change was committed, but its audit entry was not written ({why}); \
         repeat the call to write it"
    ))
}

fn member_id(id: u64) -> Result<u64, RequestError> {
    if id == 0 {
        return Err(RequestError::argument("id: a member id is ≥ 1"));
    }
    Ok(id)
}

/// A validated new member: id, both addresses as `IP:port`, region and zone (defaults
/// `local` / `local-a`, like a node's configuration).
fn new_member(member: pb::Member) -> Result<MemberInfo, RequestError> {
    let id = member_id(member.id)?;
    for (what, addr) in [
        ("raft_addr", &member.raft_addr),
        ("api_addr", &member.api_addr),
    ] {
        if addr.parse::<SocketAddr>().is_err() {
            return Err(RequestError::argument(format!(
                "{what} {addr:?}: expected an IP address and port such as 127.0.0.1:7410"
            )));
        }
    }
    let or = |value: String, default: &str| {
        if value.is_empty() {
            default.to_owned()
        } else {
            value
        }
    };
    Ok(MemberInfo {
        id,
        region: or(member.region, "local"),
        zone: or(member.zone, "local-a"),
        raft_addr: member.raft_addr,
        api_addr: member.api_addr,
        voter: false,
    })
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
