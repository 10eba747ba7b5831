//! The results of checking one history: a verdict per checker and counts.
//!
//! Written as `results.json` (and `results.edn`, as Jepsen does) next to the history, and printed
//! by `idem-jepsen check`. The counts say how much the verdicts rest on: a "valid" over a
//! history with no faults and no unknown outcomes proves little, so both are reported.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::checker::{CheckerResult, Validity};
use crate::history::{self, json, History, HistoryError, Pairing, Status, Value};

/// Entry counts of one `:f`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TypeCounts {
    /// Completed `:ok`.
    pub ok: u64,
    /// Completed `:fail`.
    pub fail: u64,
    /// Completed `:info` (outcome unknown).
    pub info: u64,
    /// Never completed (crashed process or history cut short; outcome unknown).
    pub pending: u64,
}

/// Counts over the whole history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Counts {
    /// History entries (client and nemesis).
    pub entries: u64,
    /// Client operations (invocations).
    pub operations: u64,
    /// Client operations by `:f`.
    pub by_f: BTreeMap<String, TypeCounts>,
    /// Operations whose outcome is unknown (`:info` or never completed).
    pub unknown_outcomes: u64,
    /// Nemesis entries.
    pub nemesis_ops: u64,
    /// Faults injected (fault windows and point events).
    pub faults: u64,
    /// Faults injected by kind.
    pub faults_by_kind: BTreeMap<String, u64>,
    /// Distinct keys touched by client operations.
    pub keys: u64,
    /// Completion entries with no invocation (ignored).
    pub orphan_completions: u64,
}

impl Counts {
    /// Counts `history`, whose client operations are `pairing`.
    pub fn of(history: &History, pairing: &Pairing) -> Counts {
        let mut c = Counts {
            entries: history.len() as u64,
            operations: pairing.operations.len() as u64,
            orphan_completions: pairing.orphans as u64,
            ..Counts::default()
        };
        let mut keys = std::collections::BTreeSet::new();
        for op in &pairing.operations {
            let t = c.by_f.entry(op.f.name().to_string()).or_default();
            match (op.status, op.completion) {
                (Status::Ok, _) => t.ok += 1,
                (Status::Fail, _) => t.fail += 1,
                (Status::Unknown, Some(_)) => t.info += 1,
                (Status::Unknown, None) => t.pending += 1,
            }
            if op.status == Status::Unknown {
                c.unknown_outcomes += 1;
            }
            keys.extend(op.key.as_deref());
        }
        c.keys = keys.len() as u64;
        c.nemesis_ops = history.ops().iter().filter(|op| !op.is_client()).count() as u64;
        for w in history.fault_windows() {
            c.faults += 1;
            *c.faults_by_kind.entry(w.kind).or_default() += 1;
        }
        c
    }
}

/// The outcome of checking one history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Results {
    /// True when no checker found an anomaly (unknown verdicts do not count against it).
    pub valid: bool,
    /// Counts over the history.
    pub counts: Counts,
    /// Each checker's result, by name.
    pub checkers: BTreeMap<String, CheckerResult>,
}

impl Results {
    /// The results as JSON (`results.json`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The results as pretty-printed JSON text (fields in declaration order: `valid` first).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The results as EDN (`results.edn`): keys are keywords, `"unknown"` verdicts `:unknown`.
    pub fn to_edn(&self) -> String {
        let mut v = json::from_json(&self.to_json());
        keywordize_unknown(&mut v);
        v.to_string() + "\n"
    }

    /// Writes `results.json` and `results.edn` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), HistoryError> {
        history::write_text(&dir.join("results.json"), &(self.to_json_pretty() + "\n"))?;
        history::write_text(&dir.join("results.edn"), &self.to_edn())
    }

    /// A few human-readable lines: the verdict of each checker and the main counts.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for (name, r) in &self.checkers {
            let verdict = match r.valid {
                Validity::Valid => "valid",
                Validity::Invalid => "INVALID",
                Validity::Unknown => "unknown",
            };
            let _ = writeln!(
                out,
                "{name:<14} {verdict:<8} anomalies: {}",
                r.anomaly_count
            );
            for note in &r.notes {
                let _ = writeln!(out, "{:<14} note: {note}", "");
            }
        }
        let c = &self.counts;
        let _ = writeln!(
            out,
            "operations: {}, unknown outcomes: {}, faults injected: {}, keys: {}",
            c.operations, c.unknown_outcomes, c.faults, c.keys
        );
        let _ = writeln!(out, "valid: {}", self.valid);
        out
    }
}

/// Turns every `"valid": "unknown"` string into the keyword `:unknown`.
fn keywordize_unknown(v: &mut Value) {
    if let Value::Map(map) = v {
        for (k, val) in map.iter_mut() {
            if k.as_name() == Some("valid") && val.as_name() == Some("unknown") {
                *val = Value::kw("unknown");
            } else {
                keywordize_unknown(val);
            }
        }
    } else if let Value::Vector(items) = v {
        items.iter_mut().for_each(keywordize_unknown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check_all;

    #[test]
    fn counts_types_unknowns_and_faults() {
        let h = History::parse(
            r#"{:type :invoke :process 0 :f :read :value {:key "a"}}
               {:type :info :process :nemesis :f :start-partition :value :majority}
               {:type :info :process 0 :f :read :value {:key "a"} :error :timeout}
               {:type :invoke :process 1 :f :read :value {:key "b"}}
               {:type :info :process :nemesis :f :stop-partition :value nil}"#,
        )
        .unwrap();
        let c = Counts::of(&h, &h.operations());
        assert_eq!(c.operations, 2);
        assert_eq!(c.unknown_outcomes, 2);
        assert_eq!(c.by_f["read"].info, 1);
        assert_eq!(c.by_f["read"].pending, 1);
        assert_eq!((c.nemesis_ops, c.faults, c.keys), (2, 1, 2));
    }

    #[test]
    fn edn_results_use_keywords_for_unknown() {
        let results = check_all(&History::new(), None);
        let edn = results.to_edn();
        assert!(edn.contains(":valid :unknown"), "{edn}");
        assert!(edn.contains(":valid true"), "{edn}");
    }
}
