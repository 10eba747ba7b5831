//! The history of every call of the run, judged at the end.
//!
//! Every claim, completion and read of the scenario is an operation of `history.edn`, with
//! the partition as a fault window. Two things are judged over all of it: the scenario's own
//! promise — no key ACQUIRED twice and one operation id per key, whichever region asked and
//! whatever was cut off — and the jepsen checkers' (each key a linearizable write-once
//! register, acknowledged completions kept, fingerprints, fences; at-most-once from the
//! operation ids alone, there being no side-effect ledger here).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::report::Report;
use crate::checker::Validity;
use crate::history::{Outcome, Status, F};
use crate::{History, Results};

/// Keys named in full (all are counted).
const SHOWN: usize = 10;

/// What the history shows.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryVerdict {
    /// Client operations recorded.
    pub operations: u64,
    /// Of which the outcome is unknown.
    pub unknown_outcomes: u64,
    /// Distinct keys.
    pub keys: u64,
    /// Claims answered ACQUIRED.
    pub acquisitions: usize,
    /// Keys ACQUIRED more than once (count, then the first keys).
    pub acquired_twice: usize,
    /// Keys whose claims returned more than one operation id.
    pub several_operation_ids: usize,
    /// The first offending keys.
    pub shown: Vec<String>,
    /// Each jepsen checker's verdict.
    pub checkers: BTreeMap<String, String>,
    /// True when no checker found an anomaly.
    pub valid: bool,
}

impl HistoryVerdict {
    /// Judges `history`, which the jepsen checkers judged as `results`.
    pub fn of(history: &History, results: &Results) -> HistoryVerdict {
        let mut acquired: BTreeMap<String, usize> = BTreeMap::new();
        let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for op in &history.operations().operations {
            let (F::Claim, Status::Ok, Some(key)) = (&op.f, op.status, &op.key) else {
                continue;
            };
            if op.outcome == Some(Outcome::Acquired) {
                *acquired.entry(key.clone()).or_default() += 1;
            }
            if let Some(id) = &op.operation_id {
                ids.entry(key.clone()).or_default().insert(id.clone());
            }
        }
        let twice: Vec<&String> = acquired
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(k, _)| k)
            .collect();
        let several: Vec<&String> = ids
            .iter()
            .filter(|(_, s)| s.len() > 1)
            .map(|(k, _)| k)
            .collect();
        let offending: BTreeSet<&String> = twice.iter().chain(&several).copied().collect();
        let shown = offending.into_iter().take(SHOWN).cloned().collect();
        HistoryVerdict {
            operations: results.counts.operations,
            unknown_outcomes: results.counts.unknown_outcomes,
            keys: results.counts.keys,
            acquisitions: acquired.values().sum(),
            acquired_twice: twice.len(),
            several_operation_ids: several.len(),
            shown,
            checkers: results
                .checkers
                .iter()
                .map(|(name, r)| (name.clone(), verdict_name(r.valid).to_owned()))
                .collect(),
            valid: results.valid,
        }
    }

    /// Adds the history's checks to `report`.
    pub fn add_checks(&self, report: &mut Report) {
        report.check(
            "history",
            "no key is ever ACQUIRED twice, one operation id per key (every claim of the run)",
            self.acquired_twice == 0 && self.several_operation_ids == 0 && self.acquisitions > 0,
            format!(
                "{} acquisitions over {} keys; acquired twice: {}, several ids: {}{}",
                self.acquisitions,
                self.keys,
                self.acquired_twice,
                self.several_operation_ids,
                if self.shown.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", self.shown.join(", "))
                }
            ),
        );
        let verdicts: Vec<String> = self
            .checkers
            .iter()
            .map(|(name, v)| format!("{name} {v}"))
            .collect();
        report.check(
            "history",
            "the jepsen checkers find no anomaly in the history",
            self.valid,
            format!(
                "{} operations ({} unknown): {}",
                self.operations,
                self.unknown_outcomes,
                verdicts.join(", ")
            ),
        );
    }
}

fn verdict_name(validity: Validity) -> &'static str {
    match validity {
        Validity::Valid => "valid",
        Validity::Invalid => "INVALID",
        Validity::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_all;

    #[test]
    fn a_second_acquisition_of_a_key_is_found() {
        let history = History::parse(
            r#"{:type :invoke :process 0 :f :claim :value {:key "t/a" :body "c"}}
               {:type :ok :process 0 :f :claim :value {:key "t/a" :body "c" :outcome :acquired :operation-id "o1" :fence 1}}
               {:type :invoke :process 1 :f :claim :value {:key "t/a" :body "c"}}
               {:type :ok :process 1 :f :claim :value {:key "t/a" :body "c" :outcome :acquired :operation-id "o2" :fence 1}}
               {:type :invoke :process 2 :f :claim :value {:key "t/b" :body "c"}}
               {:type :ok :process 2 :f :claim :value {:key "t/b" :body "c" :outcome :acquired :operation-id "o3" :fence 1}}"#,
        )
        .unwrap();
        let verdict = HistoryVerdict::of(&history, &check_all(&history, None));
        assert_eq!((verdict.acquisitions, verdict.acquired_twice), (3, 1));
        assert_eq!(verdict.several_operation_ids, 1);
        assert_eq!(verdict.shown, ["t/a"]);
        assert!(!verdict.valid);
    }
}
