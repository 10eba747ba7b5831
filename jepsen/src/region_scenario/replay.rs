//! Step 2: retries of completed keys answered by a replica in another region.
//!
//! The keys step 1 completed for the bound tenant are terminal, hence immutable: any node
//! that has applied them may answer a retry from its own replica. A client in another
//! region retries each of them through a node of its own region, once that node's replica
//! of the tenant's group has caught up with the leader's commit index; then it claims as
//! many *new* keys through the same node, which must go to the group's leader in the home
//! region (one inter-region round trip, plus replication). `idem_local_replays_total` on
//! that node, read before and after the retries, shows that every retry took the local path.

use std::time::Duration;

use idem_core::placement::GroupId;
use idem_core::{ClaimKind, RecordKey, Risk};
use serde::Serialize;

use super::context::Context;
use super::error::ScenarioError;
use super::observer::wait_for;
use super::report::Report;
use super::summary::{Saving, Summary};

/// The node metric counting claims answered from the node's replica.
const LOCAL_REPLAYS: &str = "idem_local_replays_total";
/// Unmeasured retries first (they open the client's connection).
const WARMUP: usize = 3;

/// The figures of step 2.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayFigures {
    /// The node retries went to.
    pub node: usize,
    /// Its region.
    pub region: String,
    /// The tenant's home region, where its group's leader is.
    pub home_region: String,
    /// RTT between the two, in ms.
    pub rtt_to_home_ms: f64,
    /// Latency of retries of completed keys.
    pub replays: Summary,
    /// How many of them answered COMPLETED.
    pub replays_completed: usize,
    /// The node's `idem_local_replays_total` before the measured retries.
    pub local_replays_before: f64,
    /// And after.
    pub local_replays_after: f64,
    /// Latency of first claims of new keys through the same node.
    pub first_claims: Summary,
    /// How many of them answered ACQUIRED.
    pub first_claims_acquired: usize,
    /// What a local replay saves against a first claim.
    pub saving: Saving,
}

/// Runs step 2 over `completed` (keys of the bound tenant, in `group`).
pub async fn run(
    ctx: &Context,
    group: GroupId,
    completed: &[RecordKey],
    report: &mut Report,
) -> Result<ReplayFigures, ScenarioError> {
    let roles = &ctx.roles;
    let node = roles.replica_node;
    let client = ctx.client(node)?;
    wait_for(
        "the replica caught up with the group's commit index",
        Duration::from_secs(30),
        || caught_up(ctx, node, group),
    )
    .await?;
    eprintln!(
        "replay: {} retries through n{node} ({}), tenant homed in {}",
        completed.len(),
        roles.replica_region,
        roles.home_region
    );
    for key in completed.iter().take(WARMUP) {
        let _ = client.claim(key, Risk::Normal).await;
    }
    let before = ctx.observer.metric(node, LOCAL_REPLAYS).await?;
    let (mut replays, mut replays_completed) = (Vec::new(), 0);
    for key in completed {
        let (latency, answer) = client.claim(key, Risk::Normal).await;
        replays.push(latency);
        if answer.is_ok_and(|c| c.kind == ClaimKind::Completed) {
            replays_completed += 1;
        }
    }
    let after = ctx.observer.metric(node, LOCAL_REPLAYS).await?;

    let (mut firsts, mut acquired) = (Vec::new(), 0);
    for key in ctx.keys(&roles.bound_tenant, "replay-first", completed.len())? {
        let (latency, answer) = client.claim(&key, Risk::Normal).await;
        firsts.push(latency);
        if let Ok(claim) = answer {
            if let (ClaimKind::Acquired, Some(fence)) = (claim.kind, claim.fence) {
                acquired += 1;
                let _ = client.complete(&key, fence).await;
            }
        }
    }
    let replays = Summary::of(&replays);
    let first_claims = Summary::of(&firsts);
    let figures = ReplayFigures {
        node,
        region: roles.replica_region.clone(),
        home_region: roles.home_region.clone(),
        rtt_to_home_ms: ctx.rtt_ms(roles.replica, roles.home),
        saving: replays.saving_against(&first_claims),
        replays,
        replays_completed,
        local_replays_before: before,
        local_replays_after: after,
        first_claims,
        first_claims_acquired: acquired,
    };
    add_checks(&figures, completed.len(), report);
    Ok(figures)
}

/// `Ok` once `node` has applied `group` up to the commit index its leader reports.
async fn caught_up(ctx: &Context, node: usize, group: GroupId) -> Result<(), String> {
    let mine = ctx.observer.group_of(node, group).await?;
    let leader = mine.leader_id.ok_or("no leader known")? as usize;
    let commit = ctx.observer.group_of(leader, group).await?.commit_index;
    if mine.applied_index >= commit {
        Ok(())
    } else {
        Err(format!(
            "n{node} applied {} of the leader's {commit}",
            mine.applied_index
        ))
    }
}

fn add_checks(f: &ReplayFigures, retries: usize, report: &mut Report) {
    report.check(
        "replay",
        "every retry of a completed key answered COMPLETED",
        retries > 0 && f.replays_completed == retries,
        format!(
            "{} of {retries} through n{} ({})",
            f.replays_completed, f.node, f.region
        ),
    );
    let counted = f.local_replays_after - f.local_replays_before;
    report.check(
        "replay",
        "every retry was answered from the local replica (idem_local_replays_total)",
        counted == retries as f64,
        format!(
            "n{}: {} -> {} (+{counted} for {retries} retries)",
            f.node, f.local_replays_before, f.local_replays_after
        ),
    );
    report.check(
        "replay",
        "a local replay takes no inter-region round trip (p90 below half the RTT to the home region)",
        f.replays.p90_ms < f.rtt_to_home_ms / 2.0,
        format!(
            "replay p90 {} ms; RTT {} to {} = {} ms",
            f.replays.p90_ms, f.region, f.home_region, f.rtt_to_home_ms
        ),
    );
    report.check(
        "replay",
        "a first claim through the same node goes to the leader (median at least one RTT)",
        f.first_claims_acquired == retries && f.first_claims.median_ms >= f.rtt_to_home_ms,
        format!(
            "{} of {retries} acquired; median {} ms against {} ms for a replay",
            f.first_claims_acquired, f.first_claims.median_ms, f.replays.median_ms
        ),
    );
}
