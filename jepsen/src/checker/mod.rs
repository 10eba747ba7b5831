//! Checkers: each one turns a history (and the side-effect ledger) into a verdict.
//!
//! They encode the store's promises (docs/design.md §2, §5): at most one side effect per key, no
//! acknowledged completion lost or changed, per-key linearizability of the record as a
//! write-once register, fingerprint mismatches never accepted, stale fences never applied. Each
//! is independent and cheap except `linearizable`, whose search is bounded and answers
//! [`Validity::Unknown`] rather than hang. [`check_all`] runs them all and assembles
//! [`Results`].

mod acknowledged;
mod at_most_once;
mod fencing;
mod fingerprint;
mod linearizable;
mod outcome;
mod reconciliation;

use std::collections::BTreeMap;

use crate::history::{History, Operation, Value, F};
use crate::ledger::Ledger;
use crate::results::{Counts, Results};

pub use acknowledged::Acknowledged;
pub use at_most_once::AtMostOnce;
pub use fencing::Fencing;
pub use fingerprint::Fingerprint;
pub use linearizable::{Linearizable, SearchBudget};
pub use outcome::{CheckerResult, Validity};
pub use reconciliation::Reconciliation;

/// How many anomalies a checker reports in full (all are counted).
pub const MAX_REPORTED_ANOMALIES: usize = 10;

/// What a checker looks at.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    /// The whole history (nemesis entries included).
    pub history: &'a History,
    /// The client operations, paired, in invocation order.
    pub operations: &'a [Operation],
    /// The side-effect ledger, when the test had one.
    pub ledger: Option<&'a Ledger>,
}

/// One property checked over a history.
pub trait Checker {
    /// The name under which the result is reported (`"at-most-once"`, ...).
    fn name(&self) -> &'static str;
    /// Checks the property.
    fn check(&self, input: &CheckInput<'_>) -> CheckerResult;
}

/// Tuning of [`check_all_with`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Search limits of the linearizability checker.
    pub linearizable: SearchBudget,
}

/// Runs every checker with default options.
pub fn check_all(history: &History, ledger: Option<&Ledger>) -> Results {
    check_all_with(history, ledger, &Options::default())
}

/// Runs every checker. The top-level verdict is false when any checker found an anomaly;
/// `unknown` verdicts (budget exhausted, no ledger) do not make it false.
pub fn check_all_with(history: &History, ledger: Option<&Ledger>, options: &Options) -> Results {
    let pairing = history.operations();
    let input = CheckInput {
        history,
        operations: &pairing.operations,
        ledger,
    };
    let checkers: Vec<Box<dyn Checker>> = vec![
        Box::new(AtMostOnce),
        Box::new(Acknowledged),
        Box::new(Linearizable {
            budget: options.linearizable.clone(),
        }),
        Box::new(Fingerprint),
        Box::new(Fencing),
        Box::new(Reconciliation),
    ];
    let results: BTreeMap<String, CheckerResult> = checkers
        .iter()
        .map(|c| (c.name().to_string(), c.check(&input)))
        .collect();
    Results {
        valid: results.values().all(|r| r.valid != Validity::Invalid),
        counts: Counts::of(history, &pairing),
        checkers: results,
    }
}

/// The client operations grouped by `:key` (operations without a key are left out).
pub(crate) fn by_key(operations: &[Operation]) -> BTreeMap<&str, Vec<&Operation>> {
    let mut map: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in operations {
        if let Some(key) = op.key.as_deref() {
            map.entry(key).or_default().push(op);
        }
    }
    map
}

/// The result a reconcile stores, when it moves the record to `COMPLETED` (a reconcile to
/// another state stores none).
pub(crate) fn reconciled_result(op: &Operation) -> Option<Value> {
    let completed = op.state.as_deref() == Some("completed");
    (op.f == F::Reconcile && completed).then(|| op.result.clone().unwrap_or(Value::Nil))
}

/// What an `:ok` operation saw of a key's completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Observation {
    /// The key is completed with this result (`nil` when it stores none).
    Completed(Value),
    /// The key is not completed; the text says what was seen instead (`"no record"`,
    /// `"in-progress"`, a claim outcome such as `"acquired"`).
    NotCompleted(String),
}

/// The observation an operation made, if it made one: reads that completed ok, and claims that
/// completed ok with an outcome that reveals the record's state. A claim refused for its
/// fingerprint reveals nothing.
pub(crate) fn observation(op: &Operation) -> Option<Observation> {
    use crate::history::Outcome;
    if !op.is_ok() {
        return None;
    }
    let result = || op.result.clone().unwrap_or(Value::Nil);
    match op.f {
        F::Read => {
            let state = op
                .state
                .as_deref()
                .map(|s| s.to_ascii_lowercase().replace('_', "-"));
            match state.as_deref() {
                Some("completed") => Some(Observation::Completed(result())),
                None if op.result.is_some() => Some(Observation::Completed(result())),
                None => Some(Observation::NotCompleted("no record".into())),
                Some(other) => Some(Observation::NotCompleted(other.to_string())),
            }
        }
        F::Claim => match op.outcome.as_ref()? {
            Outcome::Completed => Some(Observation::Completed(result())),
            o @ (Outcome::Acquired
            | Outcome::TakenOver
            | Outcome::InProgress
            | Outcome::NeedsReconciliation
            | Outcome::Failed) => Some(Observation::NotCompleted(o.name().to_string())),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Helpers to write checker tests as compact EDN histories.

    use super::*;

    /// Parses an EDN history and runs one checker over it.
    pub fn run(checker: &dyn Checker, history: &str, ledger: Option<&str>) -> CheckerResult {
        let history = History::parse(history).unwrap();
        let ledger = ledger.map(|l| Ledger::parse(l).unwrap());
        let pairing = history.operations();
        checker.check(&CheckInput {
            history: &history,
            operations: &pairing.operations,
            ledger: ledger.as_ref(),
        })
    }

    /// Asserts a verdict, printing the result on failure.
    pub fn assert_validity(result: &CheckerResult, expected: Validity) {
        assert_eq!(
            result.valid,
            expected,
            "{}",
            serde_json::to_string_pretty(result).unwrap()
        );
    }

    /// The `type` field of each reported anomaly.
    pub fn anomaly_types(result: &CheckerResult) -> Vec<String> {
        result
            .anomalies
            .iter()
            .map(|a| a["type"].as_str().unwrap_or("").to_string())
            .collect()
    }
}
