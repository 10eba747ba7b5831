//! Membership changes on the leader, and the leader's view of each member's replication.
//!
//! openraft changes the membership through the log (joint consensus for voter changes).
//! idem adds the operator's safety rules around it: a node joins as a learner and is
//! promoted only by an explicit call (so a node that never caught up does not count
//! towards the quorum), the last voter is never removed, and every step is bounded by
//! the write timeout — a change that did not confirm in time is reported as
//! `UNAVAILABLE_OUTCOME_UNKNOWN` (it may still commit), like any write.
//!
//! A voter change is also refused (`QUORUM_AT_RISK`) unless a majority of the voters
//! before it and a majority of the voters after it answer the leader now (etcd's strict
//! reconfiguration check). Joint consensus commits a change only with both majorities,
//! and while it waits no other membership change can start: removing a healthy voter of
//! three while another is down would leave a joint configuration that can never commit,
//! and the removal of the dead voter, the one change that would repair it, would wait
//! behind it forever (found by the jepsen matrix: membership and bitflip together).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use idem_proto::reason;
use idem_store::{NodeInfo, TypeConfig};
use openraft::async_runtime::WatchReceiver;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::Instant as _;
use openraft::{ChangeMembers, RaftMetrics};
use tokio::time::Instant;

use crate::backend::{MemberInfo, MemberView, MembershipChange, MembershipView, RequestError};
use crate::replica::Raft;

/// How often bounded waits look at the metrics again.
const POLL: Duration = Duration::from_millis(20);
/// A member whose last acknowledgement of the leader's heartbeats or appends is older than
/// this does not answer it (several heartbeat intervals, at the LAN and cross-region
/// presets alike).
pub const ACK_FRESH: Duration = Duration::from_secs(1);

/// Runs `change` on this node, which must be the leader (else `NOT_LEADER`), by `deadline`.
pub async fn run(
    raft: &Raft,
    node_id: u64,
    change: MembershipChange,
    deadline: Instant,
) -> Result<MembershipView, RequestError> {
    let metrics = raft.metrics().borrow_watched().clone();
    if metrics.current_leader != Some(node_id) {
        return Err(RequestError::NotLeader {
            leader_id: metrics.current_leader,
            leader_addr: None,
        });
    }
    match change {
        MembershipChange::List => Ok(view(&metrics)),
        MembershipChange::Add(member) => add(raft, &metrics, member, deadline).await,
        MembershipChange::Promote(id) => {
            if !member(&metrics, id)?.1 {
                let promoted = |mut voters: BTreeSet<u64>| {
                    voters.insert(id);
                    voters
                };
                quorum_answers(raft, promoted, deadline).await?;
                let voters = || ChangeMembers::AddVoterIds(BTreeSet::from([id]));
                bounded(deadline, || raft.change_membership(voters(), false)).await?;
            }
            Ok(view(&raft.metrics().borrow_watched()))
        }
        MembershipChange::Remove(id) => remove(raft, &metrics, id, deadline).await,
        MembershipChange::TransferLeader(to) => {
            transfer(raft, &metrics, node_id, to, deadline).await
        }
    }
}

async fn add(
    raft: &Raft,
    metrics: &RaftMetrics<TypeConfig>,
    member: MemberInfo,
    deadline: Instant,
) -> Result<MembershipView, RequestError> {
    let existing = metrics
        .membership_config
        .membership()
        .get_node(&member.id)
        .cloned();
    match existing {
        Some(node) if node.raft_addr == member.raft_addr && node.api_addr == member.api_addr => {}
        Some(node) => {
            return Err(RequestError::refused(
                reason::WRONG_STATE,
                format!(
                    "member {} exists with raft_addr {} and api_addr {}; remove it first to change its addresses",
                    member.id, node.raft_addr, node.api_addr
                ),
            ))
        }
        None => {
            let info = NodeInfo {
                region: member.region,
                zone: member.zone,
                raft_addr: member.raft_addr,
                api_addr: member.api_addr,
            };
            bounded(deadline, || raft.add_learner(member.id, info.clone(), false)).await?;
        }
    }
    // Caught up: the learner has everything the leader had once it was added.
    let target = raft.metrics().borrow_watched().last_log_index.unwrap_or(0);
    let mut metrics = raft.metrics();
    let caught_up = loop {
        let matched = matched(&metrics.borrow_watched(), member.id);
        if matched >= target {
            break true;
        }
        if Instant::now() + POLL >= deadline {
            break false;
        }
        let _ = tokio::time::timeout(POLL, metrics.changed()).await;
    };
    let mut view = view(&raft.metrics().borrow_watched());
    view.caught_up = caught_up;
    Ok(view)
}

async fn remove(
    raft: &Raft,
    metrics: &RaftMetrics<TypeConfig>,
    id: u64,
    deadline: Instant,
) -> Result<MembershipView, RequestError> {
    let (_, voter) = member(metrics, id)?;
    let change = if voter {
        let removed = |mut voters: BTreeSet<u64>| {
            voters.remove(&id);
            voters
        };
        if removed(voters(metrics)).is_empty() {
            return Err(RequestError::refused(
                reason::WRONG_STATE,
                format!("member {id} is the last voter; a cluster needs at least one"),
            ));
        }
        quorum_answers(raft, removed, deadline).await?;
        ChangeMembers::RemoveVoters(BTreeSet::from([id]))
    } else {
        ChangeMembers::RemoveNodes(BTreeSet::from([id]))
    };
    bounded(deadline, || raft.change_membership(change.clone(), false)).await?;
    Ok(view(&raft.metrics().borrow_watched()))
}

async fn transfer(
    raft: &Raft,
    metrics: &RaftMetrics<TypeConfig>,
    node_id: u64,
    to: u64,
    deadline: Instant,
) -> Result<MembershipView, RequestError> {
    if !member(metrics, to)?.1 {
        return Err(RequestError::refused(
            reason::WRONG_STATE,
            format!("member {to} is a learner; only a voter can lead (promote it first)"),
        ));
    }
    if to != node_id {
        raft.trigger()
            .transfer_leader(to)
            .await
            .map_err(|e| RequestError::Internal(format!("raft stopped: {e}")))?;
    }
    let mut watch = raft.metrics();
    loop {
        let now = watch.borrow_watched().clone();
        if now.current_leader == Some(to) {
            return Ok(view(&now));
        }
        if Instant::now() + POLL >= deadline {
            return Err(RequestError::OutcomeUnknown(format!(
                "leadership did not move to {to} in time (leader now {:?}); check `idemctl cluster status`",
                now.current_leader
            )));
        }
        let _ = tokio::time::timeout(POLL, watch.changed()).await;
    }
}

/// The voters of the membership in `metrics`.
fn voters(metrics: &RaftMetrics<TypeConfig>) -> BTreeSet<u64> {
    metrics.membership_config.membership().voter_ids().collect()
}

/// Whether the leader whose metrics these are heard from `id` within [`ACK_FRESH`] (the
/// leader itself always answers).
pub fn answers(metrics: &RaftMetrics<TypeConfig>, id: u64) -> bool {
    id == metrics.id
        || metrics
            .heartbeat
            .as_ref()
            .and_then(|h| h.get(&id).cloned().flatten())
            .is_some_and(|at| at.elapsed() < ACK_FRESH)
}

/// Waits until a majority of the voters now and a majority of the voters after the change
/// (`after` of the voters now: the membership may move while this waits) answer this
/// leader; refuses the change with `QUORUM_AT_RISK` if they do not within [`ACK_FRESH`] (a
/// leader elected a moment ago has not heard from everyone yet), or by `deadline`.
async fn quorum_answers(
    raft: &Raft,
    after: impl Fn(BTreeSet<u64>) -> BTreeSet<u64>,
    deadline: Instant,
) -> Result<(), RequestError> {
    let give_up = deadline.min(Instant::now() + ACK_FRESH);
    let mut watch = raft.metrics();
    loop {
        let metrics = watch.borrow_watched().clone();
        let Some(set) = short_of_majority(&metrics, &after)? else {
            return Ok(());
        };
        if Instant::now() + POLL >= give_up {
            let silent: BTreeSet<u64> = set
                .iter()
                .copied()
                .filter(|&id| !answers(&metrics, id))
                .collect();
            return Err(RequestError::refused(
                reason::QUORUM_AT_RISK,
                format!(
                    "voters {set:?} would have to agree, and {silent:?} of them do not answer the leader: the change could not commit, and no other membership change could run while it waits; nothing changed (bring those voters back, or remove a voter that is down first)"
                ),
            ));
        }
        let _ = tokio::time::timeout(POLL, watch.changed()).await;
    }
}

/// One look at the leader's metrics: the voter set (after the change, or now) that lacks an
/// answering majority, `None` when both have one, or `NOT_LEADER` once this node was
/// deposed (its heartbeat view is gone, and the caller's answer is the new leader's).
fn short_of_majority(
    metrics: &RaftMetrics<TypeConfig>,
    after: &impl Fn(BTreeSet<u64>) -> BTreeSet<u64>,
) -> Result<Option<BTreeSet<u64>>, RequestError> {
    if metrics.current_leader != Some(metrics.id) {
        return Err(RequestError::NotLeader {
            leader_id: metrics.current_leader,
            leader_addr: None,
        });
    }
    let now = voters(metrics);
    Ok([after(now.clone()), now]
        .into_iter()
        .find(|set| !majority_answers(metrics, set)))
}

/// Whether more than half of `set` answers the leader.
fn majority_answers(metrics: &RaftMetrics<TypeConfig>, set: &BTreeSet<u64>) -> bool {
    let answering = set.iter().filter(|&&id| answers(metrics, id)).count();
    answering * 2 > set.len()
}

/// `(info, voter)` of member `id`, or `NOT_FOUND`.
fn member(metrics: &RaftMetrics<TypeConfig>, id: u64) -> Result<(NodeInfo, bool), RequestError> {
    let membership = metrics.membership_config.membership();
    let node = membership.get_node(&id).cloned().ok_or_else(|| {
        RequestError::refused(reason::NOT_FOUND, format!("no member with id {id}"))
    })?;
    let voter = membership.voter_ids().any(|v| v == id);
    Ok((node, voter))
}

/// The highest log index the leader knows `id` has.
fn matched(metrics: &RaftMetrics<TypeConfig>, id: u64) -> u64 {
    if id == metrics.id {
        return metrics.last_log_index.unwrap_or(0);
    }
    metrics
        .replication
        .as_ref()
        .and_then(|r| r.get(&id).cloned().flatten())
        .map_or(0, |log_id| log_id.index())
}

/// The membership with the replication view, from the leader's metrics.
pub fn view(metrics: &RaftMetrics<TypeConfig>) -> MembershipView {
    let membership = metrics.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let last = metrics.last_log_index.unwrap_or(0);
    let nodes: BTreeMap<u64, NodeInfo> =
        membership.nodes().map(|(id, n)| (*id, n.clone())).collect();
    let members = nodes
        .into_iter()
        .map(|(id, node)| {
            let matched_index = matched(metrics, id);
            MemberView {
                member: MemberInfo {
                    id,
                    region: node.region,
                    zone: node.zone,
                    raft_addr: node.raft_addr,
                    api_addr: node.api_addr,
                    voter: voters.contains(&id),
                },
                matched_index,
                lag: last.saturating_sub(matched_index),
            }
        })
        .collect();
    MembershipView {
        members,
        leader_id: metrics.current_leader.unwrap_or(0),
        term: metrics.current_term,
        commit_index: metrics
            .cluster_committed
            .as_ref()
            .map_or(0, |id| id.index()),
        caught_up: false,
    }
}

/// Runs a membership write by `deadline`; a timeout is an unknown outcome. A change
/// refused because the previous one is not committed yet (just after an election or
/// another change) is retried until the deadline.
async fn bounded<T, F, Fut>(deadline: Instant, write: F) -> Result<T, RequestError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<
        Output = Result<T, RaftError<TypeConfig, ClientWriteError<TypeConfig>>>,
    >,
{
    loop {
        let error = match tokio::time::timeout_at(deadline, write()).await {
            Err(_elapsed) => return Err(RequestError::OutcomeUnknown(
                "the membership change was not confirmed in time; it may still take effect; check `idemctl member list`".into(),
            )),
            Ok(Ok(done)) => return Ok(done),
            Ok(Err(error)) => error,
        };
        let in_progress = matches!(
            &error,
            RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_)
            ))
        );
        if !(in_progress && Instant::now() + POLL < deadline) {
            return Err(write_error(error));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn write_error(error: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> RequestError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
            RequestError::NotLeader {
                leader_id: forward.leader_id,
                leader_addr: forward.leader_node.map(|n| n.api_addr),
            }
        }
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => {
            RequestError::OutcomeUnknown(
                "leadership changed during the membership change; it may have taken effect".into(),
            )
        }
        RaftError::APIError(other) => RequestError::refused(reason::WRONG_STATE, other.to_string()),
        RaftError::Fatal(fatal) => RequestError::Internal(format!("raft stopped: {fatal}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use idem_store::StoredMembership;
    use openraft::alias::InstantOf;
    use openraft::metrics::SerdeInstant;
    use openraft::Membership;

    use super::*;

    /// The metrics of node 1 among voters 1, 2 and 3, led by `leader`, where the voters in
    /// `fresh` acknowledged a moment ago and the others two windows ago.
    fn metrics(leader: u64, fresh: &[u64]) -> RaftMetrics<TypeConfig> {
        let mut metrics = RaftMetrics::new_initial(1);
        metrics.current_leader = Some(leader);
        let voters = BTreeSet::from([1, 2, 3]);
        let membership = Membership::new_with_defaults(vec![voters], []);
        metrics.membership_config = Arc::new(StoredMembership::new(None, membership));
        let now = InstantOf::<TypeConfig>::now();
        let stale = now - ACK_FRESH * 2;
        let acked = |id| {
            Some(SerdeInstant::new(if fresh.contains(&id) {
                now
            } else {
                stale
            }))
        };
        metrics.heartbeat = Some([2, 3].into_iter().map(|id| (id, acked(id))).collect());
        metrics
    }

    fn without(id: u64) -> impl Fn(BTreeSet<u64>) -> BTreeSet<u64> {
        move |mut voters| {
            voters.remove(&id);
            voters
        }
    }

    #[test]
    fn a_change_both_majorities_answer_is_let_through() {
        let all = metrics(1, &[2, 3]);
        assert_eq!(short_of_majority(&all, &without(2)).unwrap(), None);
        // With 3 silent, removing 3 leaves {1, 2}, both answering.
        let two = metrics(1, &[2]);
        assert_eq!(short_of_majority(&two, &without(3)).unwrap(), None);
    }

    #[test]
    fn a_change_whose_new_majority_is_silent_is_held() {
        // 3 is silent: removing the healthy 2 leaves {1, 3}, whose majority needs 3.
        let two = metrics(1, &[2]);
        assert_eq!(
            short_of_majority(&two, &without(2)).unwrap(),
            Some(BTreeSet::from([1, 3]))
        );
        // Nobody but the leader answers: the voters now lack a majority too.
        let alone = metrics(1, &[]);
        assert_eq!(
            short_of_majority(&alone, &|voters| voters).unwrap(),
            Some(BTreeSet::from([1, 2, 3]))
        );
    }

    #[test]
    fn a_deposed_leader_answers_not_leader_with_the_new_one() {
        let deposed = metrics(2, &[2, 3]);
        match short_of_majority(&deposed, &without(3)) {
            Err(RequestError::NotLeader { leader_id, .. }) => assert_eq!(leader_id, Some(2)),
            other => panic!("expected NOT_LEADER, got {other:?}"),
        }
    }
}
