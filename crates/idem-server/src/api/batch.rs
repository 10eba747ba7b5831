//! `Idempotency.Batch`: many claims and worker mutations in one request.
//!
//! Each call of a batch goes through the very handler it would reach alone (validation,
//! routing, forwarding, policy, metrics, its own span), and the calls run concurrently. So a
//! batch changes nothing about what any one call decides; what it saves is the per-request
//! cost of gRPC (the larger part of a small write's CPU on the leader), and because its calls
//! are proposed at the same moment, Raft appends and replicates them together.
//!
//! The calls of a batch are independent: no order among them, no transaction. A caller that
//! needs one call's answer before another sends them in separate batches.

use futures::future::join_all;
use idem_proto::status;
use idem_proto::v1 as pb;
use idem_proto::v1::batch_call::Request as Call;
use idem_proto::v1::batch_reply::Reply;
use idem_proto::v1::idempotency_server::Idempotency;
use tonic::{Request, Response, Status};

use crate::auth::{Principal, Role};
use crate::backend::{forwarded, RequestError};

/// Most calls in one batch. Large enough that coalescing many callers pays off, small enough
/// that one batch cannot monopolise the node (a batch holds its answers until the slowest
/// call is done).
pub const MAX_BATCH_CALLS: usize = 256;

/// Runs the calls of `batch` on `service` concurrently and answers each in order.
///
/// Each call carries the batch's caller, and its handler authorizes it as it would a single
/// call: a batch cannot reach a tenant its calls could not.
pub(crate) async fn run<S: Idempotency>(
    service: &S,
    caller: Result<Principal, RequestError>,
    batch: pb::BatchRequest,
) -> Result<pb::BatchResponse, RequestError> {
    let caller = caller?;
    caller.require(Role::Worker, None)?;
    let calls = checked(batch.calls)?;
    let replies = join_all(calls.into_iter().map(|call| answer(service, &caller, call))).await;
    Ok(pb::BatchResponse { replies })
}

/// The requests of a batch, or why the batch is malformed (nothing runs then).
fn checked(calls: Vec<pb::BatchCall>) -> Result<Vec<Call>, RequestError> {
    if calls.is_empty() {
        return Err(RequestError::argument("a batch needs at least one call"));
    }
    if calls.len() > MAX_BATCH_CALLS {
        return Err(RequestError::argument(format!(
            "a batch holds at most {MAX_BATCH_CALLS} calls, not {}",
            calls.len()
        )));
    }
    calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| {
            call.request
                .ok_or_else(|| RequestError::argument(format!("call {index} has no request")))
        })
        .collect()
}

/// One call's answer: what its handler returned, its status turned into a [`pb::CallError`].
async fn answer<S: Idempotency>(service: &S, caller: &Principal, call: Call) -> pb::BatchReply {
    let reply = match call {
        Call::Claim(r) => reply(service.claim(on_behalf(caller, r)).await, Reply::Claim),
        Call::Start(r) => reply(service.start(on_behalf(caller, r)).await, Reply::Record),
        Call::RecordExternalCall(r) => reply(
            service.record_external_call(on_behalf(caller, r)).await,
            Reply::Record,
        ),
        Call::Renew(r) => reply(service.renew(on_behalf(caller, r)).await, Reply::Record),
        Call::Complete(r) => reply(service.complete(on_behalf(caller, r)).await, Reply::Record),
        Call::Fail(r) => reply(service.fail(on_behalf(caller, r)).await, Reply::Record),
        Call::Release(r) => reply(service.release(on_behalf(caller, r)).await, Reply::Record),
        Call::Cancel(r) => reply(service.cancel(on_behalf(caller, r)).await, Reply::Record),
    };
    pb::BatchReply { reply: Some(reply) }
}

/// One call of the batch as a request of the batch's caller.
fn on_behalf<T>(caller: &Principal, call: T) -> Request<T> {
    let mut request = Request::new(call);
    request.extensions_mut().insert(caller.clone());
    request
}

/// A handler's result as a reply. A `leader-addr` it carried (the call was forwarded) is
/// passed on to the batch's own response, so the client learns the leader as it would from
/// a single call.
fn reply<T>(result: Result<Response<T>, Status>, wrap: fn(T) -> Reply) -> Reply {
    match result {
        Ok(response) => {
            let leader = response
                .metadata()
                .get(idem_proto::reason::LEADER_ADDR_METADATA_KEY)
                .and_then(|v| v.to_str().ok());
            if let Some(addr) = leader {
                forwarded::note(addr);
            }
            wrap(response.into_inner())
        }
        Err(status) => Reply::Error(status::to_call_error(&status)),
    }
}

#[cfg(test)]
mod tests {
    use idem_proto::reason;
    use idem_proto::v1::ClaimOutcome;
    use tonic::Code;

    use super::*;
    use crate::api::testing::{claim_req, complete_req, context};
    use crate::api::IdempotencyService;
    use crate::backend::memory::MemoryBackend;
    use crate::policy::Policies;

    fn service() -> IdempotencyService {
        IdempotencyService::new(context(MemoryBackend::new(), Policies::default()))
    }

    fn claim(key: &str) -> Call {
        Call::Claim(claim_req(key, &format!("holder-of-{key}"), 7))
    }

    fn complete(key: &str, fence: u64) -> Call {
        Call::Complete(complete_req(key, fence))
    }

    async fn batch(service: &IdempotencyService, calls: Vec<Call>) -> Result<Vec<Reply>, Status> {
        let calls = calls
            .into_iter()
            .map(|call| pb::BatchCall {
                request: Some(call),
            })
            .collect();
        let response = service
            .batch(Request::new(pb::BatchRequest { calls }))
            .await?;
        Ok(response
            .into_inner()
            .replies
            .into_iter()
            .map(|r| r.reply.expect("every reply is set"))
            .collect())
    }

    fn claimed(reply: &Reply) -> &pb::ClaimResponse {
        match reply {
            Reply::Claim(claim) => claim,
            other => panic!("not a claim answer: {other:?}"),
        }
    }

    fn failed(reply: &Reply) -> Status {
        match reply {
            Reply::Error(error) => status::from_call_error(error.clone()),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[tokio::test]
    async fn each_call_is_answered_as_it_would_be_alone() {
        let service = service();
        let replies = batch(
            &service,
            vec![
                claim("order-1"),
                claim("order-2"),
                claim("bad key!"),
                claim("order-1"),
            ],
        )
        .await
        .unwrap();
        assert_eq!(replies.len(), 4);
        assert_eq!(claimed(&replies[0]).outcome(), ClaimOutcome::Acquired);
        assert_eq!(claimed(&replies[1]).outcome(), ClaimOutcome::Acquired);
        let invalid = failed(&replies[2]);
        assert_eq!(invalid.code(), Code::InvalidArgument);
        assert_eq!(
            status::reason_of(&invalid).as_deref(),
            Some(reason::INVALID_KEY)
        );
        // The same holder twice in one batch: one acquisition, redelivered to the other.
        let (first, again) = (claimed(&replies[0]), claimed(&replies[3]));
        assert_eq!(again.outcome(), ClaimOutcome::Acquired);
        assert_eq!(again.operation_id, first.operation_id);
        assert_eq!(again.fence, first.fence);

        let fence = claimed(&replies[1]).fence;
        let replies = batch(
            &service,
            vec![
                complete("order-2", fence),
                complete("order-1", fence + 100),
                claim("order-2"),
            ],
        )
        .await
        .unwrap();
        match &replies[0] {
            Reply::Record(record) => {
                assert_eq!(
                    record.record.as_ref().unwrap().state(),
                    pb::State::Completed
                )
            }
            other => panic!("not a record: {other:?}"),
        }
        assert_eq!(
            status::reason_of(&failed(&replies[1])).as_deref(),
            Some(reason::STALE_FENCE)
        );
        // Calls of one batch have no order: the claim saw the record either before or
        // after the complete, never anything else.
        let seen = claimed(&replies[2]).outcome();
        assert!(
            matches!(seen, ClaimOutcome::InProgress | ClaimOutcome::Completed),
            "{seen:?}"
        );
    }

    #[tokio::test]
    async fn a_malformed_batch_runs_nothing() {
        let service = service();
        let empty = batch(&service, vec![]).await.unwrap_err();
        assert_eq!(empty.code(), Code::InvalidArgument);
        assert_eq!(
            status::reason_of(&empty).as_deref(),
            Some(reason::INVALID_ARGUMENT)
        );

        let too_many = (0..=MAX_BATCH_CALLS)
            .map(|i| claim(&format!("k-{i}")))
            .collect();
        let err = batch(&service, too_many).await.unwrap_err();
        assert!(err.message().contains("at most 256"), "{}", err.message());

        let calls = vec![
            pb::BatchCall {
                request: Some(claim("order-9")),
            },
            pb::BatchCall { request: None },
        ];
        let err = service
            .batch(Request::new(pb::BatchRequest { calls }))
            .await
            .unwrap_err();
        assert!(err.message().contains("call 1"), "{}", err.message());
        // Nothing ran: the valid claim of the rejected batch did not create its record.
        let replies = batch(&service, vec![claim("order-9")]).await.unwrap();
        assert!(!claimed(&replies[0]).redelivered);
        assert_eq!(claimed(&replies[0]).outcome(), ClaimOutcome::Acquired);
        let again = batch(&service, vec![claim("order-9")]).await.unwrap();
        assert!(claimed(&again[0]).redelivered);
    }
}
