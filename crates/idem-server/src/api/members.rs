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

use std::net::SocketAddr;

use idem_core::audit::{MembershipIntent, MembershipKind};
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
