//! `at-most-once`: a key's side effect executes at most once.
//!
//! This is the store's reason to exist, and only the ledger sees side effects. Per key, the
//! ledger may hold at most one effective (non-duplicate) execution, and every call for the key
//! must carry the same operation id: a second operation id means two workers each believed they
//! owned a fresh intent, which a less forgiving downstream (one that does not deduplicate) would
//! have executed twice. The operation ids the store returned to claims in the history count too:
//! `operation_id` is generated at the first claim and stable across takeovers. Without a ledger
//! only that last part can be checked and the verdict is at best unknown.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{by_key, CheckInput, Checker, CheckerResult};
use crate::ledger::{Ledger, LedgerEntry};

/// The at-most-once-execution checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct AtMostOnce;

/// Operation ids seen for one key, with where they were seen.
#[derive(Default)]
struct KeyIds {
    ledger: BTreeSet<String>,
    history: BTreeSet<String>,
}

impl Checker for AtMostOnce {
    fn name(&self) -> &'static str {
        "at-most-once"
    }

    fn check(&self, input: &CheckInput<'_>) -> CheckerResult {
        let mut result = CheckerResult::new();
        let mut ids: BTreeMap<&str, KeyIds> = BTreeMap::new();
        for (key, ops) in by_key(input.operations) {
            let returned = ops.iter().filter(|op| op.is_ok());
            let history = returned.filter_map(|op| op.operation_id.clone()).collect();
            ids.entry(key).or_default().history = history;
        }
        match input.ledger {
            Some(ledger) => check_ledger(ledger, &mut ids, &mut result),
            None => result.unknown("no ledger: side-effect executions were not checked"),
        }
        check_ids(&ids, &mut result);
        result.add("keys", ids.len() as u64);
        result
    }
}

fn check_ledger<'a>(
    ledger: &'a Ledger,
    ids: &mut BTreeMap<&'a str, KeyIds>,
    result: &mut CheckerResult,
) {
    let mut per_key: BTreeMap<&str, Vec<&LedgerEntry>> = BTreeMap::new();
    for e in ledger.entries() {
        per_key.entry(e.key.as_str()).or_default().push(e);
    }
    for (key, entries) in per_key {
        let effective: Vec<&&LedgerEntry> = entries.iter().filter(|e| !e.duplicate).collect();
        result.add("executions", effective.len() as u64);
        result.add(
            "suppressed-duplicates",
            (entries.len() - effective.len()) as u64,
        );
        if effective.len() > 1 {
            result.anomaly(json!({
                "type": "multiple-executions",
                "key": key,
                "executions": effective.len(),
                "entries": effective.iter().take(5).map(|e| describe(e)).collect::<Vec<_>>(),
            }));
        }
        ids.entry(key).or_default().ledger =
            entries.iter().map(|e| e.operation_id.clone()).collect();
    }
    result.add("ledger-entries", ledger.entries().len() as u64);
}

fn check_ids(ids: &BTreeMap<&str, KeyIds>, result: &mut CheckerResult) {
    for (key, k) in ids {
        let all: BTreeSet<&String> = k.ledger.iter().chain(&k.history).collect();
        if all.len() > 1 {
            result.anomaly(json!({
                "type": "multiple-operation-ids",
                "key": key,
                "ledger-operation-ids": k.ledger,
                "history-operation-ids": k.history,
            }));
        }
    }
}

fn describe(e: &LedgerEntry) -> serde_json::Value {
    json!({
        "operation-id": e.operation_id,
        "fence": e.fence,
        "process": e.process.as_ref().map(ToString::to_string),
        "time": e.time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_support::{anomaly_types, assert_validity, run};
    use crate::checker::Validity;

    const HISTORY: &str = r#"
{:type :invoke :process 0 :f :claim :value {:key "k1" :body "b"}}
{:type :ok :process 0 :f :claim :value {:key "k1" :body "b" :outcome :acquired :operation-id "o1" :fence 1}}
{:type :invoke :process 1 :f :claim :value {:key "k1" :body "b"}}
{:type :ok :process 1 :f :claim :value {:key "k1" :body "b" :outcome :in-progress :operation-id "o1"}}
"#;

    #[test]
    fn one_execution_and_suppressed_duplicates_pass() {
        let ledger = r#"{:key "k1" :operation-id "o1" :fence 1 :duplicate false}
                        {:key "k1" :operation-id "o1" :fence 2 :duplicate true}"#;
        let r = run(&AtMostOnce, HISTORY, Some(ledger));
        assert_validity(&r, Validity::Valid);
        assert_eq!(r.counts["executions"], 1);
        assert_eq!(r.counts["suppressed-duplicates"], 1);
    }

    #[test]
    fn flags_a_double_execution() {
        let ledger = r#"{:key "k1" :operation-id "o1" :fence 1 :duplicate false}
                        {:key "k1" :operation-id "o1" :fence 2 :duplicate false}"#;
        let r = run(&AtMostOnce, HISTORY, Some(ledger));
        assert_validity(&r, Validity::Invalid);
        assert_eq!(anomaly_types(&r), ["multiple-executions"]);
    }

    #[test]
    fn flags_a_second_operation_id_even_if_deduplicated() {
        let ledger = r#"{:key "k1" :operation-id "o1" :duplicate false}
                        {:key "k1" :operation-id "o2" :duplicate true}"#;
        let r = run(&AtMostOnce, HISTORY, Some(ledger));
        assert_eq!(anomaly_types(&r), ["multiple-operation-ids"]);
    }

    #[test]
    fn without_a_ledger_the_verdict_is_unknown() {
        let r = run(&AtMostOnce, HISTORY, None);
        assert_validity(&r, Validity::Unknown);
    }
}
