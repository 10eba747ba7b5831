//! Step 4: the bound tenant's home region cut off from the other regions, then healed.
//!
//! The home region's nodes are partitioned from the rest with the harness's own partition
//! machinery (the `region` shape of [`crate::nemesis::partition`], iptables inside the node
//! namespaces; clients on the hub still reach every node). Then, watching from a node of
//! the majority side:
//!
//! - the group's leader moves out of its home and the failover is logged (time measured
//!   from the cut);
//! - HIGH-risk claims of new keys are refused with `REGION_FAILOVER` and a retry-after,
//!   and create nothing (a read finds no record);
//! - NORMAL claims are acquired and completed through the new leader, replays go on;
//! - keys that a client *in the cut-off region* claims (HIGH risk, through a node there,
//!   concurrently) are acquired by the majority side, never by the cut-off one: the
//!   cut-off leader cannot commit.
//!
//! After the heal, leadership returns home and the failover ends with a new epoch (time
//! measured from the heal), the refused HIGH-risk keys are acquired, and every key of this
//! step is claimed again from every region: each replays the one completion. The observer's
//! per-group gauges (`idem_group_failover`, `_seconds`, `idem_group_leader_home`) are read
//! at the end of the failover and once home again, so an operator's view is checked too. That no key
//! was ever acquired twice is judged over the whole history at the end of the run.
//!
//! The partition is healed whatever happens in between.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::placement::GroupId;
use idem_core::{ClaimKind, RecordKey, Risk};
use serde::Serialize;
use tokio::task::JoinSet;

use super::call_error::CallError;
use super::context::Context;
use super::error::ScenarioError;
use super::group_view::GroupView;
use super::node_client::{Claimed, NodeClient};
use super::observer::wait_for;
use super::report::Report;
use super::summary::round;
use crate::cluster::Cluster;
use crate::nemesis::partition;

/// Keys of each kind claimed during the isolation.
const KEYS: usize = 10;
/// Bound on the election and the failover entry after the cut.
const FAILOVER_WITHIN: Duration = Duration::from_secs(30);
/// Bound on the return home after the heal (reconnection, catch-up, 2 s of health, transfer).
const HOME_WITHIN: Duration = Duration::from_secs(60);

/// The figures of step 4.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IsolationFigures {
    /// The region cut off.
    pub region: String,
    /// Its nodes.
    pub cut_off: Vec<usize>,
    /// Who dropped whom.
    pub partition: String,
    /// The bound tenant's group.
    pub group: GroupId,
    /// The majority-side node whose view is reported.
    pub observer: usize,
    /// Before the cut.
    pub before: Option<GroupView>,
    /// Once the failover was seen.
    pub during: Option<GroupView>,
    /// Once leadership was home again.
    pub after: Option<GroupView>,
    /// From the cut until a majority node saw the failover, in ms.
    pub failover_detected_ms: Option<f64>,
    /// From the heal until a majority node saw the leader home and the failover ended, in ms.
    pub home_after_heal_ms: Option<f64>,
    /// HIGH-risk claims of new keys during the failover.
    pub high_claims: usize,
    /// Refused with REGION_FAILOVER.
    pub high_refused: usize,
    /// ... carrying a retry-after.
    pub high_with_retry_after: usize,
    /// Keys of refused claims read back without a record.
    pub high_left_nothing: usize,
    /// NORMAL claims of new keys during the failover.
    pub normal_claims: usize,
    /// Acquired and completed.
    pub normal_completed: usize,
    /// Keys claimed from both sides.
    pub contested: usize,
    /// Acquired (and completed) by the majority side.
    pub contested_by_majority: usize,
    /// What the cut-off side's claims of those keys answered, by outcome or reason.
    pub cut_off_outcomes: BTreeMap<String, usize>,
    /// Replays of completed keys during the failover.
    pub replays: usize,
    /// Answered COMPLETED.
    pub replays_completed: usize,
    /// The refused HIGH-risk keys acquired after the heal.
    pub high_after_heal_acquired: usize,
    /// Claims of every key of this step from every region after the heal.
    pub rechecks: usize,
    /// Answered COMPLETED.
    pub rechecks_completed: usize,
    /// The observer's failover gauges of the group at the end of the failover.
    pub gauges_during: BTreeMap<String, f64>,
    /// And once home again.
    pub gauges_after: BTreeMap<String, f64>,
}

/// The per-group gauges every node publishes (refreshed every 200 ms).
const GAUGES: [&str; 3] = [
    "idem_group_failover",
    "idem_group_failover_seconds",
    "idem_group_leader_home",
];

/// The keys of the step.
struct Keys {
    high: Vec<RecordKey>,
    normal: Vec<RecordKey>,
    contested: Vec<RecordKey>,
}

impl Keys {
    fn all(&self) -> impl Iterator<Item = &RecordKey> {
        self.high.iter().chain(&self.normal).chain(&self.contested)
    }
}

/// Runs step 4 on `group`; `completed` are terminal keys of the bound tenant to replay.
pub async fn run(
    ctx: &Context,
    group: GroupId,
    completed: &[RecordKey],
    report: &mut Report,
) -> Result<IsolationFigures, ScenarioError> {
    let roles = &ctx.roles;
    let tenant = &roles.bound_tenant;
    let keys = Keys {
        high: ctx.keys(tenant, "iso-high", KEYS)?,
        normal: ctx.keys(tenant, "iso-normal", KEYS)?,
        contested: ctx.keys(tenant, "iso-contested", KEYS)?,
    };
    let grudge = partition::region_grudge(ctx.regions(), &ctx.cluster.ids(), roles.home);
    let mut f = IsolationFigures {
        region: roles.home_region.clone(),
        cut_off: roles.cut_off_nodes.clone(),
        partition: partition::describe(&grudge),
        group,
        observer: roles.observer_node,
        ..IsolationFigures::default()
    };
    let (before, _) = wait_for(
        "the group led from home before the isolation",
        HOME_WITHIN,
        || view(ctx, group, GroupView::at_home),
    )
    .await?;
    f.before = Some(before);

    let cut_client = ctx.client(roles.client_node)?;
    eprintln!("isolation: cutting off {} ({})", f.region, f.partition);
    let imposed = blocking(&ctx.cluster, move |c| partition::impose(c, &grudge)).await;
    let cut_at = Instant::now();
    let mut cut_side = JoinSet::new();
    let isolated = match imposed {
        Ok(()) => {
            ctx.nemesis(
                "start-partition",
                &format!("region {}: {}", f.region, f.partition),
            );
            cut_side = claim_from_cut_off_side(cut_client, &keys.contested);
            during_failover(ctx, &keys, completed, cut_at, &mut f).await
        }
        Err(error) => Err(error),
    };

    // Healed whatever happened under the partition (a half-imposed one included).
    let healed = blocking(&ctx.cluster, partition::heal).await;
    let healed_at = Instant::now();
    ctx.nemesis("stop-partition", "all nodes");
    for answer in cut_side.join_all().await {
        let outcome = match answer {
            Ok(claim) => claim.kind.name().to_owned(),
            Err(error) => error.reason().to_owned(),
        };
        *f.cut_off_outcomes.entry(outcome).or_default() += 1;
    }
    healed?;
    isolated?;
    add_failover_checks(&f, report);

    eprintln!("isolation: healed; waiting for leadership to return home");
    let epoch = f.during.as_ref().map_or(0, |d| d.epoch);
    let (after, _) = wait_for(
        "leadership back home and the failover ended",
        HOME_WITHIN,
        || view(ctx, group, move |v| v.at_home() && v.epoch > epoch),
    )
    .await?;
    f.home_after_heal_ms = Some(round(healed_at.elapsed().as_secs_f64() * 1e3));
    f.after = Some(after);
    after_heal(ctx, &keys, &mut f).await?;
    add_heal_checks(&f, report);
    Ok(f)
}

/// Under the partition: waits for the failover, then HIGH, NORMAL, contested claims and
/// replays through the observer (majority side).
async fn during_failover(
    ctx: &Context,
    keys: &Keys,
    completed: &[RecordKey],
    cut_at: Instant,
    f: &mut IsolationFigures,
) -> Result<(), ScenarioError> {
    let group = f.group;
    let (during, _) = wait_for(
        "the group's failover seen from the majority side",
        FAILOVER_WITHIN,
        || view(ctx, group, GroupView::failed_over),
    )
    .await?;
    f.failover_detected_ms = Some(round(cut_at.elapsed().as_secs_f64() * 1e3));
    eprintln!(
        "isolation: failover after {:.0} ms: {}",
        f.failover_detected_ms.unwrap_or_default(),
        during.describe()
    );
    f.during = Some(during);
    let majority = ctx.client(ctx.roles.observer_node)?;
    for key in &keys.high {
        f.high_claims += 1;
        let (_, answer) = majority.claim(key, Risk::High).await;
        if let Err(CallError::Refused {
            reason,
            retry_after,
        }) = &answer
        {
            if reason == idem_proto::reason::REGION_FAILOVER {
                f.high_refused += 1;
                f.high_with_retry_after += usize::from(retry_after.is_some());
            }
        }
        if matches!(majority.get(key).await, Ok(None)) {
            f.high_left_nothing += 1;
        }
    }
    for key in &keys.normal {
        f.normal_claims += 1;
        f.normal_completed += usize::from(acquire_and_complete(&majority, key, Risk::Normal).await);
    }
    for key in &keys.contested {
        f.contested += 1;
        f.contested_by_majority +=
            usize::from(acquire_and_complete(&majority, key, Risk::Normal).await);
    }
    for key in completed.iter().take(KEYS) {
        f.replays += 1;
        let (_, answer) = majority.claim(key, Risk::Normal).await;
        f.replays_completed += usize::from(answer.is_ok_and(|c| c.kind == ClaimKind::Completed));
    }
    f.gauges_during = gauges(ctx, group).await?;
    Ok(())
}

/// After the heal: the refused HIGH-risk keys are claimed again from the home region, then
/// every key of the step is claimed from every region.
async fn after_heal(
    ctx: &Context,
    keys: &Keys,
    f: &mut IsolationFigures,
) -> Result<(), ScenarioError> {
    let home = ctx.client(ctx.roles.client_node)?;
    for key in &keys.high {
        f.high_after_heal_acquired +=
            usize::from(acquire_and_complete(&home, key, Risk::High).await);
    }
    for node in ctx.roles.race_nodes.clone() {
        let client = ctx.client(node)?;
        for key in keys.all() {
            f.rechecks += 1;
            let (_, answer) = client.claim(key, Risk::Normal).await;
            f.rechecks_completed +=
                usize::from(answer.is_ok_and(|c| c.kind == ClaimKind::Completed));
        }
    }
    f.gauges_after = gauges(ctx, f.group).await?;
    Ok(())
}

/// The observer's [`GAUGES`] for `group`.
async fn gauges(ctx: &Context, group: GroupId) -> Result<BTreeMap<String, f64>, ScenarioError> {
    let mut values = BTreeMap::new();
    for name in GAUGES {
        let sample = format!("{name}{{group=\"{group}\"}}");
        let value = ctx
            .observer
            .metric(ctx.roles.observer_node, &sample)
            .await?;
        values.insert(name.to_owned(), value);
    }
    Ok(values)
}

/// The cut-off side's HIGH-risk claims of `keys`, all at once, through a node of the
/// cut-off region; they run while the majority side works.
fn claim_from_cut_off_side(
    client: NodeClient,
    keys: &[RecordKey],
) -> JoinSet<Result<Claimed, CallError>> {
    let mut claims = JoinSet::new();
    for key in keys {
        let (client, key) = (client.clone(), key.clone());
        claims.spawn(async move { client.claim(&key, Risk::High).await.1 });
    }
    claims
}

/// Claims `key` and completes it; true when both happened.
async fn acquire_and_complete(client: &NodeClient, key: &RecordKey, risk: Risk) -> bool {
    let (_, answer) = client.claim(key, risk).await;
    match answer {
        Ok(claim) if claim.kind == ClaimKind::Acquired => match claim.fence {
            Some(fence) => client.complete(key, fence).await.1.is_ok(),
            None => false,
        },
        _ => false,
    }
}

/// The group as the observer sees it, when `wanted` holds of it.
async fn view(
    ctx: &Context,
    group: GroupId,
    wanted: impl Fn(&GroupView) -> bool,
) -> Result<GroupView, String> {
    let node = ctx.roles.observer_node;
    let status = ctx.observer.group_of(node, group).await?;
    let view = GroupView::of(node, &status);
    if wanted(&view) {
        Ok(view)
    } else {
        Err(format!("n{node}: {}", view.describe()))
    }
}

/// Runs a cluster command (iptables) off the async threads.
async fn blocking(
    cluster: &Arc<Cluster>,
    action: impl FnOnce(&Cluster) -> anyhow::Result<()> + Send + 'static,
) -> Result<(), ScenarioError> {
    let cluster = Arc::clone(cluster);
    tokio::task::spawn_blocking(move || action(&cluster))
        .await
        .map_err(|e| ScenarioError::Cluster(anyhow::anyhow!("partition task: {e}")))?
        .map_err(ScenarioError::Cluster)
}

fn add_failover_checks(f: &IsolationFigures, report: &mut Report) {
    let describe = |v: &Option<GroupView>| v.as_ref().map_or("-".into(), GroupView::describe);
    report.check(
        "isolation",
        format!(
            "cutting off {} moves group {}'s leader out and starts a failover",
            f.region, f.group
        ),
        f.during.as_ref().is_some_and(GroupView::failed_over),
        format!(
            "after {} ms: {} (before: {})",
            f.failover_detected_ms.unwrap_or_default(),
            describe(&f.during),
            describe(&f.before)
        ),
    );
    report.check(
        "isolation",
        "HIGH-risk claims of new keys are refused with REGION_FAILOVER and a retry-after",
        f.high_refused == f.high_claims && f.high_with_retry_after == f.high_claims,
        format!(
            "{} of {} refused, {} with retry-after",
            f.high_refused, f.high_claims, f.high_with_retry_after
        ),
    );
    report.check(
        "isolation",
        "refused HIGH-risk claims create nothing (Get: NOT_FOUND)",
        f.high_left_nothing == f.high_claims,
        format!(
            "{} of {} keys without a record",
            f.high_left_nothing, f.high_claims
        ),
    );
    report.check(
        "isolation",
        "NORMAL claims are acquired and completed through the new leader",
        f.normal_completed == f.normal_claims,
        format!("{} of {}", f.normal_completed, f.normal_claims),
    );
    let cut_off_acquired = f.cut_off_outcomes.get("ACQUIRED").copied().unwrap_or(0);
    report.check(
        "isolation",
        "keys claimed from both sides are acquired by the majority side only",
        f.contested_by_majority == f.contested && cut_off_acquired == 0,
        format!(
            "majority acquired {} of {}; cut-off side answered {:?}",
            f.contested_by_majority, f.contested, f.cut_off_outcomes
        ),
    );
    report.check(
        "isolation",
        "replays of completed keys continue during the failover",
        f.replays > 0 && f.replays_completed == f.replays,
        format!("{} of {} COMPLETED", f.replays_completed, f.replays),
    );
}

/// Home again, and the epoch bumped by the failover and again by its end.
fn epochs_rise(f: &IsolationFigures) -> bool {
    match (&f.before, &f.during, &f.after) {
        (Some(before), Some(during), Some(after)) => {
            after.at_home() && after.epoch > during.epoch && during.epoch > before.epoch
        }
        _ => false,
    }
}

fn add_heal_checks(f: &IsolationFigures, report: &mut Report) {
    let epochs: Vec<String> = [&f.before, &f.during, &f.after]
        .iter()
        .map(|v| v.as_ref().map_or("-".into(), |v| v.epoch.to_string()))
        .collect();
    report.check(
        "isolation",
        "healing returns leadership home and ends the failover with a new epoch",
        epochs_rise(f),
        format!(
            "after {} ms: {}; epochs {}",
            f.home_after_heal_ms.unwrap_or_default(),
            f.after.as_ref().map_or("-".into(), GroupView::describe),
            epochs.join(" -> ")
        ),
    );
    let gauge = |set: &BTreeMap<String, f64>, name: &str| set.get(name).copied().unwrap_or(-1.0);
    let (during, after) = (&f.gauges_during, &f.gauges_after);
    report.check(
        "isolation",
        "the failover gauges follow: idem_group_failover 1 -> 0, idem_group_leader_home 0 -> 1",
        gauge(during, GAUGES[0]) == 1.0
            && gauge(during, GAUGES[1]) > 0.0
            && gauge(during, GAUGES[2]) == 0.0
            && gauge(after, GAUGES[0]) == 0.0
            && gauge(after, GAUGES[2]) == 1.0,
        format!("on n{}: during {during:?}; after {after:?}", f.observer),
    );
    report.check(
        "isolation",
        "HIGH-risk claims succeed again after the heal (the keys refused before)",
        f.high_after_heal_acquired == f.high_claims,
        format!(
            "{} of {} acquired and completed",
            f.high_after_heal_acquired, f.high_claims
        ),
    );
    report.check(
        "isolation",
        "after the heal every key of the step replays COMPLETED from every region",
        f.rechecks > 0 && f.rechecks_completed == f.rechecks,
        format!("{} of {} claims", f.rechecks_completed, f.rechecks),
    );
}
