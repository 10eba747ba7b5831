//! The nemesis plan: drawn entirely from the seed before the test starts.
//!
//! Every `interval` one fault starts, of a kind drawn among the enabled kinds not already in
//! force, and is healed after a random 2–6 s (by default). Choices that depend on the cluster
//! at that moment (who leads) are made at run time from the fault's own seed, so the same
//! `--seed` always gives the same plan, and a run can be reproduced as far as the cluster's
//! own timing allows. The plan is printed at start and stored as `schedule.txt`.
//!
//! The workload and the node count are mixed into the seed of the plan ([`Options::variant`]):
//! otherwise the cells of a matrix that share a seed (every workload, 3 and 5 nodes) would
//! replay one sequence of fault kinds and timings, and a seed that never drew, say, a table
//! flip would never draw it in any of them. A run is still reproduced by its own command line
//! (`--seed`, `--workload`, `--nodes`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::{Fault, Kind};
use idem_testkit::Rng;

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// When it starts, from the start of the workload.
    pub at: Duration,
    /// How long it lasts.
    pub heal_after: Duration,
    /// What it is.
    pub fault: Fault,
    /// Seed for the choices made when it starts (which node, which split).
    pub seed: u64,
}

/// What to plan.
#[derive(Debug, Clone)]
pub struct Options {
    /// The run's seed.
    pub seed: u64,
    /// What else tells this run from another of the same seed (see [`variant`]).
    pub variant: u64,
    /// Enabled kinds.
    pub kinds: Vec<Kind>,
    /// Time between fault starts.
    pub interval: Duration,
    /// Length of the workload; no fault starts so late that it would outlast it.
    pub time_limit: Duration,
    /// Number of nodes.
    pub nodes: usize,
    /// Number of regions.
    pub regions: usize,
    /// Largest clock offset.
    pub max_skew: Duration,
    /// Shortest fault.
    pub heal_min: Duration,
    /// Longest fault.
    pub heal_max: Duration,
}

/// The planned faults, in start order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schedule {
    /// The faults.
    pub faults: Vec<Planned>,
}

impl Schedule {
    /// Draws the plan from `options.seed`.
    pub fn generate(options: &Options) -> Schedule {
        let mut rng = Rng::stream(options.seed ^ options.variant, 0x6e656d);
        let mut busy_until: BTreeMap<Kind, Duration> = BTreeMap::new();
        let mut faults = Vec::new();
        let interval = options.interval.max(Duration::from_millis(100));
        let mut at = interval;
        while at + options.heal_min <= options.time_limit {
            let free: Vec<Kind> = options
                .kinds
                .iter()
                .copied()
                .filter(|k| busy_until.get(k).is_none_or(|&until| until <= at))
                .collect();
            if let Some(planned) = draw(&mut rng, options, &free, at) {
                busy_until.insert(planned.fault.kind(), planned.at + planned.heal_after);
                faults.push(planned);
            }
            at += interval;
        }
        Schedule { faults }
    }

    /// One line per fault: `+5.0s for 3.2s: partition bridge`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for p in &self.faults {
            let _ = writeln!(
                out,
                "+{:.1}s for {:.1}s: {}",
                p.at.as_secs_f64(),
                p.heal_after.as_secs_f64(),
                p.fault
            );
        }
        out
    }
}

/// The plan variant of a run of `workload` (its name) on `nodes` nodes: an FNV-1a hash, so
/// it is the same in every build and on every machine.
pub fn variant(workload: &str, nodes: usize) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in workload.bytes().chain((nodes as u64).to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn draw(rng: &mut Rng, options: &Options, free: &[Kind], at: Duration) -> Option<Planned> {
    if free.is_empty() {
        return None;
    }
    let kind = free[rng.index(free.len())];
    let max_skew_ms = options.max_skew.as_millis() as u64;
    let fault = Fault::random(kind, rng, options.nodes, options.regions, max_skew_ms)?;
    let (lo, hi) = (
        options.heal_min.as_millis() as u64,
        options.heal_max.as_millis() as u64,
    );
    let mut heal_after = Duration::from_millis(rng.between(lo, hi.max(lo)));
    heal_after = heal_after.min(options.time_limit.saturating_sub(at));
    Some(Planned {
        at,
        heal_after,
        fault,
        seed: rng.next_u64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(seed: u64, kinds: &[Kind]) -> Options {
        Options {
            seed,
            variant: variant("register", 5),
            kinds: kinds.to_vec(),
            interval: Duration::from_secs(5),
            time_limit: Duration::from_secs(60),
            nodes: 5,
            regions: 1,
            max_skew: Duration::from_secs(10),
            heal_min: Duration::from_secs(2),
            heal_max: Duration::from_secs(6),
        }
    }

    #[test]
    fn same_seed_same_plan_other_seed_other_plan() {
        let all = [Kind::Partition, Kind::Kill, Kind::Pause, Kind::Clock];
        let a = Schedule::generate(&options(42, &all));
        assert_eq!(a, Schedule::generate(&options(42, &all)));
        assert_ne!(a, Schedule::generate(&options(43, &all)));
        assert_eq!(a.faults.len(), 11, "{}", a.describe());
    }

    #[test]
    fn workload_and_node_count_change_the_plan() {
        let all = [Kind::Partition, Kind::Kill, Kind::Pause, Kind::Clock];
        let base = options(42, &all);
        let kinds = |o: &Options| -> Vec<Kind> {
            Schedule::generate(o)
                .faults
                .iter()
                .map(|p| p.fault.kind())
                .collect()
        };
        let other_workload = Options {
            variant: variant("conflict", 5),
            ..base.clone()
        };
        let other_nodes = Options {
            variant: variant("register", 3),
            ..base.clone()
        };
        assert_ne!(kinds(&base), kinds(&other_workload));
        assert_ne!(kinds(&base), kinds(&other_nodes));
        assert_eq!(variant("register", 5), 0x614b_f23f_1838_7545);
    }

    #[test]
    fn faults_fit_the_test_and_a_kind_never_overlaps_itself() {
        let all = [Kind::Partition, Kind::Kill];
        for seed in 0..50 {
            let plan = Schedule::generate(&options(seed, &all));
            let mut last_end: BTreeMap<Kind, Duration> = BTreeMap::new();
            for p in &plan.faults {
                assert!(p.at + p.heal_after <= Duration::from_secs(60));
                assert!(
                    p.heal_after >= Duration::from_secs(2)
                        && p.heal_after <= Duration::from_secs(6)
                );
                let kind = p.fault.kind();
                assert!(
                    last_end.get(&kind).is_none_or(|&e| e <= p.at),
                    "{}",
                    plan.describe()
                );
                last_end.insert(kind, p.at + p.heal_after);
                assert!(all.contains(&kind));
            }
        }
    }

    #[test]
    fn nothing_to_do_without_kinds_or_without_partitionable_nodes() {
        assert!(Schedule::generate(&options(1, &[])).faults.is_empty());
        let mut single = options(1, &[Kind::Partition]);
        single.nodes = 1;
        assert!(Schedule::generate(&single).faults.is_empty());
    }
}
