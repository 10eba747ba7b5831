//! A Wing–Gong / Lowe linearizability search with memoisation.
//!
//! The history of one key becomes a list of call and return events in real-time order. The
//! search walks the list: at a call it tries to linearize that operation now (the model must
//! allow it, and the pair (set of linearized operations, state) must be new: Lowe's cache, which
//! turns the exponential search into one bounded by the distinct configurations, keyed by a
//! Zobrist hash of the set so memory stays flat however many operations a key has); at the return
//! of an operation not yet linearized it backtracks, because that operation had to take effect
//! before returning. Linearized operations are lifted out of the list (dancing links) so each
//! step is O(1) apart from the cache.
//!
//! Operations with an unknown outcome (`:info`, or never completed) may take effect at any point
//! after their call or never: their return event sits after every real event, and reaching one
//! means every operation that did return has been linearized, which is success.
//!
//! The search is bounded by a step count and a deadline and answers `Unknown` when either runs
//! out, so a pathological history costs a bounded time instead of hanging the checker.

use std::collections::HashSet;
use std::time::Instant;

use super::model::{step, Action, State};

/// One operation of a key, for the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOp {
    /// What it does to the register.
    pub action: Action,
    /// History position of its invocation.
    pub call: usize,
    /// History position of its `:ok` completion; `None` when it may never have taken effect.
    pub ret: Option<usize>,
}

/// Limits of one search.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Maximum number of search steps.
    pub max_steps: u64,
    /// Give up at this instant.
    pub deadline: Option<Instant>,
}

/// What the search concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A valid linearization exists.
    Linearizable {
        /// Steps taken.
        steps: u64,
    },
    /// No linearization exists. Describes the deepest point the search reached.
    NotLinearizable {
        /// Index (into the input) of the operation whose return could not be justified.
        stuck: usize,
        /// How many operations were linearized at that point.
        linearized: usize,
        /// The register's state at that point.
        state: State,
    },
    /// The limits ran out first.
    Unknown {
        /// Steps taken.
        steps: u64,
    },
}

const NIL: usize = usize::MAX;
const HEAD: usize = 0;

/// One event node of the list (node 0 is the head sentinel).
#[derive(Debug, Clone, Copy)]
struct Event {
    op: usize,
    is_call: bool,
    /// For a call: the node of its return.
    partner: usize,
    /// True for the return of an operation that may never have taken effect.
    open_ended: bool,
}

/// The doubly linked event list.
struct Events {
    nodes: Vec<Event>,
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl Events {
    fn build(ops: &[SearchOp]) -> Events {
        // (sort position, is_call, op); open-ended returns sort after every real event.
        let mut order: Vec<(usize, usize, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            order.push((op.call, 0, true, i));
            match op.ret {
                Some(r) => order.push((r, 0, false, i)),
                None => order.push((NIL, i, false, i)),
            }
        }
        order.sort_unstable();
        let sentinel = Event {
            op: NIL,
            is_call: false,
            partner: NIL,
            open_ended: false,
        };
        let mut nodes = vec![sentinel];
        let mut return_node = vec![NIL; ops.len()];
        for &(pos, _, is_call, op) in &order {
            if !is_call {
                return_node[op] = nodes.len();
            }
            nodes.push(Event {
                op,
                is_call,
                partner: NIL,
                open_ended: !is_call && pos == NIL,
            });
        }
        for node in nodes.iter_mut().skip(1).filter(|n| n.is_call) {
            node.partner = return_node[node.op];
        }
        let n = nodes.len();
        let next = (0..n)
            .map(|i| if i + 1 < n { i + 1 } else { NIL })
            .collect();
        let prev = (0..n).map(|i| i.wrapping_sub(1)).collect();
        Events { nodes, next, prev }
    }

    fn remove(&mut self, n: usize) {
        let (p, x) = (self.prev[n], self.next[n]);
        self.next[p] = x;
        if x != NIL {
            self.prev[x] = p;
        }
    }

    fn reinsert(&mut self, n: usize) {
        let (p, x) = (self.prev[n], self.next[n]);
        self.next[p] = n;
        if x != NIL {
            self.prev[x] = n;
        }
    }

    fn lift(&mut self, call: usize) {
        self.remove(call);
        self.remove(self.nodes[call].partner);
    }

    fn unlift(&mut self, call: usize) {
        self.reinsert(self.nodes[call].partner);
        self.reinsert(call);
    }
}

/// A set of operation indices, represented by its Zobrist hash: each operation has a random
/// 128-bit key and the set's hash is the XOR of its members' keys, updated in O(1) as operations
/// are linearized and undone. The cache stores hashes instead of bit sets, so its memory does not
/// grow with the number of operations of a key; two different sets collide with probability
/// about 2^-128 per pair, which could at worst prune one branch of the search.
#[derive(Debug, Clone)]
struct ZobristSet {
    keys: Vec<u128>,
    hash: u128,
}

impl ZobristSet {
    fn new(n: usize) -> ZobristSet {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let keys = (0..n)
            .map(|_| (u128::from(splitmix64(&mut seed)) << 64) | u128::from(splitmix64(&mut seed)))
            .collect();
        ZobristSet { keys, hash: 0 }
    }

    /// Adds or removes member `i` (XOR is its own inverse).
    fn toggle(&mut self, i: usize) {
        self.hash ^= self.keys[i];
    }
}

/// SplitMix64: a small, well-distributed deterministic generator (keys need no secrecy).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The search state.
struct Search<'a> {
    ops: &'a [SearchOp],
    events: Events,
    linearized: ZobristSet,
    cache: HashSet<(u128, State)>,
    /// Linearized calls, with the state before each.
    stack: Vec<(usize, State)>,
    state: State,
    steps: u64,
    /// Deepest failure seen: (depth, stuck op, state).
    deepest: Option<(usize, usize, State)>,
}

impl Search<'_> {
    /// Tries to linearize the call at `node`; true when it was.
    fn try_linearize(&mut self, node: usize) -> bool {
        let op = self.events.nodes[node].op;
        let Some(next_state) = step(self.state, self.ops[op].action) else {
            return false;
        };
        self.linearized.toggle(op);
        if !self.cache.insert((self.linearized.hash, next_state)) {
            self.linearized.toggle(op);
            return false;
        }
        self.stack.push((node, self.state));
        self.state = next_state;
        self.events.lift(node);
        true
    }

    /// Undoes the last linearization; returns the node to continue from, or `None` when there
    /// is nothing to undo.
    fn backtrack(&mut self, stuck: usize) -> Option<usize> {
        let depth = self.stack.len();
        if self.deepest.is_none_or(|(d, _, _)| depth > d) {
            self.deepest = Some((depth, stuck, self.state));
        }
        let (node, state) = self.stack.pop()?;
        self.state = state;
        self.linearized.toggle(self.events.nodes[node].op);
        self.events.unlift(node);
        Some(self.events.next[node])
    }

    fn out_of_budget(&self, limits: &Limits) -> bool {
        self.steps >= limits.max_steps
            || (self.steps.is_multiple_of(1024)
                && limits.deadline.is_some_and(|d| Instant::now() >= d))
    }

    fn run(&mut self, limits: &Limits) -> Verdict {
        let mut node = self.events.next[HEAD];
        loop {
            if node == NIL || self.events.nodes[node].open_ended {
                return Verdict::Linearizable { steps: self.steps };
            }
            if self.out_of_budget(limits) {
                return Verdict::Unknown { steps: self.steps };
            }
            self.steps += 1;
            let event = self.events.nodes[node];
            node = if !event.is_call {
                match self.backtrack(event.op) {
                    Some(n) => n,
                    None => return self.failure(),
                }
            } else if self.try_linearize(node) {
                self.events.next[HEAD]
            } else {
                self.events.next[node]
            };
        }
    }

    fn failure(&self) -> Verdict {
        let (linearized, stuck, state) = self.deepest.unwrap_or((0, 0, None));
        Verdict::NotLinearizable {
            stuck,
            linearized,
            state,
        }
    }
}

/// Searches for a linearization of `ops` starting from the empty register.
pub fn search(ops: &[SearchOp], limits: &Limits) -> Verdict {
    let mut s = Search {
        ops,
        events: Events::build(ops),
        linearized: ZobristSet::new(ops.len()),
        cache: HashSet::new(),
        stack: Vec::new(),
        state: None,
        steps: 0,
        deepest: None,
    };
    s.run(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_steps: 1_000_000,
        deadline: None,
    };

    fn ok(action: Action, call: usize, ret: usize) -> SearchOp {
        SearchOp {
            action,
            call,
            ret: Some(ret),
        }
    }

    fn info(action: Action, call: usize) -> SearchOp {
        SearchOp {
            action,
            call,
            ret: None,
        }
    }

    fn linearizable(ops: &[SearchOp]) -> bool {
        match search(ops, &LIMITS) {
            Verdict::Linearizable { .. } => true,
            Verdict::NotLinearizable { .. } => false,
            Verdict::Unknown { .. } => panic!("unknown"),
        }
    }

    #[test]
    fn sequential_write_then_read() {
        let w = ok(Action::Write(1), 0, 1);
        assert!(linearizable(&[w, ok(Action::Observe(Some(1)), 2, 3)]));
        assert!(!linearizable(&[w, ok(Action::Observe(None), 2, 3)]));
    }

    #[test]
    fn concurrent_reads_may_see_either_side_but_not_go_back() {
        let w = info(Action::Write(1), 0);
        let saw = ok(Action::Observe(Some(1)), 1, 2);
        let none_after = ok(Action::Observe(None), 3, 4);
        let none_before = ok(Action::Observe(None), 1, 2);
        let saw_after = ok(Action::Observe(Some(1)), 3, 4);
        assert!(linearizable(&[w, none_before, saw_after]));
        assert!(!linearizable(&[w, saw, none_after]));
    }

    #[test]
    fn an_info_write_may_never_happen_but_a_value_needs_a_writer() {
        assert!(linearizable(&[
            info(Action::Write(1), 0),
            ok(Action::Observe(None), 1, 2)
        ]));
        assert!(!linearizable(&[ok(Action::Observe(Some(7)), 1, 2)]));
    }

    #[test]
    fn two_different_acknowledged_writes_cannot_both_succeed() {
        let a = ok(Action::Write(1), 0, 2);
        let b = ok(Action::Write(2), 1, 3);
        assert!(!linearizable(&[a, b]));
        assert!(linearizable(&[a, ok(Action::Write(1), 1, 3)]));
    }

    #[test]
    fn reports_the_stuck_operation() {
        let ops = [
            ok(Action::Write(1), 0, 1),
            ok(Action::Observe(Some(1)), 2, 3),
            ok(Action::Observe(None), 4, 5),
        ];
        assert_eq!(
            search(&ops, &LIMITS),
            Verdict::NotLinearizable {
                stuck: 2,
                linearized: 2,
                state: Some(1)
            }
        );
    }

    #[test]
    fn budget_exhaustion_is_unknown() {
        // Many concurrent unknown writes of distinct values, then an impossible read.
        let mut ops: Vec<SearchOp> = (0..20)
            .map(|i| info(Action::Write(i), i as usize))
            .collect();
        ops.push(ok(Action::Observe(Some(99)), 100, 101));
        let tight = Limits {
            max_steps: 50,
            deadline: None,
        };
        assert!(matches!(search(&ops, &tight), Verdict::Unknown { .. }));
    }

    #[test]
    fn long_keys_stay_linear() {
        let mut ops = vec![ok(Action::Write(1), 0, 1)];
        ops.extend((1..50_000).map(|i| ok(Action::Observe(Some(1)), 2 * i, 2 * i + 1)));
        match search(&ops, &LIMITS) {
            Verdict::Linearizable { steps } => assert!(steps <= 2 * ops.len() as u64, "{steps}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn memoisation_keeps_wide_concurrency_cheap() {
        // 40 concurrent identical writes and reads: without the cache this explodes.
        let mut ops = Vec::new();
        for i in 0..40 {
            ops.push(ok(Action::Write(1), i, 100 + i));
            ops.push(ok(Action::Observe(Some(1)), 200 + i, 300 + i));
        }
        match search(&ops, &LIMITS) {
            Verdict::Linearizable { steps } => assert!(steps < 100_000, "{steps}"),
            other => panic!("{other:?}"),
        }
    }
}
