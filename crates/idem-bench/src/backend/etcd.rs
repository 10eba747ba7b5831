//! etcd v3 through its gRPC KV service, with the idempotency protocol written as
//! transactions, the way a team would build it on etcd instead of idem:
//!
//! - claim: `Txn(if create_revision(key) == 0 then put(key, PENDING record) else get(key))`.
//!   The then-branch acquires (the token is the Txn's revision, which is the record's
//!   mod_revision); the else-branch is a replay (COMPLETED) or someone else's claim (PENDING).
//!   The fingerprint stored in the record is checked client-side, as idem checks it.
//! - complete: `Txn(if mod_revision(key) == token then put(key, COMPLETED record))`, so a
//!   worker whose claim was superseded cannot overwrite the result (idem's fence).
//!
//! Records are JSON of the same fields idem keeps for a claim (state, operation id, holder,
//! fingerprint, lease expiry, result), so both stores move comparable bytes.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tonic::transport::Channel;

use super::{Backend, CallError, ClaimResult, FINGERPRINT, LEASE_MS, PREFIX};
use crate::cli::TargetArgs;
use crate::error::BenchError;

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod pb {
    tonic::include_proto!("etcdserverpb");
}

use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::kv_client::KvClient;
use pb::request_op::Request;
use pb::response_op::Response;
use pb::{Compare, PutRequest, RangeRequest, RequestOp, TxnRequest};

/// The value stored under a key.
#[derive(Debug, Serialize, Deserialize)]
struct EtcdRecord {
    state: String,
    operation_id: String,
    holder: String,
    fingerprint: String,
    lease_expires_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<EtcdResult>,
}

/// The stored result of a completed record.
#[derive(Debug, Serialize, Deserialize)]
struct EtcdResult {
    status_code: u16,
    resource_id: String,
}

/// One gRPC connection to one etcd member.
pub struct EtcdBackend {
    kv: KvClient<Channel>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn record(key: &str, state: &str, result: Option<EtcdResult>) -> Result<Vec<u8>, CallError> {
    let record = EtcdRecord {
        state: state.to_owned(),
        operation_id: key.to_owned(),
        holder: format!("{key}-holder"),
        fingerprint: FINGERPRINT.to_owned(),
        lease_expires_at_ms: now_ms() + LEASE_MS,
        result,
    };
    serde_json::to_vec(&record).map_err(|e| CallError::Record(e.to_string()))
}

fn put(key: Vec<u8>, value: Vec<u8>) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestPut(PutRequest {
            key,
            value,
            ..Default::default()
        })),
    }
}

impl Backend for EtcdBackend {
    const NAME: &'static str = "etcd";

    async fn connect(target: &TargetArgs, index: usize) -> Result<Self, BenchError> {
        let endpoints = &target.endpoints();
        // etcd members forward proposals to the leader themselves; each connection goes to
        // one member, round-robin like clientv3 (give only the leader to avoid the hop).
        let endpoint = endpoints
            .get(index % endpoints.len().max(1))
            .ok_or_else(|| BenchError::Argument("no etcd endpoint".into()))?;
        let uri = if endpoint.contains("://") {
            endpoint.clone()
        } else {
            format!("http://{endpoint}")
        };
        let fail = |message: String| BenchError::Connect {
            backend: Self::NAME,
            endpoint: endpoint.clone(),
            message,
        };
        let channel = Channel::from_shared(uri)
            .map_err(|e| fail(e.to_string()))?
            .connect()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut kv = KvClient::new(channel);
        // A linearizable read, so an unhealthy cluster fails here rather than in the run.
        kv.range(RangeRequest {
            key: b"/idem/bench/ping".to_vec(),
            ..Default::default()
        })
        .await
        .map_err(|e| fail(CallError::from(e).to_string()))?;
        Ok(EtcdBackend { kv })
    }

    async fn claim(&self, key: &str) -> Result<ClaimResult, CallError> {
        let path = format!("{PREFIX}{key}").into_bytes();
        let txn = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Create as i32,
                key: path.clone(),
                target_union: Some(TargetUnion::CreateRevision(0)),
            }],
            success: vec![put(path.clone(), record(key, "PENDING", None)?)],
            failure: vec![RequestOp {
                request: Some(Request::RequestRange(RangeRequest {
                    key: path,
                    ..Default::default()
                })),
            }],
        };
        let answer = self.kv.clone().txn(txn).await?;
        let answer = answer.into_inner();
        if answer.succeeded {
            let revision = answer.header.map_or(0, |h| h.revision);
            return Ok(ClaimResult::Acquired(revision as u64));
        }
        let value = answer
            .responses
            .into_iter()
            .find_map(|r| match r.response {
                Some(Response::ResponseRange(range)) => range.kvs.into_iter().next(),
                _ => None,
            })
            .ok_or_else(|| CallError::Record("else-branch without the record".into()))?
            .value;
        let existing: EtcdRecord =
            serde_json::from_slice(&value).map_err(|e| CallError::Record(e.to_string()))?;
        Ok(match existing.state.as_str() {
            _ if existing.fingerprint != FINGERPRINT => ClaimResult::Other,
            "COMPLETED" => ClaimResult::Replayed,
            "PENDING" => ClaimResult::InProgress,
            _ => ClaimResult::Other,
        })
    }

    async fn complete(&self, key: &str, token: u64) -> Result<(), CallError> {
        let path = format!("{PREFIX}{key}").into_bytes();
        let result = EtcdResult {
            status_code: 201,
            resource_id: "ch_bench".into(),
        };
        let txn = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Mod as i32,
                key: path.clone(),
                target_union: Some(TargetUnion::ModRevision(token as i64)),
            }],
            success: vec![put(path, record(key, "COMPLETED", Some(result))?)],
            failure: Vec::new(),
        };
        let answer = self.kv.clone().txn(txn).await?;
        if answer.into_inner().succeeded {
            Ok(())
        } else {
            Err(CallError::StaleToken)
        }
    }
}
