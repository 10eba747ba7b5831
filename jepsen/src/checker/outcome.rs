//! A checker's verdict, counts and anomalies.
//!
//! Shaped like Jepsen's checker maps (`{:valid? ..., :anomalies ...}`) so readers of Jepsen
//! results feel at home: a verdict that is true, false or unknown, counters that say how much was
//! actually checked (a checker that checked nothing is not evidence), and the first few anomalies
//! in full with the total number found.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use super::MAX_REPORTED_ANOMALIES;

/// A verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// No anomaly found.
    Valid,
    /// At least one anomaly found.
    Invalid,
    /// Could not decide (search budget exhausted, missing input); not a failure.
    Unknown,
}

impl Serialize for Validity {
    /// `true`, `false` or `"unknown"` (Jepsen's `:valid?` values).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

/// What one checker found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckerResult {
    /// The verdict.
    pub valid: Validity,
    /// Counters (keys checked, operations considered, anomalies by type, ...).
    pub counts: BTreeMap<String, u64>,
    /// Total anomalies found.
    #[serde(rename = "anomaly-count")]
    pub anomaly_count: u64,
    /// The first [`MAX_REPORTED_ANOMALIES`] anomalies; each has a `"type"` field.
    pub anomalies: Vec<serde_json::Value>,
    /// Remarks (why a verdict is unknown, what was not checked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Default for CheckerResult {
    fn default() -> Self {
        CheckerResult::new()
    }
}

impl CheckerResult {
    /// An empty, valid result.
    pub fn new() -> CheckerResult {
        CheckerResult {
            valid: Validity::Valid,
            counts: BTreeMap::new(),
            anomaly_count: 0,
            anomalies: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Records an anomaly (its `"type"` is also counted under that name) and makes the verdict
    /// invalid.
    pub fn anomaly(&mut self, anomaly: serde_json::Value) {
        let kind = anomaly["type"].as_str().unwrap_or("anomaly").to_string();
        self.add(&kind, 1);
        self.anomaly_count += 1;
        self.valid = Validity::Invalid;
        if self.anomalies.len() < MAX_REPORTED_ANOMALIES {
            self.anomalies.push(anomaly);
        }
    }

    /// Adds `n` to counter `name`.
    pub fn add(&mut self, name: &str, n: u64) {
        *self.counts.entry(name.to_string()).or_default() += n;
    }

    /// Makes a valid verdict unknown, with the reason as a note (an invalid verdict stays).
    pub fn unknown(&mut self, note: impl Into<String>) {
        if self.valid == Validity::Valid {
            self.valid = Validity::Unknown;
        }
        self.notes.push(note.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_jepsen_style_verdicts() {
        let mut r = CheckerResult::new();
        r.unknown("budget");
        assert_eq!(serde_json::to_value(&r).unwrap()["valid"], "unknown");
        for i in 0..20 {
            r.anomaly(serde_json::json!({"type": "lost", "i": i}));
        }
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["valid"], false);
        assert_eq!(j["anomaly-count"], 20);
        assert_eq!(j["counts"]["lost"], 20);
        assert_eq!(
            j["anomalies"].as_array().unwrap().len(),
            MAX_REPORTED_ANOMALIES
        );
    }
}
