//! Property tests of placement: one key, one log.
//!
//! Three groups, each its own [`MemoryStore`]: the global group (region-affinity mode,
//! regions r1 and r2) and the groups of r1 and r2. Clients with any view of the placement
//! send claims, completions and sweeps to any group, while a proposer moves tenants between
//! groups following the protocol of `idem_core::placement` — release from the old region
//! group, then bind (or unbind) in the global group, then admit in the new region group —
//! one step at a time, interleaved with everything else, repeating steps as a proposer
//! retrying an unknown outcome would, and switching the mode back and forth.
//!
//! Whatever the interleaving: at most one group admits a tenant, a tenant's records live in
//! the group that admits it and nowhere else, a group answers a tenant's claim if and only if
//! it admits the tenant, and a key is never ACQUIRED in one group while it has a record in
//! another. Batched apply (the Raft node's overlay) equals sequential apply in every group.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use idem_core::command::{Complete, Expire, Fenced};
use idem_core::placement::{ClusterChange, GroupChange, Mode};
use idem_core::store::{Overlay, WriteSet};
use idem_core::testing::{Harness, BODY_A};
use idem_core::{
    apply, ClaimKind, Command, MemoryStore, OperationId, Outcome, Placement, RecordKey, Rejection,
    StateStore, Timestamp,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

const TENANTS: [&str; 3] = ["t0", "t1", "t2"];
const KEYS: [&str; 2] = ["k0", "k1"];
/// Region `i` is decided by group `i + 1`; group 0 is the global group.
const REGIONS: [&str; 2] = ["r1", "r2"];
const GROUPS: usize = 1 + REGIONS.len();
const GLOBAL: usize = 0;

#[derive(Clone, Debug)]
enum Step {
    /// A client claims a key at any group (its view of the placement may be stale).
    Claim {
        tenant: usize,
        key: usize,
        group: usize,
        worker: u8,
    },
    /// The last owner a group handed the key to completes it.
    Complete {
        tenant: usize,
        key: usize,
        group: usize,
    },
    /// The proposer plans moving a tenant to a region (`None`: back to the global group).
    Move { tenant: usize, to: Option<usize> },
    /// The proposer runs the next step of a tenant's plan.
    Progress { tenant: usize },
    /// The proposer re-sends the last step it ran (a retry after an unknown outcome).
    Repeat { tenant: usize },
    /// The operator switches the mode.
    Mode { global: bool },
    /// A group's leader sweeps expired records.
    Expire { group: usize },
    /// Time passes.
    Advance { millis: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    let tenant = 0..TENANTS.len();
    let group = 0..GROUPS;
    prop_oneof![
        5 => (tenant.clone(), 0..KEYS.len(), group.clone(), 0u8..3).prop_map(
            |(tenant, key, group, worker)| Step::Claim { tenant, key, group, worker }
        ),
        2 => (tenant.clone(), 0..KEYS.len(), group.clone())
            .prop_map(|(tenant, key, group)| Step::Complete { tenant, key, group }),
        3 => (tenant.clone(), prop::option::weighted(0.7, 0..REGIONS.len()))
            .prop_map(|(tenant, to)| Step::Move { tenant, to }),
        6 => tenant.clone().prop_map(|tenant| Step::Progress { tenant }),
        1 => tenant.prop_map(|tenant| Step::Repeat { tenant }),
        1 => prop::bool::weighted(0.3).prop_map(|global| Step::Mode { global }),
        2 => group.prop_map(|group| Step::Expire { group }),
        2 => (0u64..3_000).prop_map(|millis| Step::Advance { millis }),
    ]
}

/// A move in progress: the steps left, the last one run.
#[derive(Default)]
struct Plan {
    steps: VecDeque<(usize, Command)>,
    last: Option<(usize, Command)>,
    aborted: bool,
}

/// What a run exercised, to show the generator is not vacuous.
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    moves_done: u64,
    moves_refused: u64,
    acquired_in_regions: u64,
    acquired_in_global: u64,
    wrong_group: u64,
    expired: u64,
}

struct World {
    groups: Vec<Harness<MemoryStore>>,
    now: u64,
    plans: BTreeMap<usize, Plan>,
    /// The fence a group last handed out for (tenant, key).
    fences: BTreeMap<(usize, usize, usize), u64>,
    /// (tenant, key) -> the group holding its record, from ACQUIRED until expiry.
    holder: BTreeMap<(usize, usize), usize>,
    /// (group, operation id) -> (tenant, key), to follow expiries.
    operations: BTreeMap<(usize, OperationId), (usize, usize)>,
    /// Every command applied to each group, with its stamp.
    log: Vec<Vec<(Command, Timestamp)>>,
    stats: Stats,
}

fn target(tenant: usize, key: usize) -> RecordKey {
    Harness::<MemoryStore>::target_for(TENANTS[tenant], "user-1", KEYS[key])
}

impl World {
    fn new() -> Self {
        let mut world = World {
            groups: (0..GROUPS)
                .map(|_| {
                    let mut h = Harness::new(MemoryStore::new());
                    h.policy.retention = std::time::Duration::from_secs(1);
                    h
                })
                .collect(),
            now: 1_000_000,
            plans: BTreeMap::new(),
            fences: BTreeMap::new(),
            holder: BTreeMap::new(),
            operations: BTreeMap::new(),
            log: vec![Vec::new(); GROUPS],
            stats: Stats::default(),
        };
        let setup = [
            (
                GLOBAL,
                Command::Cluster(ClusterChange::SetMode(Mode::RegionAffinity)),
            ),
            (
                GLOBAL,
                Command::Cluster(ClusterChange::AddRegion { name: "r1".into() }),
            ),
            (
                GLOBAL,
                Command::Cluster(ClusterChange::AddRegion { name: "r2".into() }),
            ),
            (
                1,
                Command::Group(GroupChange::Init {
                    region: "r1".into(),
                }),
            ),
            (
                2,
                Command::Group(GroupChange::Init {
                    region: "r2".into(),
                }),
            ),
        ];
        for (group, command) in setup {
            let outcome = world.apply(group, command);
            assert!(matches!(outcome, Outcome::Placement(_)), "{outcome:?}");
        }
        let config = world.placement(GLOBAL).cluster;
        for (i, region) in REGIONS.iter().enumerate() {
            assert_eq!(config.regions[*region], i as u64 + 1);
        }
        world
    }

    fn apply(&mut self, group: usize, command: Command) -> Outcome {
        let stamp = Timestamp(self.now);
        self.groups[group].now = self.now;
        let outcome = self.groups[group].apply(command.clone());
        self.log[group].push((command, stamp));
        outcome
    }

    fn placement(&self, group: usize) -> Placement {
        self.groups[group].store.placement().unwrap()
    }

    fn admits(&self, group: usize, tenant: usize) -> bool {
        self.placement(group).admits(TENANTS[tenant])
    }

    fn has_records(&self, group: usize, tenant: usize) -> bool {
        let prefix = RecordKey::tenant_prefix(TENANTS[tenant]);
        !self.groups[group]
            .store
            .scan(&prefix, None, 1)
            .unwrap()
            .is_empty()
    }

    /// The group of the tenant's home as the global group has it.
    fn home_group(&self, tenant: usize) -> usize {
        let config = self.placement(GLOBAL).cluster;
        match config.homes.get(TENANTS[tenant]) {
            Some(region) => 1 + REGIONS.iter().position(|r| r == region).unwrap(),
            None => GLOBAL,
        }
    }

    fn run(&mut self, step: &Step) {
        match *step {
            Step::Claim {
                tenant,
                key,
                group,
                worker,
            } => self.claim(tenant, key, group, worker),
            Step::Complete { tenant, key, group } => {
                if let Some(&fence) = self.fences.get(&(group, tenant, key)) {
                    let command = Command::Complete(Complete {
                        owner: Fenced {
                            target: target(tenant, key),
                            fence,
                        },
                        result: Harness::<MemoryStore>::result("done"),
                    });
                    let admitted = self.admits(group, tenant);
                    let outcome = self.apply(group, command);
                    let refused = matches!(outcome, Outcome::Rejected(Rejection::WrongGroup));
                    assert_eq!(refused, !admitted, "complete at {group}: {outcome:?}");
                }
            }
            Step::Move { tenant, to } => self.plan(tenant, to),
            Step::Progress { tenant } => self.progress(tenant),
            Step::Repeat { tenant } => self.repeat(tenant),
            Step::Mode { global } => {
                let mode = if global {
                    Mode::Global
                } else {
                    Mode::RegionAffinity
                };
                let homes = !self.placement(GLOBAL).cluster.homes.is_empty();
                let outcome = self.apply(GLOBAL, Command::Cluster(ClusterChange::SetMode(mode)));
                let refused = matches!(
                    outcome,
                    Outcome::Rejected(Rejection::PlacementConflict { .. })
                );
                assert_eq!(refused, global && homes, "{outcome:?}");
            }
            Step::Expire { group } => {
                let outcome = self.apply(group, Command::Expire(Expire { limit: 100 }));
                let Outcome::Expired { operation_ids } = outcome else {
                    panic!("expire answered {outcome:?}");
                };
                for id in operation_ids {
                    let key = self
                        .operations
                        .remove(&(group, id))
                        .expect("known operation");
                    assert_eq!(self.holder.remove(&key), Some(group), "expired elsewhere");
                    self.stats.expired += 1;
                }
            }
            Step::Advance { millis } => self.now += millis,
        }
    }

    fn claim(&mut self, tenant: usize, key: usize, group: usize, worker: u8) {
        let admitted = self.admits(group, tenant);
        let command =
            self.groups[group].claim_command(&target(tenant, key), BODY_A, &format!("w{worker}"));
        let outcome = self.apply(group, command);
        let claim = match outcome {
            Outcome::Claim(claim) => claim,
            Outcome::Rejected(Rejection::WrongGroup) => {
                assert!(!admitted, "group {group} admits {tenant} but refused");
                self.stats.wrong_group += 1;
                return;
            }
            other => panic!("claim answered {other:?}"),
        };
        assert!(admitted, "group {group} decided a tenant it does not admit");
        if claim.kind == ClaimKind::Acquired && !claim.redelivered {
            if let Some(other) = self.holder.get(&(tenant, key)) {
                panic!("{tenant}/{key} ACQUIRED in group {group} while group {other} has it");
            }
            self.holder.insert((tenant, key), group);
            self.operations
                .insert((group, claim.record.operation_id), (tenant, key));
            if group == GLOBAL {
                self.stats.acquired_in_global += 1;
            } else {
                self.stats.acquired_in_regions += 1;
            }
        }
        if claim.kind.owns() {
            self.fences.insert((group, tenant, key), claim.record.fence);
        }
    }

    /// Plans a move of `tenant` (ignored while another move of it is under way).
    fn plan(&mut self, tenant: usize, to: Option<usize>) {
        if self.plans.get(&tenant).is_some_and(|p| !p.steps.is_empty()) {
            return;
        }
        let from = self.home_group(tenant);
        let to_group = to.map_or(GLOBAL, |r| r + 1);
        if from == to_group {
            return;
        }
        let name = TENANTS[tenant].to_owned();
        let mut steps = VecDeque::new();
        if from != GLOBAL {
            let release = GroupChange::Release {
                tenant: name.clone(),
            };
            steps.push_back((from, Command::Group(release)));
        }
        match to {
            Some(region) => {
                let bind = ClusterChange::Bind {
                    tenant: name.clone(),
                    region: REGIONS[region].into(),
                };
                steps.push_back((GLOBAL, Command::Cluster(bind)));
                let admit = GroupChange::Admit { tenant: name };
                steps.push_back((region + 1, Command::Group(admit)));
            }
            None => {
                let unbind = ClusterChange::Unbind { tenant: name };
                steps.push_back((GLOBAL, Command::Cluster(unbind)));
            }
        }
        self.plans.insert(
            tenant,
            Plan {
                steps,
                ..Plan::default()
            },
        );
    }

    fn progress(&mut self, tenant: usize) {
        let Some((group, command)) = self
            .plans
            .get_mut(&tenant)
            .and_then(|p| p.steps.pop_front())
        else {
            return;
        };
        let outcome = self.apply(group, command.clone());
        let plan = self.plans.get_mut(&tenant).unwrap();
        match outcome {
            Outcome::Placement(_) => {
                plan.last = Some((group, command));
                if plan.steps.is_empty() {
                    self.stats.moves_done += 1;
                }
            }
            Outcome::Rejected(
                Rejection::TenantHomeImmutable { .. } | Rejection::PlacementConflict { .. },
            ) => {
                // Only the first step may be refused (records in the old group, or global
                // mode): nothing changed, the proposer gives up.
                assert!(plan.last.is_none(), "step {command:?} refused mid-move");
                plan.steps.clear();
                plan.aborted = true;
                self.stats.moves_refused += 1;
            }
            other => panic!("{command:?} answered {other:?}"),
        }
    }

    fn repeat(&mut self, tenant: usize) {
        let Some((group, command)) = self
            .plans
            .get(&tenant)
            .filter(|p| !p.aborted)
            .and_then(|p| p.last.clone())
        else {
            return;
        };
        let before = self.groups[group].store.clone();
        let outcome = self.apply(group, command.clone());
        assert!(matches!(outcome, Outcome::Placement(_)), "{outcome:?}");
        // A repeated step is a no-op: only the metadata moves.
        let mut expected = before;
        let meta = self.groups[group].store.meta().unwrap();
        expected
            .commit(WriteSet {
                meta: Some(meta),
                ..WriteSet::default()
            })
            .unwrap();
        assert!(
            expected.dump() == self.groups[group].store.dump(),
            "repeating {command:?} changed the state"
        );
    }

    /// The invariants of the module docs.
    fn check(&self) {
        for tenant in 0..TENANTS.len() {
            let admitting: Vec<usize> = (0..GROUPS).filter(|&g| self.admits(g, tenant)).collect();
            assert!(
                admitting.len() <= 1,
                "tenant {tenant} admitted by groups {admitting:?}"
            );
            let holding: BTreeSet<usize> = (0..GROUPS)
                .filter(|&g| self.has_records(g, tenant))
                .collect();
            assert!(
                holding.len() <= 1,
                "tenant {tenant} has records in groups {holding:?}"
            );
            for group in &holding {
                assert!(
                    admitting.contains(group),
                    "tenant {tenant} has records in group {group}, which does not admit it"
                );
            }
            let settled = self.plans.get(&tenant).is_none_or(|p| p.steps.is_empty());
            if settled {
                assert_eq!(
                    admitting,
                    [self.home_group(tenant)],
                    "tenant {tenant}: the configuration and the admissions disagree"
                );
            }
        }
        for (&(tenant, key), &group) in &self.holder {
            let record = self.groups[group]
                .store
                .record(&target(tenant, key))
                .unwrap();
            assert!(record.is_some(), "{tenant}/{key} lost from group {group}");
        }
    }
}

/// Runs the steps, checking the invariants after each one.
fn run(steps: &[Step]) -> World {
    let mut world = World::new();
    world.check();
    for step in steps {
        world.run(step);
        world.check();
    }
    world
}

fn sequential(log: &[(Command, Timestamp)]) -> MemoryStore {
    let mut store = MemoryStore::new();
    for (command, stamp) in log {
        apply(&mut store, command, *stamp).unwrap();
    }
    store
}

fn batched(log: &[(Command, Timestamp)], split: usize) -> MemoryStore {
    let mut store = MemoryStore::new();
    for chunk in log.chunks(split) {
        let mut overlay = Overlay::new(&store);
        for (command, stamp) in chunk {
            apply(&mut overlay, command, *stamp).unwrap();
        }
        let writes = overlay.into_writes();
        store.commit(writes).unwrap();
    }
    store
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn one_key_one_log(steps in prop::collection::vec(step(), 1..120)) {
        run(&steps);
    }

    #[test]
    fn batched_apply_equals_sequential_in_every_group(
        steps in prop::collection::vec(step(), 1..80),
        split in 1usize..8,
    ) {
        let world = run(&steps);
        for (group, log) in world.log.iter().enumerate() {
            let replayed = sequential(log);
            prop_assert!(replayed.dump() == world.groups[group].store.dump(), "group {}", group);
            prop_assert!(batched(log, split).dump() == replayed.dump(), "group {}", group);
        }
    }
}

/// The generator reaches the interesting cases: tenants do move (and are refused to), keys
/// are acquired in region groups and in the global group, stale routes get WRONG_GROUP,
/// records expire.
#[test]
fn the_generator_exercises_moves_and_refusals() {
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(step(), 60..120);
    let mut total = Stats::default();
    for _ in 0..200 {
        let steps = strategy.new_tree(&mut runner).unwrap().current();
        let stats = run(&steps).stats;
        total.moves_done += stats.moves_done;
        total.moves_refused += stats.moves_refused;
        total.acquired_in_regions += stats.acquired_in_regions;
        total.acquired_in_global += stats.acquired_in_global;
        total.wrong_group += stats.wrong_group;
        total.expired += stats.expired;
    }
    assert!(total.moves_done >= 100, "{total:?}");
    assert!(total.moves_refused >= 20, "{total:?}");
    assert!(total.acquired_in_regions >= 100, "{total:?}");
    assert!(total.acquired_in_global >= 100, "{total:?}");
    assert!(total.wrong_group >= 100, "{total:?}");
    assert!(total.expired >= 20, "{total:?}");
}

/// One scripted walk through the protocol: global -> r1 -> r2 -> global, with a claim at
/// every group after every step.
#[test]
fn a_tenant_moves_through_every_group_while_it_has_no_records() {
    let mut world = World::new();
    let probe = |world: &mut World| -> Vec<bool> {
        (0..GROUPS)
            .map(|group| {
                let before = world.stats.wrong_group;
                world.groups[group].policy.retention = std::time::Duration::from_secs(1);
                // A claim that is then completed and expired, so the tenant stays movable.
                world.claim(0, 0, group, 0);
                let accepted = world.stats.wrong_group == before;
                if accepted {
                    world.run(&Step::Complete {
                        tenant: 0,
                        key: 0,
                        group,
                    });
                    world.now += 2_000;
                    world.run(&Step::Expire { group });
                }
                world.check();
                accepted
            })
            .collect()
    };
    assert_eq!(probe(&mut world), [true, false, false]);
    for (to, expected) in [
        (Some(0), [false, true, false]),
        (Some(1), [false, false, true]),
        (None, [true, false, false]),
    ] {
        world.plan(0, to);
        while world.plans[&0].steps.front().is_some() {
            world.progress(0);
            world.check();
            // Between the steps nobody decides the tenant, or its old group still does.
            let accepted = probe(&mut world);
            assert!(accepted.iter().filter(|a| **a).count() <= 1);
        }
        assert!(!world.plans[&0].aborted);
        assert_eq!(probe(&mut world), expected, "after moving to {to:?}");
    }
    assert_eq!(world.stats.moves_done, 3);
}
