//! Property tests: random interleavings of many workers on one key.
//!
//! Workers claim, start, record calls, renew, complete, fail, release and cancel with the
//! fences they were given, while the clock jumps forward by random amounts. Whatever the
//! interleaving: no two workers are ever accepted as owners at once, a terminal result never
//! changes, a mismatched fingerprint is never accepted, and apply is deterministic.

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::command::{Complete, ExternalCall, Fail, Fenced, RecordExternalCall, Renew};
use idem_core::store::Overlay;
use idem_core::testing::{Harness, BODY_A, BODY_B};
use idem_core::{apply, ClaimKind, Command, MemoryStore, Outcome, Risk, StateStore, Timestamp};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Claim { worker: u8, mismatched: bool },
    Start { worker: u8 },
    Calling { worker: u8 },
    Confirm { worker: u8 },
    Renew { worker: u8 },
    Complete { worker: u8 },
    Fail { worker: u8, retryable: bool },
    Release { worker: u8 },
    Cancel { worker: u8 },
    Advance { millis: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    let worker = 0u8..5;
    prop_oneof![
        4 => (worker.clone(), prop::bool::weighted(0.15))
            .prop_map(|(worker, mismatched)| Step::Claim { worker, mismatched }),
        1 => worker.clone().prop_map(|worker| Step::Start { worker }),
        1 => worker.clone().prop_map(|worker| Step::Calling { worker }),
        1 => worker.clone().prop_map(|worker| Step::Confirm { worker }),
        1 => worker.clone().prop_map(|worker| Step::Renew { worker }),
        2 => worker.clone().prop_map(|worker| Step::Complete { worker }),
        1 => (worker.clone(), any::<bool>()).prop_map(|(worker, retryable)| Step::Fail { worker, retryable }),
        1 => worker.clone().prop_map(|worker| Step::Release { worker }),
        1 => worker.prop_map(|worker| Step::Cancel { worker }),
        3 => (0u64..40_000).prop_map(|millis| Step::Advance { millis }),
    ]
}

/// Turns steps into commands, remembering the fence each worker was last given.
struct Driver {
    harness: Harness<MemoryStore>,
    fences: BTreeMap<u8, u64>,
}

impl Driver {
    fn new(risk: Risk) -> Self {
        let mut harness = Harness::new(MemoryStore::new());
        harness.policy.risk = risk;
        Driver {
            harness,
            fences: BTreeMap::new(),
        }
    }

    fn command(&mut self, step: &Step) -> Option<Command> {
        let key = Harness::<MemoryStore>::target("k");
        let owner = |fences: &BTreeMap<u8, u64>, worker: &u8| {
            fences.get(worker).map(|&fence| Fenced {
                target: key.clone(),
                fence,
            })
        };
        Some(match step {
            Step::Claim { worker, mismatched } => {
                let body = if *mismatched { BODY_B } else { BODY_A };
                self.harness
                    .claim_command(&key, body, &format!("w{worker}"))
            }
            Step::Start { worker } => Command::Start(owner(&self.fences, worker)?),
            Step::Calling { worker } => Command::RecordExternalCall(RecordExternalCall {
                owner: owner(&self.fences, worker)?,
                call: ExternalCall::Calling,
            }),
            Step::Confirm { worker } => Command::RecordExternalCall(RecordExternalCall {
                owner: owner(&self.fences, worker)?,
                call: ExternalCall::RemoteConfirmed {
                    remote_ref: format!("remote-{worker}"),
                },
            }),
            Step::Renew { worker } => Command::Renew(Renew {
                owner: owner(&self.fences, worker)?,
                lease: None,
            }),
            Step::Complete { worker } => Command::Complete(Complete {
                owner: owner(&self.fences, worker)?,
                result: Harness::<MemoryStore>::result(&format!("by-w{worker}")),
            }),
            Step::Fail { worker, retryable } => Command::Fail(Fail {
                owner: owner(&self.fences, worker)?,
                retryable: *retryable,
                error: Harness::<MemoryStore>::error("boom"),
            }),
            Step::Release { worker } => Command::Release(owner(&self.fences, worker)?),
            Step::Cancel { worker } => Command::Cancel(owner(&self.fences, worker)?),
            Step::Advance { millis } => {
                self.harness.now += millis;
                return None;
            }
        })
    }

    fn worker_of(step: &Step) -> Option<u8> {
        match step {
            Step::Claim { worker, .. }
            | Step::Start { worker }
            | Step::Calling { worker }
            | Step::Confirm { worker }
            | Step::Renew { worker }
            | Step::Complete { worker }
            | Step::Fail { worker, .. }
            | Step::Release { worker }
            | Step::Cancel { worker } => Some(*worker),
            Step::Advance { .. } => None,
        }
    }
}

/// Runs the steps and checks every invariant after each one. Returns the commands and
/// stamps applied, for the determinism properties.
fn run(steps: &[Step], risk: Risk) -> Vec<(Command, Timestamp)> {
    let mut driver = Driver::new(risk);
    let key = Harness::<MemoryStore>::target("k");
    let mut applied = Vec::new();
    let mut owner_fence = 0u64;
    let mut stored_body: Option<u8> = None;
    let mut terminal: Option<idem_core::Record> = None;
    for step in steps {
        let Some(command) = driver.command(step) else {
            continue;
        };
        let before = driver.harness.record(&key);
        let stamp = Timestamp(driver.harness.now);
        let outcome = driver.harness.apply(command.clone());
        applied.push((command, stamp));
        let worker = Driver::worker_of(step).unwrap();
        match (&outcome, step) {
            (Outcome::Claim(claim), Step::Claim { mismatched, .. }) => {
                let body = if *mismatched { BODY_B } else { BODY_A };
                let stored = *stored_body.get_or_insert(body);
                let is_mismatch = claim.kind == ClaimKind::FingerprintMismatch;
                assert_eq!(
                    is_mismatch,
                    body != stored,
                    "fingerprint decision: {claim:?}"
                );
                let in_flight = before
                    .as_ref()
                    .is_some_and(|r| r.state.is_active() && r.stage == idem_core::Stage::Calling);
                if risk == Risk::High && in_flight && !claim.redelivered {
                    assert_ne!(
                        claim.kind,
                        ClaimKind::TakenOver,
                        "high-risk call taken over"
                    );
                }
                if claim.kind.owns() {
                    let fence = claim.record.fence;
                    assert!(
                        fence > owner_fence || (claim.redelivered && fence == owner_fence),
                        "fence {fence} handed out after {owner_fence}"
                    );
                    owner_fence = fence;
                    driver.fences.insert(worker, fence);
                }
            }
            (Outcome::Record(_), _) => {
                // A worker mutation was accepted: it must come from the current owner.
                assert_eq!(
                    driver.fences.get(&worker),
                    Some(&owner_fence),
                    "two live owners"
                );
            }
            _ => {}
        }
        let record = driver.harness.record(&key);
        if let Some(done) = &terminal {
            assert_eq!(record.as_ref(), Some(done), "terminal record changed");
        } else if let Some(record) = record.clone().filter(|r| r.state.is_terminal()) {
            terminal = Some(record);
        }
        if let Some(record) = record {
            assert_eq!(
                record.fence, owner_fence,
                "every new fence is an acquisition"
            );
        }
    }
    applied
}

fn replay(commands: &[(Command, Timestamp)]) -> MemoryStore {
    let mut store = MemoryStore::new();
    for (command, stamp) in commands {
        apply(&mut store, command, *stamp).unwrap();
    }
    store
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn invariants_hold_for_normal_risk(steps in prop::collection::vec(step(), 1..80)) {
        run(&steps, Risk::Normal);
    }

    #[test]
    fn invariants_hold_for_high_risk(steps in prop::collection::vec(step(), 1..80)) {
        run(&steps, Risk::High);
    }

    #[test]
    fn apply_is_deterministic(steps in prop::collection::vec(step(), 1..60)) {
        let commands = run(&steps, Risk::Normal);
        prop_assert_eq!(replay(&commands).dump(), replay(&commands).dump());
    }

    #[test]
    fn batched_apply_equals_sequential(steps in prop::collection::vec(step(), 1..60), split in 1usize..8) {
        let commands = run(&steps, Risk::Normal);
        let sequential = replay(&commands);
        let mut batched = MemoryStore::new();
        for chunk in commands.chunks(split) {
            let mut overlay = Overlay::new(&batched);
            for (command, stamp) in chunk {
                apply(&mut overlay, command, *stamp).unwrap();
            }
            let writes = overlay.into_writes();
            batched.commit(writes).unwrap();
        }
        prop_assert_eq!(sequential.dump(), batched.dump());
    }
}

#[test]
fn lease_expiry_boundary_is_exclusive() {
    let mut h = Harness::new(MemoryStore::new());
    let key = Harness::<MemoryStore>::target("k");
    h.acquire(&key, "w1");
    h.advance(Duration::from_millis(29_999));
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::InProgress);
    h.advance(Duration::from_millis(1));
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
}
