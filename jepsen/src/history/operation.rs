//! Client operations as invoke/completion pairs, with their idem fields decoded.
//!
//! Checkers reason about operations, not entries: "this claim was invoked at position 10,
//! returned `:acquired` with fence 2 at position 14". Pairing follows Jepsen: a process runs one
//! operation at a time, so an entry of type ok/fail/info completes the open invocation of its
//! process. An invocation that never completes (the process crashed, or the history was cut
//! short) has an unknown outcome, like an `:info`. Positions in the history are the real-time
//! order: an operation A precedes B when A's completion entry comes before B's invoke entry.

use std::collections::HashMap;

use super::op::{Op, OpType, Process, F};
use super::value::Value;

/// What is known about whether an operation took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Completed `:ok`: it took effect, and its value is what it observed.
    Ok,
    /// Completed `:fail`: it certainly took no effect.
    Fail,
    /// Completed `:info`, or never completed: it may have taken effect at any point after its
    /// invocation, or never.
    Unknown,
}

/// A claim's `:outcome` (docs/design.md §2 "Claim outcomes").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// First claim: the caller owns the key.
    Acquired,
    /// Lease expired or retryable failure: the caller owns the key under a new fence.
    TakenOver,
    /// Someone else holds a live lease.
    InProgress,
    /// Terminal success stored; `:result` carries it.
    Completed,
    /// Terminal failure stored.
    Failed,
    /// Same key, different request: record untouched.
    FingerprintMismatch,
    /// The claim carried no fingerprint of the record's algorithm.
    FingerprintUnverifiable,
    /// Outcome unknown, high risk: an operator must reconcile.
    NeedsReconciliation,
    /// An outcome name this checker does not know.
    Other(String),
}

impl Outcome {
    /// Parses an outcome name; case and `_`/`-` are not significant (`TAKEN_OVER`, `:taken-over`).
    pub fn parse(name: &str) -> Outcome {
        let norm = name.to_ascii_lowercase().replace('_', "-");
        match norm.as_str() {
            "acquired" => Outcome::Acquired,
            "taken-over" => Outcome::TakenOver,
            "in-progress" => Outcome::InProgress,
            "completed" => Outcome::Completed,
            "failed" => Outcome::Failed,
            "fingerprint-mismatch" => Outcome::FingerprintMismatch,
            "fingerprint-unverifiable" => Outcome::FingerprintUnverifiable,
            "needs-reconciliation" => Outcome::NeedsReconciliation,
            _ => Outcome::Other(norm),
        }
    }

    /// The keyword name (`"taken-over"`).
    pub fn name(&self) -> &str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::TakenOver => "taken-over",
            Outcome::InProgress => "in-progress",
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::FingerprintMismatch => "fingerprint-mismatch",
            Outcome::FingerprintUnverifiable => "fingerprint-unverifiable",
            Outcome::NeedsReconciliation => "needs-reconciliation",
            Outcome::Other(s) => s,
        }
    }

    /// True for the outcomes that make the caller the owner (and carry a fence).
    pub fn is_owned(&self) -> bool {
        matches!(self, Outcome::Acquired | Outcome::TakenOver)
    }

    /// True for the outcomes that report a fingerprint problem instead of the record.
    pub fn is_fingerprint_refusal(&self) -> bool {
        matches!(
            self,
            Outcome::FingerprintMismatch | Outcome::FingerprintUnverifiable
        )
    }
}

/// A client operation: an invocation and its completion, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The client process.
    pub process: Process,
    /// Which operation.
    pub f: F,
    /// Whether it took effect.
    pub status: Status,
    /// Position of the invoke entry in the history.
    pub invoke: usize,
    /// Position of the completion entry, if any.
    pub completion: Option<usize>,
    /// `:index` of the invoke entry.
    pub index: u64,
    /// `:index` of the completion entry.
    pub completion_index: Option<u64>,
    /// `:time` of the invoke entry (ns).
    pub invoke_time: i64,
    /// `:time` of the completion entry (ns).
    pub completion_time: Option<i64>,
    /// `:key` (as text).
    pub key: Option<String>,
    /// `:body` of a claim (the request the fingerprint is computed from).
    pub body: Option<Value>,
    /// `:risk` of a claim (`"high"`, ...), when it names one.
    pub risk: Option<String>,
    /// The fence: returned by a claim, carried by a complete or call.
    pub fence: Option<u64>,
    /// A claim's `:outcome`.
    pub outcome: Option<Outcome>,
    /// The `:operation-id` a claim returned.
    pub operation_id: Option<String>,
    /// `:result`: written by a complete, observed by a read or a `:completed` claim; `nil` is
    /// absent.
    pub result: Option<Value>,
    /// A read's observed `:state` (`"completed"`, `"pending"`, ...); `nil` is absent.
    pub state: Option<String>,
    /// `:error` of the completion (entry-level or inside its value).
    pub error: Option<Value>,
}

impl Operation {
    fn from_invoke(pos: usize, op: &Op) -> Operation {
        let v = &op.value;
        Operation {
            process: op.process.clone(),
            f: op.f.clone(),
            status: Status::Unknown,
            invoke: pos,
            completion: None,
            index: op.index,
            completion_index: None,
            invoke_time: op.time,
            completion_time: None,
            key: v.get_some("key").map(Value::to_ident),
            body: v.get_some("body").cloned(),
            risk: v.get("risk").and_then(Value::as_name).map(str::to_string),
            fence: v.get("fence").and_then(Value::as_u64),
            outcome: None,
            operation_id: None,
            result: v.get_some("result").cloned(),
            state: v.get("state").and_then(Value::as_name).map(str::to_string),
            error: None,
        }
    }

    fn set_completion(&mut self, pos: usize, op: &Op) {
        let v = &op.value;
        self.status = match op.kind {
            OpType::Ok => Status::Ok,
            OpType::Fail => Status::Fail,
            _ => Status::Unknown,
        };
        self.completion = Some(pos);
        self.completion_index = Some(op.index);
        self.completion_time = Some(op.time);
        self.key = self
            .key
            .take()
            .or_else(|| v.get_some("key").map(Value::to_ident));
        self.body = self.body.take().or_else(|| v.get_some("body").cloned());
        let returned_fence = v.get("fence").and_then(Value::as_u64);
        self.fence = match self.f {
            // A claim's fence is what the store handed out; others carry the one they hold.
            F::Claim => returned_fence.or(self.fence),
            _ => self.fence.or(returned_fence),
        };
        self.outcome = v
            .get("outcome")
            .and_then(Value::as_name)
            .map(Outcome::parse);
        self.operation_id = v.get_some("operation-id").map(Value::to_ident);
        if self.f != F::Complete {
            self.result = v.get_some("result").cloned();
        }
        // A reconcile's state is the one it moves the record to, known from the invocation.
        if let Some(state) = v.get("state").and_then(Value::as_name) {
            self.state = Some(state.to_string());
        }
        self.error = op.error.clone().or_else(|| v.get_some("error").cloned());
    }

    /// True when the operation completed `:ok`.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// True when this is a claim that returned an owning outcome (acquired or taken over).
    pub fn is_owning_claim(&self) -> bool {
        self.f == F::Claim && self.is_ok() && self.outcome.as_ref().is_some_and(Outcome::is_owned)
    }

    /// True when `self` completed before `other` was invoked (real-time precedence).
    pub fn precedes(&self, other: &Operation) -> bool {
        self.completion.is_some_and(|c| c < other.invoke)
    }

    /// A short JSON description for anomaly reports.
    pub fn describe(&self) -> serde_json::Value {
        let mut d = serde_json::json!({
            "process": self.process.to_string(),
            "f": self.f.name(),
            "status": match self.status {
                Status::Ok => "ok",
                Status::Fail => "fail",
                Status::Unknown => "info",
            },
            "index": self.index,
        });
        let extra = [
            (
                "completion-index",
                self.completion_index.map(serde_json::Value::from),
            ),
            ("key", self.key.clone().map(Into::into)),
            ("fence", self.fence.map(Into::into)),
            ("outcome", self.outcome.as_ref().map(|o| o.name().into())),
            ("body", self.body.as_ref().map(|b| b.to_ident().into())),
            ("result", self.result.as_ref().map(|r| r.to_ident().into())),
            ("state", self.state.clone().map(Into::into)),
            ("error", self.error.as_ref().map(|e| e.to_ident().into())),
        ];
        for (name, value) in extra {
            if let Some(value) = value {
                d[name] = value;
            }
        }
        d
    }
}

/// Client operations paired from history entries, plus the completions that had no invocation.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    /// Operations in invocation order.
    pub operations: Vec<Operation>,
    /// Completion entries with no open invocation of their process (ignored by checkers).
    pub orphans: usize,
}

/// Pairs the client entries of `ops` (nemesis entries are skipped).
pub fn pair(ops: &[Op]) -> Pairing {
    let mut out = Pairing::default();
    let mut open: HashMap<&Process, usize> = HashMap::new();
    for (pos, op) in ops.iter().enumerate().filter(|(_, op)| op.is_client()) {
        if op.kind == OpType::Invoke {
            // A second invoke by a process with one still open: the first stays unknown.
            open.insert(&op.process, out.operations.len());
            out.operations.push(Operation::from_invoke(pos, op));
        } else if let Some(i) = open.remove(&op.process) {
            out.operations[i].set_completion(pos, op);
        } else {
            out.orphans += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::History;

    #[test]
    fn pairs_by_process_and_leaves_crashed_invocations_unknown() {
        let h = History::parse(
            r#"{:type :invoke :process 1 :f :claim :value {:key "k" :body "b"}}
               {:type :invoke :process 2 :f :read :value {:key "k"}}
               {:type :ok :process 1 :f :claim :value {:key "k" :body "b" :outcome :acquired :fence 1 :operation-id "o1"}}
               {:type :ok :process 9 :f :read :value nil}
               {:type :info :process :nemesis :f :kill :value "n1"}"#,
        )
        .unwrap();
        let p = pair(h.ops());
        assert_eq!(p.operations.len(), 2);
        assert_eq!(p.orphans, 1);
        let claim = &p.operations[0];
        assert!(claim.is_owning_claim());
        assert_eq!(claim.fence, Some(1));
        assert_eq!(claim.operation_id.as_deref(), Some("o1"));
        assert_eq!(p.operations[1].status, Status::Unknown);
        assert_eq!(p.operations[1].completion, None);
    }

    #[test]
    fn outcome_names_are_normalised() {
        assert_eq!(Outcome::parse("TAKEN_OVER"), Outcome::TakenOver);
        assert_eq!(
            Outcome::parse("fingerprint-mismatch").name(),
            "fingerprint-mismatch"
        );
    }
}
