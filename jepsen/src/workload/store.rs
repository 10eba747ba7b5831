//! The store as the workloads see it: every call is one history operation.
//!
//! Each method records the `:invoke` entry, calls idem through the Rust client, and records
//! exactly one completion built with [`crate::history::payload`], so the history holds what
//! the checkers read:
//!
//! - `:ok` with the observed value when the store answered;
//! - `:fail` only for definite answers that changed nothing: refusals (`STALE_FENCE`,
//!   `ALREADY_TERMINAL`, `WRONG_STATE`, validation errors...) and the client's `UNAVAILABLE`,
//!   which it reports only when no attempt was sent; `:error` is the reason;
//! - `:info` for everything else: timeouts, lost connections,
//!   `UNAVAILABLE_OUTCOME_UNKNOWN`, internal errors. The call may have taken effect; the
//!   calling process is then retired (see [`super::worker`]).
//!
//! Results are stored as `{status_code 201, resource_id R}` and appear in the history as the
//! string R, unique per worker attempt, so a changed acknowledgement is visible.

use std::sync::Arc;
use std::time::Duration;

use idem_client::{
    Claim, ClaimOutcome, ClaimRequest, Client, ClientError, ReconcileTarget, Reconciliation,
};
use idem_core::fingerprint::CanonicalRequest;
use idem_core::{IdempotencyKey, Record, RecordKey, Risk, Scope, State, StoredResult};

use crate::history::{payload, Outcome, Recorder, Value, F};

/// Answers after which the call certainly had no effect: refusals, and `UNAVAILABLE`, which
/// the client reports only when the request was never sent (no endpoint reachable).
const DEFINITE: &[&str] = &[
    "UNAVAILABLE",
    "STALE_FENCE",
    "ALREADY_TERMINAL",
    "WRONG_STATE",
    "IRREVERSIBLE_STAGE",
    "VERSION_MISMATCH",
    "REGION_FAILOVER",
    "NOT_FOUND",
    "INVALID_KEY",
    "INVALID_SCOPE",
    "INVALID_FINGERPRINT",
    "INVALID_POLICY",
    "INVALID_RESULT",
    "INVALID_ARGUMENT",
    "RESULT_TOO_LARGE",
    "BODY_TOO_LARGE",
];

/// How a store call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion<T> {
    /// The store answered.
    Ok(T),
    /// A definite refusal, with its reason (`STALE_FENCE`, ...).
    Fail(String),
    /// Unknown outcome, with the reason.
    Info(String),
}

/// One client process's view of the store.
pub struct Store {
    client: Client,
    scope: Scope,
    recorder: Arc<Recorder>,
}

/// The scope every key of a test lives in.
pub fn test_scope() -> Scope {
    Scope::new("jepsen", "test", "harness", "POST /v1/effects")
        .unwrap_or_else(|e| unreachable!("the test scope is valid: {e}"))
}

/// The stored result of a worker attempt.
pub fn stored_result(resource_id: &str) -> StoredResult {
    StoredResult {
        status_code: 201,
        resource_id: resource_id.to_string(),
        ..StoredResult::default()
    }
}

/// The history value of a stored result.
pub fn result_value(result: &StoredResult) -> Value {
    Value::str(result.resource_id.clone())
}

/// The history name of a state (`in-progress`).
pub fn state_name(state: State) -> String {
    state.name().to_ascii_lowercase().replace('_', "-")
}

fn keyword(reason: &str) -> Value {
    Value::kw(&reason.to_ascii_lowercase().replace('_', "-"))
}

fn classify<T>(error: &ClientError) -> Completion<T> {
    let reason = error.reason().to_string();
    if DEFINITE.contains(&reason.as_str()) {
        Completion::Fail(reason)
    } else {
        Completion::Info(reason)
    }
}

impl Store {
    /// A store view over `client`.
    pub fn new(client: Client, recorder: Arc<Recorder>) -> Store {
        Store {
            client,
            scope: test_scope(),
            recorder,
        }
    }

    fn target(&self, key: &str) -> anyhow::Result<RecordKey> {
        Ok(RecordKey::new(
            self.scope.clone(),
            IdempotencyKey::new(key)?,
        ))
    }

    fn end<T>(
        &self,
        invoke: &crate::history::Op,
        value: Value,
        result: Completion<T>,
    ) -> Completion<T> {
        match &result {
            Completion::Ok(_) => {}
            Completion::Fail(reason) => {
                self.recorder.fail(invoke, value, keyword(reason));
            }
            Completion::Info(reason) => {
                self.recorder.info(invoke, value, Some(keyword(reason)));
            }
        }
        result
    }

    /// Claims `key` for a request with `body`, asking for `lease` and `risk`.
    pub async fn claim(
        &self,
        process: u64,
        key: &str,
        body: &str,
        (lease, risk): (Duration, Risk),
    ) -> Completion<Claim> {
        let value = match risk {
            Risk::Normal => payload::claim(key, body),
            other => payload::claim_at_risk(key, body, &other.name().to_ascii_lowercase()),
        };
        let invoke = self.recorder.invoke(process, F::Claim, value.clone());
        let request = self.target(key).and_then(|t| {
            let canonical = CanonicalRequest::new("POST", "/v1/effects")?
                .with_json_body(format!(r#"{{"body":"{body}"}}"#));
            Ok(ClaimRequest::for_request(t, &canonical, 1)?
                .lease(lease)
                .risk(risk))
        });
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                return self.end(
                    &invoke,
                    value,
                    Completion::Fail(format!("INVALID_ARGUMENT {e}")),
                )
            }
        };
        match self.client.claim(request).await {
            Ok(claim) => {
                let id = claim.operation_id.to_string();
                let result = match &claim.outcome {
                    ClaimOutcome::Completed { result } => Some(result_value(result)),
                    _ => None,
                };
                let reply = payload::ClaimReply {
                    outcome: Outcome::parse(claim.outcome.kind().name()),
                    operation_id: Some(&id),
                    fence: claim.fence(),
                    result,
                };
                self.recorder
                    .ok(&invoke, payload::claim_ok(key, body, reply));
                Completion::Ok(claim)
            }
            Err(e) => self.end(&invoke, value, classify(&e)),
        }
    }

    /// Records the external call (`CALLING`) under `fence`.
    pub async fn call(&self, process: u64, key: &str, fence: u64) -> Completion<()> {
        let value = payload::call(key, fence);
        let invoke = self.recorder.invoke(process, F::Call, value.clone());
        let Ok(target) = self.target(key) else {
            return self.end(&invoke, value, Completion::Fail("INVALID_KEY".into()));
        };
        match self.client.record_calling(&target, fence, None).await {
            Ok(_) => {
                self.recorder.ok(&invoke, value);
                Completion::Ok(())
            }
            Err(e) => self.end(&invoke, value, classify(&e)),
        }
    }

    /// Completes `key` under `fence` with result `resource_id`.
    pub async fn complete(
        &self,
        process: u64,
        key: &str,
        fence: u64,
        resource_id: &str,
    ) -> Completion<()> {
        let result = stored_result(resource_id);
        let value = payload::complete(key, fence, result_value(&result));
        let invoke = self.recorder.invoke(process, F::Complete, value.clone());
        let Ok(target) = self.target(key) else {
            return self.end(&invoke, value, Completion::Fail("INVALID_KEY".into()));
        };
        match self.client.complete(&target, fence, &result).await {
            Ok(_) => {
                self.recorder.ok(&invoke, value);
                Completion::Ok(())
            }
            Err(e) => self.end(&invoke, value, classify(&e)),
        }
    }

    /// The record of `key`, read through `admin` (not an operation of the history: what an
    /// operator looks at before deciding); `None` when it cannot be read.
    pub async fn record(&self, admin: &Client, key: &str) -> Option<Record> {
        let target = self.target(key).ok()?;
        admin.get(&target).await.ok().map(|lookup| lookup.record)
    }

    /// Reconciles `record` through `admin` (version-checked): to `COMPLETED` with
    /// `resource_id` when the downstream executed it, else to `RETRYABLE_FAILURE`.
    pub async fn reconcile(
        &self,
        admin: &Client,
        process: u64,
        record: &Record,
        executed: Option<&str>,
    ) -> Completion<()> {
        let key = record.key.key.as_str();
        let target = match executed {
            Some(resource_id) => ReconcileTarget::Completed(stored_result(resource_id)),
            None => ReconcileTarget::RetryableFailure(None),
        };
        let result = executed.map(|r| result_value(&stored_result(r)));
        let value = payload::reconcile(key, &state_name(target.state()), result);
        let invoke = self.recorder.invoke(process, F::Reconcile, value.clone());
        let decision = Reconciliation {
            operation_id: record.operation_id,
            expected_version: record.version,
            target,
            reason: "jepsen high-risk workload: ledger checked".into(),
            operator: format!("jepsen-p{process}"),
        };
        match admin.reconcile(&decision).await {
            Ok(_) => {
                self.recorder.ok(&invoke, value);
                Completion::Ok(())
            }
            Err(e) => self.end(&invoke, value, classify(&e)),
        }
    }

    /// Reads `key`'s record; `Ok(None)` when it has none.
    pub async fn read(&self, process: u64, key: &str) -> Completion<Option<State>> {
        let value = payload::read(key);
        let invoke = self.recorder.invoke(process, F::Read, value.clone());
        let Ok(target) = self.target(key) else {
            return self.end(&invoke, value, Completion::Fail("INVALID_KEY".into()));
        };
        match self.client.get(&target).await {
            Ok(lookup) => {
                let record = &lookup.record;
                let state = state_name(record.state);
                let result = record.result.as_ref().map(result_value);
                self.recorder
                    .ok(&invoke, payload::read_ok(key, Some(&state), result));
                Completion::Ok(Some(record.state))
            }
            Err(ClientError::NotFound { .. }) => {
                self.recorder.ok(&invoke, payload::read_ok(key, None, None));
                Completion::Ok(None)
            }
            Err(e) => self.end(&invoke, value, classify(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_unknown_refusals_are_definite() {
        let unknown = ClientError::OutcomeUnknown {
            message: "t".into(),
        };
        assert!(matches!(classify::<()>(&unknown), Completion::Info(_)));
        let never_sent = ClientError::Unavailable {
            message: "t".into(),
        };
        assert_eq!(
            classify::<()>(&never_sent),
            Completion::Fail("UNAVAILABLE".into())
        );
        let stale = ClientError::Rejected {
            reason: "STALE_FENCE".into(),
            code: idem_client::Code::FailedPrecondition,
            message: String::new(),
            retry_after: None,
        };
        assert_eq!(
            classify::<()>(&stale),
            Completion::Fail("STALE_FENCE".into())
        );
        let internal = ClientError::Rejected {
            reason: "INTERNAL".into(),
            code: idem_client::Code::Internal,
            message: String::new(),
            retry_after: None,
        };
        assert!(matches!(classify::<()>(&internal), Completion::Info(_)));
        assert_eq!(keyword("STALE_FENCE"), Value::kw("stale-fence"));
        assert_eq!(state_name(State::InProgress), "in-progress");
    }
}
