//! Builders for the `:value` maps of idem operations (see `jepsen/README.md`, "History schema").
//!
//! Workloads should build values through these functions so that what they write is exactly
//! what the checkers read.

use super::operation::Outcome;
use super::value::Value;

/// Claim invocation: `{:key k :body b}`.
pub fn claim(key: &str, body: &str) -> Value {
    Value::map([("key", key.into()), ("body", body.into())])
}

/// Claim invocation of a record of another risk than the default: `{:key k :body b :risk
/// :high}` (`risk` as a keyword name, lower case).
pub fn claim_at_risk(key: &str, body: &str, risk: &str) -> Value {
    Value::map([
        ("key", key.into()),
        ("body", body.into()),
        ("risk", Value::kw(risk)),
    ])
}

/// What a claim returned: `{:key :body :outcome :operation-id :fence :result}`; `fence` only
/// when owned (acquired or taken over), `result` only when completed.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimReply<'a> {
    /// The outcome.
    pub outcome: Outcome,
    /// The record's operation id, when returned.
    pub operation_id: Option<&'a str>,
    /// The fence handed out, when the caller owns the key.
    pub fence: Option<u64>,
    /// The stored result of a completed key.
    pub result: Option<Value>,
}

/// Claim completion value: the invocation's key and body plus the reply's fields.
pub fn claim_ok(key: &str, body: &str, reply: ClaimReply<'_>) -> Value {
    let mut pairs = vec![
        ("key", Value::from(key)),
        ("body", Value::from(body)),
        ("outcome", Value::kw(reply.outcome.name())),
    ];
    if let Some(id) = reply.operation_id {
        pairs.push(("operation-id", id.into()));
    }
    if let Some(f) = reply.fence {
        pairs.push(("fence", f.into()));
    }
    if let Some(r) = reply.result {
        pairs.push(("result", r));
    }
    Value::map(pairs)
}

/// Complete invocation (and ok value): `{:key k :fence f :result r}`.
pub fn complete(key: &str, fence: u64, result: Value) -> Value {
    Value::map([
        ("key", key.into()),
        ("fence", fence.into()),
        ("result", result),
    ])
}

/// External-call record (`CALLING`) invocation: `{:key k :fence f}`.
pub fn call(key: &str, fence: u64) -> Value {
    Value::map([("key", key.into()), ("fence", fence.into())])
}

/// Reconcile invocation (and ok value): `{:key k :state s :result r}`, the state the record is
/// moved to (`:completed`, `:retryable-failure`, ...) and, when completed, its result.
pub fn reconcile(key: &str, state: &str, result: Option<Value>) -> Value {
    let mut pairs = vec![("key", Value::from(key)), ("state", Value::kw(state))];
    if let Some(r) = result {
        pairs.push(("result", r));
    }
    Value::map(pairs)
}

/// Read invocation: `{:key k}`.
pub fn read(key: &str) -> Value {
    Value::map([("key", key.into())])
}

/// Read completion: `{:key k :state s :result r}`; `state` is `None` when the key has no record
/// (written as `nil`), `result` `None` when the record holds none.
pub fn read_ok(key: &str, state: Option<&str>, result: Option<Value>) -> Value {
    Value::map([
        ("key", key.into()),
        ("state", state.map_or(Value::Nil, Value::kw)),
        ("result", result.unwrap_or(Value::Nil)),
    ])
}
