//! The side-effect ledger: what the downstream actually executed.
//!
//! The store's promise is about side effects, which the history alone cannot see: a worker may
//! call the downstream and then time out, crash or be fenced off. The harness therefore runs a
//! ledger service standing in for the downstream (a payment provider, say). Workers call it with
//! the key, the operation id the store handed out and their fence; it records every call and,
//! like a real idempotent downstream, deduplicates by operation id: a repeat of an operation id
//! it already executed is recorded with `:duplicate true` and has no effect. The at-most-once
//! checker counts the effective (non-duplicate) executions per key.
//!
//! Stored as `ledger.edn` (one map per line) or JSON lines:
//! `{:key "k12" :operation-id "0192..." :fence 2 :process 3 :time 123 :duplicate false}`.

use std::collections::HashSet;
use std::path::Path;

use crate::history::{self, json, HistoryError, Process, Value};

/// One call received by the ledger service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The idempotency key the side effect is for.
    pub key: String,
    /// The operation id the caller passed (the downstream's idempotency key).
    pub operation_id: String,
    /// The caller's fence, when it sent one.
    pub fence: Option<u64>,
    /// The calling client process, when known.
    pub process: Option<Process>,
    /// When the ledger received the call (ns, the history's time base).
    pub time: i64,
    /// True when this operation id had already been executed: no effect.
    pub duplicate: bool,
}

impl LedgerEntry {
    fn from_value(v: &Value, position: usize) -> Result<LedgerEntry, HistoryError> {
        let shape = |message: &str| HistoryError::Shape {
            position,
            message: message.to_string(),
        };
        Ok(LedgerEntry {
            key: v
                .get_some("key")
                .map(Value::to_ident)
                .ok_or_else(|| shape("ledger entry without :key"))?,
            operation_id: v
                .get_some("operation-id")
                .map(Value::to_ident)
                .ok_or_else(|| shape("ledger entry without :operation-id"))?,
            fence: v.get("fence").and_then(Value::as_u64),
            process: v.get_some("process").map(Process::from_value),
            time: v.get("time").and_then(Value::as_i64).unwrap_or(0),
            duplicate: v.get("duplicate").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// The entry as an EDN map value.
    pub fn to_value(&self) -> Value {
        Value::map([
            ("key", Value::from(self.key.as_str())),
            ("operation-id", Value::from(self.operation_id.as_str())),
            ("fence", Value::from(self.fence)),
            (
                "process",
                self.process.as_ref().map_or(Value::Nil, Process::to_value),
            ),
            ("time", Value::Int(self.time)),
            ("duplicate", Value::Bool(self.duplicate)),
        ])
    }
}

/// Every call the ledger service received, in arrival order. Not synchronised: a service
/// shared by threads keeps it behind a `Mutex`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    entries: Vec<LedgerEntry>,
    executed: HashSet<String>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Records a call the way an idempotent downstream would: the first call with an operation
    /// id executes, later ones are duplicates. Returns the stored entry.
    pub fn record(
        &mut self,
        key: &str,
        operation_id: &str,
        fence: Option<u64>,
        process: Option<Process>,
        time: i64,
    ) -> LedgerEntry {
        let duplicate = !self.executed.insert(operation_id.to_string());
        let entry = LedgerEntry {
            key: key.to_string(),
            operation_id: operation_id.to_string(),
            fence,
            process,
            time,
            duplicate,
        };
        self.entries.push(entry.clone());
        entry
    }

    /// Appends an entry as given (its `duplicate` flag is kept).
    pub fn push(&mut self, entry: LedgerEntry) {
        self.executed.insert(entry.operation_id.clone());
        self.entries.push(entry);
    }

    /// The entries in arrival order.
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }

    /// Parses `ledger.edn` or JSON-lines text.
    pub fn parse(text: &str) -> Result<Ledger, HistoryError> {
        let mut ledger = Ledger::new();
        for (position, v) in history::read_documents(text)?.iter().enumerate() {
            ledger.push(LedgerEntry::from_value(v, position)?);
        }
        Ok(ledger)
    }

    /// Reads a ledger file.
    pub fn read(path: &Path) -> Result<Ledger, HistoryError> {
        Ledger::parse(&history::read_text(path)?)
    }

    /// The ledger as EDN, one entry per line.
    pub fn to_edn(&self) -> String {
        self.entries
            .iter()
            .map(|e| e.to_value().to_string() + "\n")
            .collect()
    }

    /// The ledger as JSON lines.
    pub fn to_json_lines(&self) -> String {
        self.entries
            .iter()
            .map(|e| json::to_json(&e.to_value()).to_string() + "\n")
            .collect()
    }

    /// Writes `ledger.edn` to `path`.
    pub fn write_edn(&self, path: &Path) -> Result<(), HistoryError> {
        history::write_text(path, &self.to_edn())
    }

    /// Writes JSON lines to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), HistoryError> {
        history::write_text(path, &self.to_json_lines())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_marks_repeats_of_an_operation_id_as_duplicates() {
        let mut l = Ledger::new();
        assert!(
            !l.record("k", "o1", Some(1), Some(Process::Client(1)), 5)
                .duplicate
        );
        assert!(l.record("k", "o1", Some(2), None, 6).duplicate);
        assert!(!l.record("k2", "o2", None, None, 7).duplicate);
    }

    #[test]
    fn edn_and_json_round_trip() {
        let mut l = Ledger::new();
        l.record("k", "o1", Some(1), Some(Process::Client(3)), 5);
        l.record("k", "o1", None, None, 6);
        assert_eq!(Ledger::parse(&l.to_edn()).unwrap(), l);
        assert_eq!(Ledger::parse(&l.to_json_lines()).unwrap(), l);
    }

    #[test]
    fn entries_need_a_key_and_operation_id() {
        assert!(Ledger::parse("{:key \"k\"}").is_err());
        assert!(Ledger::parse("{:key \"k\" :operation-id \"o\" :unknown 1}").is_ok());
    }
}
