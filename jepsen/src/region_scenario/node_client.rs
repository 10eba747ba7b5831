//! A client pinned to one node: each call goes to that node, in one attempt, and is one
//! operation of the scenario's history.
//!
//! Why not the SDK: `idem_client::Client` follows the `leader-addr` of every answer, so after
//! one forwarded claim its calls go straight to the tenant's leader. That is what services
//! want, but the scenario measures what *one node* does with a request — forward it to a
//! leader in another region, or answer a retry from its own replica — so here the node is
//! fixed, nothing is retried, and a latency is exactly one request's. The requests are built
//! with the same shared conversions as the SDK's (`idem_proto::convert`) and the same
//! `jcs-sha256/v1` fingerprint.
//!
//! Every call is recorded (`history.edn`, with [`crate::history::payload`]) so that the
//! jepsen checkers judge the whole run afterwards; each operation gets a process number of
//! its own, which keeps Jepsen's one-operation-per-process rule without bookkeeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::fingerprint::CanonicalRequest;
use idem_core::{ClaimKind, IdempotencyKey, RecordKey, Risk, Scope, StoredResult};
use idem_proto::convert;
use idem_proto::v1::{self, idempotency_client::IdempotencyClient};
use tonic::transport::{Channel, Endpoint};

use super::call_error::CallError;
use super::error::ScenarioError;
use crate::history::{payload, Outcome, Recorder, Value, F};
use crate::workload::store::{result_value, state_name};

/// The request body of every claim (one request per key: retries are the same request).
pub const BODY: &str = r#"{"amount":1000,"currency":"EUR"}"#;
/// The body's name in the history.
const BODY_NAME: &str = "charge";
/// The operation of every scope.
const ENDPOINT: &str = "POST /v1/charges";

/// What a claim answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The outcome.
    pub kind: ClaimKind,
    /// The record's operation id.
    pub operation_id: String,
    /// The fence, when the caller owns the record.
    pub fence: Option<u64>,
}

/// One node's API, called directly.
#[derive(Clone)]
pub struct NodeClient {
    node: usize,
    idem: IdempotencyClient<Channel>,
    fingerprint: v1::Fingerprint,
    timeout: Duration,
    recorder: Arc<Recorder>,
    processes: Arc<AtomicU64>,
}

/// The record key of `name` for `tenant` (environment `test`, actor `scenario`).
pub fn key(tenant: &str, name: &str) -> Result<RecordKey, ScenarioError> {
    let scope = Scope::new(tenant, "test", "scenario", ENDPOINT)
        .map_err(|e| ScenarioError::Request(e.to_string()))?;
    let key = IdempotencyKey::new(name).map_err(|e| ScenarioError::Request(e.to_string()))?;
    Ok(RecordKey::new(scope, key))
}

/// The key's name in the history: `tenant/key`.
pub fn history_key(key: &RecordKey) -> String {
    format!("{}/{}", key.scope.tenant(), key.key.as_str())
}

/// The result stored by the owner of `key`: unique per key, so a replay shows which
/// completion it replays.
fn result_of(key: &RecordKey) -> StoredResult {
    StoredResult {
        status_code: 201,
        resource_id: format!("ch-{}", key.key.as_str()),
        ..StoredResult::default()
    }
}

fn keyword(reason: &str) -> Value {
    Value::kw(&reason.to_ascii_lowercase().replace('_', "-"))
}

impl NodeClient {
    /// A client of node `node` at `addr` (the connection opens on the first call; call it
    /// inside the runtime). Calls give up after `timeout` (outcome unknown).
    pub fn new(
        node: usize,
        addr: &str,
        timeout: Duration,
        recorder: Arc<Recorder>,
        processes: Arc<AtomicU64>,
    ) -> Result<NodeClient, ScenarioError> {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| ScenarioError::Request(format!("{addr}: {e}")))?
            .connect_timeout(Duration::from_secs(1))
            .connect_lazy();
        let fingerprint = CanonicalRequest::new("POST", "/v1/charges")
            .and_then(|r| r.with_json_body(BODY).fingerprint(1))
            .map_err(|e| ScenarioError::Request(e.to_string()))?;
        Ok(NodeClient {
            node,
            idem: IdempotencyClient::new(channel),
            fingerprint: convert::fingerprint_to_proto(&fingerprint),
            timeout,
            recorder,
            processes,
        })
    }

    /// The node this client calls.
    pub fn node(&self) -> usize {
        self.node
    }

    fn process(&self) -> u64 {
        self.processes.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs one call with the timeout; returns its latency and answer.
    async fn call<T, Fut>(
        &self,
        rpc: impl FnOnce(IdempotencyClient<Channel>) -> Fut,
    ) -> (Duration, Result<T, CallError>)
    where
        Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let started = Instant::now();
        let answer = tokio::time::timeout(self.timeout, rpc(self.idem.clone())).await;
        let latency = started.elapsed();
        let result = match answer {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(CallError::of(&status)),
            Err(_) => Err(CallError::Unknown(format!(
                "no answer within {:?}",
                self.timeout
            ))),
        };
        (latency, result)
    }

    /// Records how a call that was invoked as `invoke` with `value` failed.
    fn record_failure(&self, invoke: &crate::history::Op, value: Value, error: &CallError) {
        match error {
            CallError::Unknown(_) => self.recorder.info(invoke, value, Some(keyword("UNKNOWN"))),
            CallError::Refused { reason, .. } => self.recorder.fail(invoke, value, keyword(reason)),
            CallError::NotFound => self.recorder.fail(invoke, value, keyword("NOT_FOUND")),
        };
    }

    /// Claims `key` with risk `risk` (a fresh holder per claim).
    pub async fn claim(
        &self,
        key: &RecordKey,
        risk: Risk,
    ) -> (Duration, Result<Claimed, CallError>) {
        let name = history_key(key);
        let value = payload::claim(&name, BODY_NAME);
        let invoke = self
            .recorder
            .invoke(self.process(), F::Claim, value.clone());
        let request = v1::ClaimRequest {
            scope: Some(convert::scope_to_proto(&key.scope)),
            key: key.key.as_str().to_owned(),
            fingerprints: vec![self.fingerprint.clone()],
            risk: convert::risk_to_proto(risk) as i32,
            holder: idem_client::holder::generate().as_str().to_owned(),
            ..v1::ClaimRequest::default()
        };
        let (latency, answer) = self
            .call(|mut c| async move { c.claim(request).await })
            .await;
        let result = answer.and_then(|r| {
            let kind = convert::claim_kind_from_proto(r.outcome)
                .map_err(|e| CallError::Unknown(format!("undecodable answer: {e}")))?;
            let resource = r.result.map(|res| res.resource_id);
            Ok((
                kind,
                r.operation_id,
                (r.fence > 0).then_some(r.fence),
                resource,
            ))
        });
        let result = match result {
            Ok((kind, operation_id, fence, resource)) => {
                let reply = payload::ClaimReply {
                    outcome: Outcome::parse(kind.name()),
                    operation_id: Some(&operation_id),
                    fence,
                    result: resource.map(Value::str),
                };
                self.recorder
                    .ok(&invoke, payload::claim_ok(&name, BODY_NAME, reply));
                Ok(Claimed {
                    kind,
                    operation_id,
                    fence,
                })
            }
            Err(error) => {
                self.record_failure(&invoke, value, &error);
                Err(error)
            }
        };
        (latency, result)
    }

    /// Completes `key` under `fence` with the key's result.
    pub async fn complete(&self, key: &RecordKey, fence: u64) -> (Duration, Result<(), CallError>) {
        let result = result_of(key);
        let value = payload::complete(&history_key(key), fence, result_value(&result));
        let invoke = self
            .recorder
            .invoke(self.process(), F::Complete, value.clone());
        let request = v1::CompleteRequest {
            scope: Some(convert::scope_to_proto(&key.scope)),
            key: key.key.as_str().to_owned(),
            fence,
            result: Some(convert::result_to_proto(&result)),
        };
        let (latency, answer) = self
            .call(|mut c| async move { c.complete(request).await })
            .await;
        match &answer {
            Ok(_) => {
                self.recorder.ok(&invoke, value);
            }
            Err(error) => self.record_failure(&invoke, value, error),
        }
        (latency, answer.map(drop))
    }

    /// Reads `key`'s record: its state name (`COMPLETED`, ...), `None` without a record.
    pub async fn get(&self, key: &RecordKey) -> Result<Option<String>, CallError> {
        let name = history_key(key);
        let value = payload::read(&name);
        let invoke = self.recorder.invoke(self.process(), F::Read, value.clone());
        let request = v1::GetRequest {
            scope: Some(convert::scope_to_proto(&key.scope)),
            key: key.key.as_str().to_owned(),
        };
        let (_, answer) = self.call(|mut c| async move { c.get(request).await }).await;
        let record = answer.and_then(|r| {
            let record = r
                .record
                .ok_or_else(|| CallError::Unknown("a Get answer without a record".into()))?;
            convert::record_from_proto(record)
                .map_err(|e| CallError::Unknown(format!("undecodable record: {e}")))
        });
        match record {
            Ok(record) => {
                let result = record.result.as_ref().map(result_value);
                let state = state_name(record.state);
                self.recorder
                    .ok(&invoke, payload::read_ok(&name, Some(&state), result));
                Ok(Some(record.state.name().to_owned()))
            }
            Err(CallError::NotFound) => {
                self.recorder
                    .ok(&invoke, payload::read_ok(&name, None, None));
                Ok(None)
            }
            Err(error) => {
                self.record_failure(&invoke, value, &error);
                Err(error)
            }
        }
    }
}
