//! Histories: what every client and the nemesis did, in Jepsen's format.
//!
//! A [`History`] is the ordered list of [`Op`] entries of one test. It is built live by a
//! [`Recorder`] (or assembled from per-process vectors with [`History::merge`]), written as
//! `history.edn` (one EDN map per line, Jepsen's form) and `history.json` (JSON lines), and read
//! back from either, including histories written by other tools. Checkers work on the
//! [`Operation`]s obtained by pairing invocations with completions ([`History::operations`]).

pub mod edn;
mod error;
mod faults;
pub mod json;
mod op;
mod operation;
pub mod payload;
mod recorder;
mod value;

use std::fs;
use std::path::Path;

pub use error::{EdnError, HistoryError};
pub use faults::{fault_windows, FaultWindow};
pub use op::{Op, OpType, Process, F};
pub use operation::{pair, Operation, Outcome, Pairing, Status};
pub use recorder::Recorder;
pub use value::Value;

/// The entries of one test, in the order they happened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    ops: Vec<Op>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// A history of `ops` as given (indices are kept).
    pub fn from_ops(ops: Vec<Op>) -> History {
        History { ops }
    }

    /// Merges entries collected separately (for example one vector per worker) into one history:
    /// a stable sort by `:time`, then `:index` renumbered from 0.
    pub fn merge(parts: impl IntoIterator<Item = Vec<Op>>) -> History {
        let mut ops: Vec<Op> = parts.into_iter().flatten().collect();
        ops.sort_by_key(|op| op.time);
        for (i, op) in ops.iter_mut().enumerate() {
            op.index = i as u64;
        }
        History { ops }
    }

    /// Appends `op`, setting its `:index` to its position.
    pub fn push(&mut self, mut op: Op) {
        op.index = self.ops.len() as u64;
        self.ops.push(op);
    }

    /// The entries.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Client operations paired from invocations and completions.
    pub fn operations(&self) -> Pairing {
        pair(&self.ops)
    }

    /// The nemesis's fault windows.
    pub fn fault_windows(&self) -> Vec<FaultWindow> {
        fault_windows(&self.ops)
    }

    /// Parses a history from EDN or JSON text (detected from the content).
    pub fn parse(text: &str) -> Result<History, HistoryError> {
        let mut ops = Vec::new();
        let mut time = 0;
        for (position, form) in read_documents(text)?.iter().enumerate() {
            let op = Op::from_value(form, position, time)?;
            time = op.time;
            ops.push(op);
        }
        Ok(History { ops })
    }

    /// Reads a history file (`history.edn`, `history.json`, JSON lines).
    pub fn read(path: &Path) -> Result<History, HistoryError> {
        History::parse(&read_text(path)?)
    }

    /// The history as EDN, one entry per line.
    pub fn to_edn(&self) -> String {
        self.ops.iter().map(|op| op.to_edn() + "\n").collect()
    }

    /// The history as JSON lines, one entry per line.
    pub fn to_json_lines(&self) -> String {
        self.ops
            .iter()
            .map(|op| json::to_json(&op.to_value()).to_string() + "\n")
            .collect()
    }

    /// Writes `history.edn`-style text to `path`.
    pub fn write_edn(&self, path: &Path) -> Result<(), HistoryError> {
        write_text(path, &self.to_edn())
    }

    /// Writes JSON lines to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), HistoryError> {
        write_text(path, &self.to_json_lines())
    }
}

/// Decodes the documents of an EDN or JSON file: one per top-level form / line. A file holding a
/// single vector (or JSON array) of maps is read as its elements.
pub fn read_documents(text: &str) -> Result<Vec<Value>, HistoryError> {
    let mut forms = if json::looks_like_json(text) {
        // EDN maps may have string keys too: fall back to EDN before reporting the JSON error.
        json::parse_documents(text).or_else(|e| edn::parse_all(text).map_err(|_| e))?
    } else {
        edn::parse_all(text)?
    };
    if forms.len() == 1 {
        if let Value::Vector(items) | Value::List(items) = &forms[0] {
            if items.iter().all(|v| matches!(v.untagged(), Value::Map(_))) {
                forms = items.clone();
            }
        }
    }
    Ok(forms)
}

/// Reads a whole file as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String, HistoryError> {
    fs::read_to_string(path).map_err(|source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a whole file.
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), HistoryError> {
    fs::write(path, text).map_err(|source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOREIGN: &str = r#"
; written by something else
[#jepsen.history.Op{:index 5, :time 100, :type :invoke, :process 0, :f :read, :value {:key "a"}, :extra 1}
 {:type :ok, :process 0, :f :read, :value {:key "a", :state nil, :result nil}, :node "n1"}
 {:time 300, :type :info, :process :nemesis, :f :start-partition, :value #{"n1" "n2"}}]
"#;

    #[test]
    fn reads_foreign_edn_vectors_with_tags_and_missing_fields() {
        let h = History::parse(FOREIGN).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(h.ops()[0].index, 5);
        assert_eq!(h.ops()[1].index, 1);
        assert_eq!(h.ops()[1].time, 100);
        assert_eq!(h.operations().operations.len(), 1);
        assert_eq!(h.fault_windows().len(), 1);
    }

    #[test]
    fn edn_and_json_round_trip_to_the_same_operations() {
        let h = History::parse(FOREIGN).unwrap();
        let from_edn = History::parse(&h.to_edn()).unwrap();
        let from_json = History::parse(&h.to_json_lines()).unwrap();
        assert_eq!(from_edn, h);
        assert_eq!(from_json.operations().operations, h.operations().operations);
    }

    #[test]
    fn edn_with_string_keys_is_not_mistaken_for_json() {
        let h = History::parse(r#"{"type" :invoke, "process" 1, "f" :read}"#).unwrap();
        assert_eq!(h.ops()[0].f, F::Read);
    }

    #[test]
    fn merge_orders_by_time_and_renumbers() {
        let a = vec![Op::invoke(0, F::Read, Value::Nil).at(5)];
        let b = vec![Op::invoke(1, F::Read, Value::Nil).at(1)];
        let h = History::merge([a, b]);
        assert_eq!(h.ops()[0].process, Process::Client(1));
        assert_eq!(h.ops()[1].index, 1);
    }
}
