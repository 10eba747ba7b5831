//! `acknowledged`: an acknowledged completion is never lost or changed.
//!
//! Once the store told a worker "completed with v" (a `:complete` that returned `:ok`, or a claim
//! that returned `:completed` with v), every later retry must be answered with v: that is what
//! makes the retry safe. "Later" is real time: the observing operation was invoked after the
//! acknowledgement's completion entry. An observation of another result is a changed
//! acknowledgement; an observation of no record or of a non-terminal state (a read, or a claim
//! that acquired, took over, or found the key in progress) is a lost acknowledgement, typically a
//! write acknowledged before it was durable on a quorum. A later `:complete` with another value
//! that returned `:ok` is a changed acknowledgement too.

use serde_json::json;

use super::{
    by_key, observation, reconciled_result, CheckInput, Checker, CheckerResult, Observation,
};
use crate::history::{Operation, Outcome, Value, F};

/// The no-lost-acknowledgement checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Acknowledged;

/// The result an operation acknowledged as stored, if it acknowledged one.
fn acknowledged_result(op: &Operation) -> Option<Value> {
    if !op.is_ok() {
        return None;
    }
    match op.f {
        F::Complete => Some(op.result.clone().unwrap_or(Value::Nil)),
        F::Claim if op.outcome == Some(Outcome::Completed) => {
            Some(op.result.clone().unwrap_or(Value::Nil))
        }
        F::Reconcile => reconciled_result(op),
        _ => None,
    }
}

/// What an operation says about the key's completion: an acknowledged result or an observation.
fn seen(op: &Operation) -> Option<Observation> {
    match acknowledged_result(op) {
        Some(v) => Some(Observation::Completed(v)),
        None => observation(op),
    }
}

impl Checker for Acknowledged {
    fn name(&self) -> &'static str {
        "acknowledged"
    }

    fn check(&self, input: &CheckInput<'_>) -> CheckerResult {
        let mut result = CheckerResult::new();
        for (key, ops) in by_key(input.operations) {
            check_key(key, &ops, &mut result);
        }
        result
    }
}

fn check_key(key: &str, ops: &[&Operation], result: &mut CheckerResult) {
    let mut acks: Vec<(&Operation, Value)> = ops
        .iter()
        .filter_map(|op| acknowledged_result(op).map(|v| (*op, v)))
        .collect();
    if acks.is_empty() {
        return;
    }
    acks.sort_by_key(|(op, _)| op.completion);
    result.add("acknowledged", acks.len() as u64);
    result.add("keys-with-acknowledgements", 1);
    for op in ops {
        let Some(seen) = seen(op) else { continue };
        // The earliest acknowledgement that finished before this operation began.
        let Some((ack, value)) = acks.iter().find(|(ack, _)| ack.precedes(op)) else {
            continue;
        };
        result.add("observations-after-acknowledgement", 1);
        let kind = match &seen {
            Observation::Completed(v) if v == value => continue,
            Observation::Completed(_) => "changed-acknowledgement",
            Observation::NotCompleted(_) => "lost-acknowledgement",
        };
        result.anomaly(json!({
            "type": kind,
            "key": key,
            "acknowledged": value.to_ident(),
            "observed": match &seen {
                Observation::Completed(v) => v.to_ident(),
                Observation::NotCompleted(what) => what.clone(),
            },
            "acknowledgement": ack.describe(),
            "op": op.describe(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_support::{anomaly_types, assert_validity, run};
    use crate::checker::Validity;

    const ACK: &str = r#"
{:type :invoke :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"}}
{:type :ok :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"}}
"#;

    fn with_ack(rest: &str) -> String {
        format!("{ACK}{rest}")
    }

    #[test]
    fn later_reads_and_replays_of_the_same_result_pass() {
        let h = with_ack(
            r#"{:type :invoke :process 1 :f :read :value {:key "k"}}
               {:type :ok :process 1 :f :read :value {:key "k" :state :completed :result "r1"}}
               {:type :invoke :process 2 :f :claim :value {:key "k" :body "b"}}
               {:type :ok :process 2 :f :claim :value {:key "k" :body "b" :outcome :completed :result "r1"}}
               {:type :invoke :process 3 :f :read :value {:key "k"}}
               {:type :info :process 3 :f :read :value {:key "k"} :error :timeout}"#,
        );
        let r = run(&Acknowledged, &h, None);
        assert_validity(&r, Validity::Valid);
        assert_eq!(r.counts["observations-after-acknowledgement"], 2);
    }

    #[test]
    fn flags_a_lost_acknowledgement() {
        let h = with_ack(
            r#"{:type :invoke :process 1 :f :read :value {:key "k"}}
               {:type :ok :process 1 :f :read :value {:key "k" :state nil :result nil}}"#,
        );
        let r = run(&Acknowledged, &h, None);
        assert_validity(&r, Validity::Invalid);
        assert_eq!(anomaly_types(&r), ["lost-acknowledgement"]);
    }

    #[test]
    fn flags_a_claim_that_acquires_an_acknowledged_key() {
        let h = with_ack(
            r#"{:type :invoke :process 1 :f :claim :value {:key "k" :body "b"}}
               {:type :ok :process 1 :f :claim :value {:key "k" :body "b" :outcome :taken-over :fence 2}}"#,
        );
        assert_eq!(
            anomaly_types(&run(&Acknowledged, &h, None)),
            ["lost-acknowledgement"]
        );
    }

    #[test]
    fn flags_a_changed_acknowledgement() {
        let h = with_ack(
            r#"{:type :invoke :process 1 :f :claim :value {:key "k" :body "b"}}
               {:type :ok :process 1 :f :claim :value {:key "k" :body "b" :outcome :completed :result "r2"}}
               {:type :invoke :process 2 :f :complete :value {:key "k" :fence 1 :result "r3"}}
               {:type :ok :process 2 :f :complete :value {:key "k" :fence 1 :result "r3"}}"#,
        );
        let r = run(&Acknowledged, &h, None);
        assert_eq!(r.anomaly_count, 2);
        assert_eq!(anomaly_types(&r), ["changed-acknowledgement"; 2]);
    }

    #[test]
    fn concurrent_observations_are_not_judged_here() {
        // The read overlaps the acknowledgement: linearizability judges it, not this checker.
        let h = r#"
{:type :invoke :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"}}
{:type :invoke :process 1 :f :read :value {:key "k"}}
{:type :ok :process 0 :f :complete :value {:key "k" :fence 1 :result "r1"}}
{:type :ok :process 1 :f :read :value {:key "k" :state :pending :result nil}}"#;
        assert_validity(&run(&Acknowledged, h, None), Validity::Valid);
    }
}
