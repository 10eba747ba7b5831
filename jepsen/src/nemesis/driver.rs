//! Runs a [`Schedule`] against a cluster and records each step in the history.
//!
//! Each fault is logged as a nemesis entry (`:process :nemesis`, `:type :info`) when it starts
//! and when it is healed, with the `:f` names the analysis pairs into fault windows:
//! `:start-partition`/`:stop-partition`, `:kill`/`:start`, `:pause`/`:resume`,
//! `:clock-skew`/`:bump-clock`/`:strobe-clock` to `:clock-reset`, `:remove-node`/`:add-node`,
//! `:power-loss`/`:power-on`, `:bitflip`/`:bitflip-restart`. [`Nemesis::heal_all`] undoes
//! every kind of fault on every node whatever the bookkeeping says, so it is safe after the
//! schedule was interrupted halfway through a step.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use anyhow::Context as _;
use idem_client::Client;

use super::clock::Strobe;
use super::membership::Membership;
use super::partition;
use super::Target;
use super::{bitflip, clock, kill, pause, power_loss, ClockMode, Fault, Planned, Schedule};
use crate::cluster::{health, Cluster};
use crate::history::{Recorder, Value};
use idem_testkit::Rng;

/// What a started fault needs undone.
#[derive(Debug, Clone)]
enum Active {
    Partition,
    Killed(Vec<usize>),
    Paused(Vec<usize>),
    Skewed(Vec<usize>),
    Strobing(Strobe),
    Removed(usize),
    PoweredOff(Vec<usize>),
    Flipped(bitflip::Damage),
}

/// The fault injector of a test run.
pub struct Nemesis {
    cluster: Arc<Cluster>,
    recorder: Arc<Recorder>,
    membership: Option<Arc<Membership>>,
    admin: Client,
    active: Mutex<BTreeMap<usize, Active>>,
}

impl Nemesis {
    /// A nemesis over `cluster`, recording into `recorder`; `membership` is needed for
    /// membership faults.
    pub fn new(
        cluster: Arc<Cluster>,
        recorder: Arc<Recorder>,
        membership: Option<Membership>,
    ) -> anyhow::Result<Nemesis> {
        let admin = health::admin_client(&cluster.topology, &cluster.admin_access())?;
        Ok(Nemesis {
            cluster,
            recorder,
            membership: membership.map(Arc::new),
            admin,
            active: Mutex::new(BTreeMap::new()),
        })
    }

    /// Runs the schedule, timed from `start`; returns when its last fault is healed. Each
    /// fault runs in its own task (start, then heal), so a slow step — a membership change
    /// waiting for a quorum that a kill took away — delays neither the other faults nor the
    /// heals that would give the quorum back. A kind never overlaps itself, so faults that
    /// run concurrently touch different things. Dropping the future stops every task.
    pub async fn run(self: Arc<Self>, schedule: &Schedule, start: Instant) {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, planned) in schedule.faults.iter().cloned().enumerate() {
            let me = Arc::clone(&self);
            tasks.spawn(async move {
                tokio::time::sleep_until((start + planned.at).into()).await;
                me.start(i, &planned).await;
                let end = start + planned.at + planned.heal_after;
                tokio::time::sleep_until(end.into()).await;
                me.heal(i).await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    fn log(&self, f: &str, value: impl Into<String>) {
        let value = value.into();
        eprintln!("nemesis: {f} {value}");
        self.recorder.nemesis(f, Value::str(value));
    }

    async fn start(&self, index: usize, planned: &Planned) {
        let nodes = self.cluster.ids().len();
        if let Some(why) = past_the_fault_model(&planned.fault, &self.lock(), nodes) {
            eprintln!("nemesis: {}: skipped, {why}", planned.fault);
            return;
        }
        let mut rng = Rng::new(planned.seed);
        let live = self.cluster.live_nodes();
        let leader = health::leader(&self.admin, &self.cluster.topology, &live).await;
        let cluster = Arc::clone(&self.cluster);
        let fault = planned.fault.clone();
        let membership = self.membership.clone();
        let result = tokio::task::spawn_blocking(move || {
            let ctx = Ctx {
                cluster: &cluster,
                membership: membership.as_deref(),
            };
            apply(&ctx, &fault, &mut rng, &live, leader)
        })
        .await;
        match result {
            Ok(Ok((active, f, description))) => {
                self.log(f, format!("{}: {description}", planned.fault));
                self.lock().insert(index, active);
            }
            Ok(Err(e)) => eprintln!("nemesis: {}: {e:#}", planned.fault),
            Err(e) => eprintln!("nemesis: {} panicked: {e}", planned.fault),
        }
    }

    async fn heal(&self, index: usize) {
        // The entry stays until the heal succeeded: interrupted or failed, it is redone by
        // the final heal.
        let Some(active) = self.lock().get(&index).cloned() else {
            return;
        };
        let (cluster, membership) = (Arc::clone(&self.cluster), self.membership.clone());
        let undo = active.clone();
        let result = tokio::task::spawn_blocking(move || {
            let ctx = Ctx {
                cluster: &cluster,
                membership: membership.as_deref(),
            };
            undo_fault(&ctx, &undo)
        })
        .await;
        match result {
            Ok(Ok(description)) => {
                self.lock().remove(&index);
                self.log(end_f(&active), description);
            }
            Ok(Err(e)) => {
                eprintln!("nemesis: healing {active:?} failed (retried at the end): {e:#}")
            }
            Err(e) => eprintln!("nemesis: healing {active:?} panicked: {e}"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Active>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Heals everything: flushes every node's firewall, resumes and restarts every node,
    /// resets every clock, adds removed nodes back. Logs an end entry for each fault still in
    /// force.
    pub async fn heal_all(&self) {
        let open: Vec<Active> = std::mem::take(&mut *self.lock()).into_values().collect();
        let (cluster, membership) = (Arc::clone(&self.cluster), self.membership.clone());
        let removed: Vec<usize> = open
            .iter()
            .filter_map(|a| match a {
                Active::Removed(n) => Some(*n),
                _ => None,
            })
            .collect();
        let flipped: Vec<usize> = open
            .iter()
            .filter_map(|a| match a {
                Active::Flipped(damage) => Some(damage.node),
                _ => None,
            })
            .collect();
        for active in &open {
            if let Active::Strobing(strobe) = active {
                strobe.stop();
            }
        }
        let result = tokio::task::spawn_blocking(move || {
            heal_everything(&cluster)?;
            let mut recoveries = BTreeMap::new();
            if let Some(m) = membership.as_deref() {
                for node in removed {
                    m.add(&cluster, node)?;
                }
                // heal_everything restarted the damaged nodes; replace those that refused.
                for node in flipped {
                    recoveries.insert(node, bitflip::restart_or_replace(&cluster, m, node)?);
                }
            }
            anyhow::Ok(recoveries)
        })
        .await;
        let recoveries = match result.map_err(anyhow::Error::from) {
            Ok(Ok(recoveries)) => recoveries,
            Ok(Err(e)) | Err(e) => {
                eprintln!("nemesis: final heal: {e:#}");
                BTreeMap::new()
            }
        };
        for active in open {
            let mut description = describe_active(&active);
            if let Active::Flipped(damage) = &active {
                if let Some(recovery) = recoveries.get(&damage.node) {
                    description = format!("{description}: {recovery}");
                }
            }
            self.log(end_f(&active), format!("final heal: {description}"));
        }
    }
}

/// What the blocking fault code acts on.
struct Ctx<'a> {
    cluster: &'a Arc<Cluster>,
    membership: Option<&'a Membership>,
}

fn apply(
    ctx: &Ctx<'_>,
    fault: &Fault,
    rng: &mut Rng,
    live: &[usize],
    leader: Option<usize>,
) -> anyhow::Result<(Active, &'static str, String)> {
    let cluster = ctx.cluster;
    let needs_live = matches!(
        fault,
        Fault::Kill(_)
            | Fault::Pause(_)
            | Fault::Membership(_)
            | Fault::PowerLoss(_)
            | Fault::Bitflip(_)
    );
    if needs_live && live.is_empty() {
        anyhow::bail!("no live node to act on (all killed or paused); skipped");
    }
    match fault {
        Fault::Partition(shape) => {
            let grudge = shape.grudge(rng, &cluster.ids(), leader, &cluster.regions);
            partition::impose(cluster, &grudge)?;
            Ok((
                Active::Partition,
                "start-partition",
                partition::describe(&grudge),
            ))
        }
        Fault::Kill(target) => {
            let nodes = target.pick(rng, live, leader);
            kill::kill(cluster, &nodes)?;
            Ok((Active::Killed(nodes.clone()), "kill", names(&nodes)))
        }
        Fault::Pause(target) => {
            let nodes = target.pick(rng, live, leader);
            pause::pause(cluster, &nodes)?;
            Ok((Active::Paused(nodes.clone()), "pause", names(&nodes)))
        }
        Fault::Clock { mode, max_skew_ms } => move_clocks(cluster, *mode, *max_skew_ms, rng),
        Fault::Membership(target) => {
            let node = target.pick(rng, live, leader).first().copied().unwrap_or(1);
            ctx.membership
                .context("membership nemesis without idemctl")?
                .remove(cluster, node)?;
            Ok((Active::Removed(node), "remove-node", names(&[node])))
        }
        Fault::PowerLoss(target) => {
            let nodes = target.pick(rng, live, leader);
            let dropped = power_loss::power_loss(cluster, &nodes)?;
            Ok((
                Active::PoweredOff(nodes),
                "power-loss",
                power_loss::describe(&dropped),
            ))
        }
        Fault::Bitflip(kind) => {
            let node = Target::One.pick(rng, live, leader)[0];
            let damage = bitflip::corrupt(cluster, node, *kind, rng)?;
            let description = damage.to_string();
            Ok((Active::Flipped(damage), "bitflip", description))
        }
    }
}

/// Why starting `fault` now, with the faults `active` on a cluster of `nodes`, would take
/// it past what a Raft group survives, if it would. A bit flip destroys its node's data
/// (the node is replaced), so it must leave a majority of the voters with theirs:
/// - one flip at a time: the plan keeps a kind from overlapping itself by planned times,
///   but a replacement may take longer than planned, and a second flip meanwhile would
///   damage two nodes at once (or the one being replaced);
/// - never with fewer than three voters: with a member removed from three, the replica a
///   flip destroys is half of the two left, and no majority keeps the data (no store
///   survives that without an operator's restore, docs/guarantees.md), so a flip waits for
///   the removed member to be back, and a removal waits for a flip to be healed.
fn past_the_fault_model(
    fault: &Fault,
    active: &BTreeMap<usize, Active>,
    nodes: usize,
) -> Option<&'static str> {
    let flipping = active.values().any(|a| matches!(a, Active::Flipped(_)));
    let removed = active
        .values()
        .filter(|a| matches!(a, Active::Removed(_)))
        .count();
    let voters = nodes.saturating_sub(removed);
    match fault {
        Fault::Bitflip(_) if flipping => Some("the previous bit flip is still being healed"),
        Fault::Bitflip(_) if voters < 3 => {
            Some("a member is removed: a flip would destroy the data of half the voters")
        }
        Fault::Membership(_) if flipping && voters <= 3 => {
            Some("a bit flip is being healed: a removal would leave half the voters' data")
        }
        _ => None,
    }
}

/// Starts a clock fault: skews, a bump or a strobe, drawn from `rng`.
fn move_clocks(
    cluster: &Arc<Cluster>,
    mode: ClockMode,
    max_skew_ms: u64,
    rng: &mut Rng,
) -> anyhow::Result<(Active, &'static str, String)> {
    // Down nodes too: a restarted node comes back with the moved clock.
    let ids = cluster.ids();
    let skews = match mode {
        ClockMode::Bump => clock::draw_bump(rng, &ids, max_skew_ms),
        ClockMode::Skew | ClockMode::Strobe => clock::draw_skews(rng, &ids, max_skew_ms),
    };
    let text = describe_skews(&skews);
    let nodes: Vec<usize> = skews.iter().map(|(n, _)| *n).collect();
    match mode {
        ClockMode::Strobe => {
            let strobe = Strobe::start(Arc::clone(cluster), skews)?;
            Ok((Active::Strobing(strobe), "strobe-clock", text))
        }
        ClockMode::Bump => {
            clock::skew(cluster, &skews)?;
            Ok((Active::Skewed(nodes), "bump-clock", text))
        }
        ClockMode::Skew => {
            clock::skew(cluster, &skews)?;
            Ok((Active::Skewed(nodes), "clock-skew", text))
        }
    }
}

fn describe_skews(skews: &[(usize, i64)]) -> String {
    skews
        .iter()
        .map(|(n, ms)| format!("n{n} {ms:+}ms"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Undoes a fault; returns the description of its end entry.
fn undo_fault(ctx: &Ctx<'_>, active: &Active) -> anyhow::Result<String> {
    let cluster = ctx.cluster;
    match active {
        Active::Partition => partition::heal(cluster)?,
        Active::Killed(nodes) => kill::restart(cluster, nodes)?,
        Active::Paused(nodes) => pause::resume(cluster, nodes)?,
        Active::Skewed(nodes) => clock::reset(cluster, nodes)?,
        Active::Strobing(strobe) => {
            strobe.stop();
            clock::reset(cluster, &strobe.nodes())?
        }
        Active::PoweredOff(nodes) => kill::restart(cluster, nodes)?,
        Active::Removed(node) => ctx
            .membership
            .context("membership nemesis without idemctl")?
            .add(cluster, *node)?,
        Active::Flipped(damage) => {
            let membership = ctx.membership.context("bitflip nemesis without idemctl")?;
            let recovery = bitflip::restart_or_replace(cluster, membership, damage.node)?;
            return Ok(format!("n{}: {recovery}", damage.node));
        }
    }
    Ok(describe_active(active))
}

fn heal_everything(cluster: &Cluster) -> anyhow::Result<()> {
    let ids = cluster.ids();
    for &id in &ids {
        cluster.in_node(id, partition::heal_command()).run_quietly();
    }
    pause::resume(cluster, &ids)?;
    clock::reset(cluster, &ids)?;
    kill::restart(cluster, &ids)
}

fn end_f(active: &Active) -> &'static str {
    match active {
        Active::Partition => "stop-partition",
        Active::Killed(_) => "start",
        Active::Paused(_) => "resume",
        Active::Skewed(_) | Active::Strobing(_) => "clock-reset",
        Active::Removed(_) => "add-node",
        Active::PoweredOff(_) => "power-on",
        Active::Flipped(_) => "bitflip-restart",
    }
}

fn describe_active(active: &Active) -> String {
    match active {
        Active::Partition => "all nodes".into(),
        Active::Killed(n) | Active::Paused(n) | Active::Skewed(n) | Active::PoweredOff(n) => {
            names(n)
        }
        Active::Strobing(strobe) => names(&strobe.nodes()),
        Active::Removed(n) => names(&[*n]),
        Active::Flipped(damage) => names(&[damage.node]),
    }
}

fn names(nodes: &[usize]) -> String {
    nodes
        .iter()
        .map(|n| format!("n{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::nemesis::bitflip::{Damage, FileKind, Halt};
    use crate::nemesis::Target;

    fn flipped(node: usize) -> Active {
        Active::Flipped(Damage {
            node,
            file: PathBuf::from("db/000004.log"),
            kind: FileKind::Wal,
            flips: vec![(1, 0)],
            seed: 1,
            halt: Halt::Killed,
        })
    }

    #[test]
    fn a_flip_never_leaves_less_than_a_majority_of_the_voters_their_data() {
        let flip = Fault::Bitflip(FileKind::Wal);
        let remove = Fault::Membership(Target::One);
        let none = BTreeMap::new();
        assert_eq!(past_the_fault_model(&flip, &none, 3), None);
        assert_eq!(past_the_fault_model(&remove, &none, 3), None);

        // Found by the matrix: a member removed from three, then a flip of one of the two
        // voters left, and the group could never decide again.
        let removed = BTreeMap::from([(0, Active::Removed(3))]);
        assert!(past_the_fault_model(&flip, &removed, 3).is_some());
        assert_eq!(past_the_fault_model(&flip, &removed, 5), None);

        // The same two faults the other way round.
        let flipping = BTreeMap::from([(0, flipped(2))]);
        assert!(past_the_fault_model(&remove, &flipping, 3).is_some());
        assert_eq!(past_the_fault_model(&remove, &flipping, 5), None);
        assert!(
            past_the_fault_model(&flip, &flipping, 5).is_some(),
            "one at a time"
        );

        // Other faults are never held back.
        let both = BTreeMap::from([(0, flipped(2)), (1, Active::Removed(3))]);
        assert_eq!(
            past_the_fault_model(&Fault::Kill(Target::Majority), &both, 3),
            None
        );
    }
}
