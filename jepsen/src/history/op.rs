//! One history entry, in Jepsen's shape.
//!
//! Jepsen records every client operation twice: an `:invoke` when the client starts it and a
//! completion when it learns the outcome: `:ok` (it happened), `:fail` (it certainly did not
//! happen) or `:info` (unknown: a timeout, a crash, a lost connection). A timeout is always
//! `:info`, never `:fail`: claiming that an operation did not happen when it might have is how
//! checkers end up blind to lost or duplicated writes. The nemesis logs its faults as `:info`
//! entries of process `:nemesis`.

use std::fmt;

use super::edn;
use super::error::HistoryError;
use super::value::Value;

/// The `:type` of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpType {
    /// The client started the operation.
    Invoke,
    /// The operation took effect; its value is the observed result.
    Ok,
    /// The operation certainly did not take effect.
    Fail,
    /// Unknown outcome: it may or may not have taken effect (timeouts, crashes, nemesis ops).
    Info,
}

impl OpType {
    /// The EDN keyword name (`"invoke"`, `"ok"`, `"fail"`, `"info"`).
    pub fn name(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }

    /// Parses a type name (case-insensitive).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "invoke" => Some(OpType::Invoke),
            "ok" => Some(OpType::Ok),
            "fail" => Some(OpType::Fail),
            "info" => Some(OpType::Info),
            _ => None,
        }
    }
}

/// The `:process` of an entry: a client process number or the nemesis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    /// A client process. As in Jepsen, a client whose operation ended `:info` is considered
    /// crashed and continues under a new process number.
    Client(u64),
    /// The fault injector (`:nemesis`).
    Nemesis,
    /// Any other process name found in a foreign history.
    Named(String),
}

impl Process {
    /// Reads a process from an EDN/JSON value: integers are clients, `:nemesis` the nemesis.
    pub fn from_value(v: &Value) -> Process {
        if let Some(n) = v.as_u64() {
            return Process::Client(n);
        }
        match v.as_name() {
            Some("nemesis") => Process::Nemesis,
            _ => Process::Named(v.to_ident()),
        }
    }

    /// The EDN value of the process.
    pub fn to_value(&self) -> Value {
        match self {
            Process::Client(n) => Value::from(*n),
            Process::Nemesis => Value::kw("nemesis"),
            Process::Named(s) if is_keyword_name(s) => Value::kw(s),
            Process::Named(s) => Value::str(s.as_str()),
        }
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(n) => write!(f, "{n}"),
            Process::Nemesis => f.write_str("nemesis"),
            Process::Named(s) => f.write_str(s),
        }
    }
}

/// The `:f` of an entry: which operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum F {
    /// Claim a key (`{:key :body}`).
    Claim,
    /// Complete the key with a result, carrying the holder's fence (`{:key :fence :result}`).
    Complete,
    /// Record the external call as `CALLING` under a fence (`{:key :fence}`).
    Call,
    /// Read the key's record (`{:key}`; ok value `{:key :state :result}`).
    Read,
    /// An operator's (or reconciler's) decision on a record whose outcome was unknown
    /// (`{:key :state :result}`: the state it is moved to, and the result when `:completed`).
    Reconcile,
    /// Anything else: nemesis operations (`:start-partition`, `:kill`, ...) and foreign `:f`s.
    Other(String),
}

impl F {
    /// Parses an `:f` name.
    pub fn parse(name: &str) -> F {
        match name {
            "claim" => F::Claim,
            "complete" => F::Complete,
            "call" => F::Call,
            "read" => F::Read,
            "reconcile" => F::Reconcile,
            other => F::Other(other.to_string()),
        }
    }

    /// The `:f` keyword name.
    pub fn name(&self) -> &str {
        match self {
            F::Claim => "claim",
            F::Complete => "complete",
            F::Call => "call",
            F::Read => "read",
            F::Reconcile => "reconcile",
            F::Other(s) => s,
        }
    }
}

impl fmt::Display for F {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One history entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Position in the history (`:index`); assigned from the position when a file lacks it.
    pub index: u64,
    /// `:type`.
    pub kind: OpType,
    /// `:process`.
    pub process: Process,
    /// `:f`.
    pub f: F,
    /// `:value`: the operation's argument on invoke, its observed result on completion.
    pub value: Value,
    /// `:time`, nanoseconds since the start of the test (Jepsen's relative time).
    pub time: i64,
    /// `:error`, when the completion carries one (`:stale-fence`, `:timeout`, ...).
    pub error: Option<Value>,
}

impl Op {
    /// An invocation by client `process`; index and time are set by whoever records it.
    pub fn invoke(process: u64, f: F, value: Value) -> Op {
        Op {
            index: 0,
            kind: OpType::Invoke,
            process: Process::Client(process),
            f,
            value,
            time: 0,
            error: None,
        }
    }

    /// The completion of this invocation with the given type and value (same process and f).
    pub fn complete(&self, kind: OpType, value: Value) -> Op {
        Op {
            kind,
            value,
            error: None,
            ..self.clone()
        }
    }

    /// A nemesis entry (`:process :nemesis`, `:type :info`) such as `:start-partition`.
    pub fn nemesis(f: &str, value: Value) -> Op {
        Op {
            index: 0,
            kind: OpType::Info,
            process: Process::Nemesis,
            f: F::parse(f),
            value,
            time: 0,
            error: None,
        }
    }

    /// This entry with `:error` set.
    pub fn with_error(mut self, error: Value) -> Op {
        self.error = Some(error);
        self
    }

    /// This entry with `:time` set (nanoseconds).
    pub fn at(mut self, time: i64) -> Op {
        self.time = time;
        self
    }

    /// True for entries of client processes (everything but the nemesis).
    pub fn is_client(&self) -> bool {
        self.process != Process::Nemesis
    }

    /// Decodes one entry from a parsed map. `position` is used when `:index` is missing and
    /// `default_time` when `:time` is. Unknown keys are ignored; record tags are looked through.
    pub fn from_value(v: &Value, position: usize, default_time: i64) -> Result<Op, HistoryError> {
        let shape = |message: String| HistoryError::Shape { position, message };
        if !matches!(v.untagged(), Value::Map(_)) {
            return Err(shape(format!("expected an operation map, found {v}")));
        }
        let type_name = v
            .get("type")
            .and_then(Value::as_name)
            .ok_or_else(|| shape("missing :type".into()))?;
        let kind =
            OpType::parse(type_name).ok_or_else(|| shape(format!("unknown :type {type_name}")))?;
        Ok(Op {
            index: v
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64),
            kind,
            process: v
                .get("process")
                .map_or(Process::Named("unknown".into()), Process::from_value),
            f: F::parse(v.get("f").and_then(Value::as_name).unwrap_or("")),
            value: v.get("value").cloned().unwrap_or(Value::Nil),
            time: v.get("time").and_then(time_ns).unwrap_or(default_time),
            error: v.get_some("error").cloned(),
        })
    }

    /// The entry as an EDN map value.
    pub fn to_value(&self) -> Value {
        let mut pairs = vec![
            ("index", Value::from(self.index)),
            ("type", Value::kw(self.kind.name())),
            ("process", self.process.to_value()),
            ("f", Value::kw(self.f.name())),
            ("value", self.value.clone()),
            ("time", Value::Int(self.time)),
        ];
        if let Some(e) = &self.error {
            pairs.push(("error", e.clone()));
        }
        Value::map(pairs)
    }

    /// One line of `history.edn`, keys in Jepsen's customary order
    /// (`{:index 0, :type :invoke, :process 3, :f :claim, :value {...}, :time 1234}`).
    pub fn to_edn(&self) -> String {
        let mut out = String::new();
        let keys = ["index", "type", "process", "f", "value", "time", "error"].map(Value::kw);
        let value = self.to_value();
        let pairs = keys
            .iter()
            .filter_map(|k| value.get(k.as_name().unwrap_or("")).map(|v| (k, v)));
        // Writing to a String cannot fail.
        let _ = edn::write_map(&mut out, pairs);
        out
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_edn())
    }
}

/// True when `s` can be written as a keyword and read back unchanged.
fn is_keyword_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || "-_.*+!?/<>=".contains(c))
}

/// A `:time` value in nanoseconds: an integer, or a float (truncated) from tools that write one.
fn time_ns(v: &Value) -> Option<i64> {
    match v.untagged() {
        Value::Float(f) if f.is_finite() => Some(*f as i64),
        other => other.as_i64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::edn::parse_one;

    #[test]
    fn writes_and_reads_back_an_op() {
        let op = Op::invoke(3, F::Claim, Value::map([("key", "k12".into())])).at(1234);
        let text = op.to_edn();
        assert_eq!(
            text,
            r#"{:index 0, :type :invoke, :process 3, :f :claim, :value {:key "k12"}, :time 1234}"#
        );
        let back = Op::from_value(&parse_one(&text).unwrap(), 0, 0).unwrap();
        assert_eq!(back, op);
    }

    #[test]
    fn missing_index_and_time_get_defaults_and_unknown_keys_are_ignored() {
        let v = parse_one("{:type :ok :process :nemesis :f :kill :node \"n1\"}").unwrap();
        let float_time = parse_one("{:type :ok :time 12.7}").unwrap();
        assert_eq!(Op::from_value(&float_time, 0, 0).unwrap().time, 12);
        let op = Op::from_value(&v, 7, 99).unwrap();
        assert_eq!((op.index, op.time, op.process), (7, 99, Process::Nemesis));
        assert_eq!(op.value, Value::Nil);
    }

    #[test]
    fn named_processes_round_trip() {
        for name in ["worker-1", "a b"] {
            let p = Process::Named(name.into());
            assert_eq!(Process::from_value(&p.to_value()), p);
        }
    }

    #[test]
    fn missing_type_is_an_error() {
        let v = parse_one("{:process 1 :f :read}").unwrap();
        assert!(Op::from_value(&v, 0, 0).is_err());
    }
}
