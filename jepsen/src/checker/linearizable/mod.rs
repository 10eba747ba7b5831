//! `linearizable`: each key behaves like a single, atomic write-once register.
//!
//! The other checkers test specific promises; this one tests all orderings at once: is there a
//! single order of the key's operations, consistent with real time, in which every `:ok`
//! operation saw what a write-once register would have shown? Keys are independent (each is
//! decided in one Raft log), so each is searched separately, which keeps the search small.
//!
//! Per key: a `:complete` that returned `:ok`, or whose outcome is unknown, is a write of its
//! result (`:fail` ones took no effect and are left out); a read `:ok` observes `Some(result)`
//! when its state is completed and `None` otherwise; a claim `:ok` observes `Some(result)` when
//! `:completed` and `None` when it acquired, took over, found the key in progress or needing
//! reconciliation. Claims refused for their fingerprint, calls and unknown reads observe nothing.
//! When the search budget runs out the key is reported unknown: not a failure, but reported.

mod model;
mod search;

use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    by_key, observation, reconciled_result, CheckInput, Checker, CheckerResult, Observation,
};
use crate::history::{Operation, Status, Value, F};
use model::{Action, State};
use search::{search, Limits, SearchOp, Verdict};

/// Bounds on the linearizability search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchBudget {
    /// Search steps allowed per key.
    pub max_steps_per_key: u64,
    /// Wall-clock time allowed for all keys together.
    pub time_limit: Duration,
}

impl Default for SearchBudget {
    fn default() -> Self {
        SearchBudget {
            max_steps_per_key: 2_000_000,
            time_limit: Duration::from_secs(60),
        }
    }
}

/// The per-key linearizability checker.
#[derive(Debug, Clone, Default)]
pub struct Linearizable {
    /// Search limits.
    pub budget: SearchBudget,
}

/// Keys listed by name in the note about unknown keys.
const NAMED_UNKNOWN_KEYS: usize = 5;

/// One key's operations translated for the search, with the result values interned.
struct KeyModel<'a> {
    ops: Vec<SearchOp>,
    sources: Vec<&'a Operation>,
    values: Vec<Value>,
}

impl<'a> KeyModel<'a> {
    fn build(ops: &[&'a Operation]) -> KeyModel<'a> {
        let mut model = KeyModel {
            ops: Vec::new(),
            sources: Vec::new(),
            values: Vec::new(),
        };
        for op in ops {
            if let Some(action) = model.action(op) {
                let ret = if op.is_ok() { op.completion } else { None };
                model.ops.push(SearchOp {
                    action,
                    call: op.invoke,
                    ret,
                });
                model.sources.push(op);
            }
        }
        model
    }

    fn intern(&mut self, v: Value) -> u32 {
        match self.values.iter().position(|x| *x == v) {
            Some(i) => i as u32,
            None => {
                self.values.push(v);
                (self.values.len() - 1) as u32
            }
        }
    }

    fn action(&mut self, op: &Operation) -> Option<Action> {
        if op.f == F::Complete {
            return match op.status {
                Status::Fail => None,
                _ => Some(Action::Write(
                    self.intern(op.result.clone().unwrap_or(Value::Nil)),
                )),
            };
        }
        // A reconcile to COMPLETED writes its result as a complete does; one to another state
        // leaves the register uncompleted, as it was.
        if op.f == F::Reconcile {
            let written = reconciled_result(op).filter(|_| op.status != Status::Fail);
            return written.map(|v| Action::Write(self.intern(v)));
        }
        Some(Action::Observe(match observation(op)? {
            Observation::Completed(v) => Some(self.intern(v)),
            Observation::NotCompleted(_) => None,
        }))
    }

    fn render(&self, state: State) -> String {
        state.map_or("nil (not completed)".to_string(), |i| {
            self.values[i as usize].to_ident()
        })
    }
}

impl Checker for Linearizable {
    fn name(&self) -> &'static str {
        "linearizable"
    }

    fn check(&self, input: &CheckInput<'_>) -> CheckerResult {
        let mut result = CheckerResult::new();
        let deadline = Instant::now() + self.budget.time_limit;
        let mut unknown_keys = Vec::new();
        for (key, ops) in by_key(input.operations) {
            let model = KeyModel::build(&ops);
            if model.ops.is_empty() {
                continue;
            }
            result.add("keys", 1);
            result.add("operations", model.ops.len() as u64);
            let limits = Limits {
                max_steps: self.budget.max_steps_per_key,
                deadline: Some(deadline),
            };
            match search(&model.ops, &limits) {
                Verdict::Linearizable { steps } => result.add("search-steps", steps),
                Verdict::Unknown { steps } => {
                    result.add("search-steps", steps);
                    result.add("keys-unknown", 1);
                    unknown_keys.push(key);
                }
                Verdict::NotLinearizable {
                    stuck,
                    linearized,
                    state,
                } => report(&mut result, key, &model, stuck, linearized, state),
            }
        }
        note_unknown(&mut result, &unknown_keys);
        result
    }
}

fn report(
    result: &mut CheckerResult,
    key: &str,
    model: &KeyModel<'_>,
    stuck: usize,
    linearized: usize,
    state: State,
) {
    let by_status = |s: Status| model.sources.iter().filter(|o| o.status == s).count();
    result.anomaly(json!({
        "type": "non-linearizable",
        "key": key,
        "op": model.sources[stuck].describe(),
        "state-before-op": model.render(state),
        "linearized-before-failure": linearized,
        "key-operations": { "ok": by_status(Status::Ok), "info": by_status(Status::Unknown) },
    }));
}

fn note_unknown(result: &mut CheckerResult, keys: &[&str]) {
    if keys.is_empty() {
        return;
    }
    let named: Vec<&str> = keys.iter().take(NAMED_UNKNOWN_KEYS).copied().collect();
    result.unknown(format!(
        "search budget exhausted for {} key(s), e.g. {}",
        keys.len(),
        named.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_support::{anomaly_types, assert_validity, run};
    use crate::checker::Validity;

    #[test]
    fn flags_a_read_that_goes_back_in_time() {
        // The completion is still in flight (never acknowledged), so only linearizability sees
        // that a read observed it and a later read did not.
        let h = r#"
{:type :invoke :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"}}
{:type :invoke :process 1 :f :read :value {:key "k"}}
{:type :ok :process 1 :f :read :value {:key "k" :state :completed :result "r1"}}
{:type :invoke :process 2 :f :read :value {:key "k"}}
{:type :ok :process 2 :f :read :value {:key "k" :state :in-progress :result nil}}
{:type :info :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"} :error :timeout}"#;
        let r = run(&Linearizable::default(), h, None);
        assert_eq!(anomaly_types(&r), ["non-linearizable"]);
        assert_eq!(r.anomalies[0]["op"]["process"], "2");
    }

    #[test]
    fn flags_a_value_nobody_wrote() {
        let h = r#"
{:type :invoke :process 1 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 1 :f :claim :value {:key "k" :body "b" :outcome :completed :result "ghost"}}"#;
        assert_validity(&run(&Linearizable::default(), h, None), Validity::Invalid);
    }

    #[test]
    fn unknown_completions_and_crashed_processes_are_fine() {
        let h = r#"
{:type :invoke :process 0 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 0 :f :claim :value {:key "k" :body "b" :outcome :acquired :fence 1}}
{:type :invoke :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"}}
{:type :invoke :process 1 :f :read :value {:key "k"}}
{:type :ok :process 1 :f :read :value {:key "k" :state :in-progress :result nil}}
{:type :invoke :process 2 :f :read :value {:key "k"}}
{:type :ok :process 2 :f :read :value {:key "k" :state :completed :result "r1"}}
{:type :invoke :process 3 :f :complete :value {:key "k" :fence 1 :result "r2"}}
{:type :fail :process 3 :f :complete :value {:key "k" :fence 1 :result "r2"} :error :already-completed}
{:type :invoke :process 4 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 4 :f :claim :value {:key "k" :body "b" :outcome :completed :result "r1"}}"#;
        let r = run(&Linearizable::default(), h, None);
        assert_validity(&r, Validity::Valid);
        assert_eq!(r.counts["operations"], 5);
    }

    #[test]
    fn exhausted_budget_is_unknown_not_invalid() {
        let mut h = String::new();
        for p in 0..12 {
            h += &format!(
                "{{:type :invoke :process {p} :f :complete :value {{:key \"k\" :fence 1 :result \"r{p}\"}}}}\n"
            );
        }
        h += r#"{:type :invoke :process 99 :f :read :value {:key "k"}}
{:type :ok :process 99 :f :read :value {:key "k" :state :completed :result "nobody"}}"#;
        let checker = Linearizable {
            budget: SearchBudget {
                max_steps_per_key: 10,
                time_limit: Duration::from_secs(10),
            },
        };
        let r = run(&checker, &h, None);
        assert_validity(&r, Validity::Unknown);
        assert_eq!(r.counts["keys-unknown"], 1);
    }
}
