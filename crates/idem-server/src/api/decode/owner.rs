//! The owner's mutations (`Start`, `RecordExternalCall`, `Renew`, `Complete`, `Fail`,
//! `Release`, `Cancel`), decoded into the validated core [`Command`] they propose.
//!
//! Each names its record by scope, key and fence; apply checks the fence, so a late worker
//! whose lease was taken over changes nothing (`STALE_FENCE`).

use idem_core::command::{Complete, ExternalCall, Fail, Fenced, RecordExternalCall, Renew};
use idem_core::Command;
use idem_proto::v1 as pb;

use super::fields;
use crate::api::observe::record_key_hash;
use crate::backend::RequestError;

/// The record and fence a mutation names.
fn fenced(scope: Option<pb::Scope>, key: String, fence: u64) -> Result<Fenced, RequestError> {
    let target = fields::record_key(scope, key)?;
    record_key_hash(&target.key);
    Ok(Fenced { target, fence })
}

/// `Start`: PENDING → IN_PROGRESS.
pub fn start(req: pb::StartRequest) -> Result<Command, RequestError> {
    Ok(Command::Start(fenced(req.scope, req.key, req.fence)?))
}

/// `RecordExternalCall`: the ledger entry around a downstream call.
pub fn record_external_call(req: pb::RecordExternalCallRequest) -> Result<Command, RequestError> {
    let owner = fenced(req.scope, req.key, req.fence)?;
    let call =
        match pb::ExternalCallStage::try_from(req.stage) {
            Ok(pb::ExternalCallStage::Calling) => ExternalCall::Calling,
            Ok(pb::ExternalCallStage::RemoteConfirmed) => ExternalCall::RemoteConfirmed {
                remote_ref: req.remote_ref,
            },
            _ => return Err(RequestError::argument(
                "stage must be EXTERNAL_CALL_STAGE_CALLING or EXTERNAL_CALL_STAGE_REMOTE_CONFIRMED",
            )),
        };
    let command = Command::RecordExternalCall(RecordExternalCall { owner, call });
    command.validate()?;
    Ok(command)
}

/// `Renew`: extend the lease.
pub fn renew(req: pb::RenewRequest) -> Result<Command, RequestError> {
    let owner = fenced(req.scope, req.key, req.fence)?;
    let command = Command::Renew(Renew {
        owner,
        lease: req.lease_ms.map(fields::duration_from_ms),
    });
    command.validate()?;
    Ok(command)
}

/// `Complete`: store the result.
pub fn complete(req: pb::CompleteRequest) -> Result<Command, RequestError> {
    let owner = fenced(req.scope, req.key, req.fence)?;
    let result = fields::stored_result(req.result)?;
    Ok(Command::Complete(Complete { owner, result }))
}

/// `Fail`: retryable or terminal, with its error summary.
pub fn fail(req: pb::FailRequest) -> Result<Command, RequestError> {
    let owner = fenced(req.scope, req.key, req.fence)?;
    let error = fields::error_summary(req.error)?;
    Ok(Command::Fail(Fail {
        owner,
        retryable: req.retryable,
        error,
    }))
}

/// `Release`: give the record up before anything irreversible began.
pub fn release(req: pb::ReleaseRequest) -> Result<Command, RequestError> {
    Ok(Command::Release(fenced(req.scope, req.key, req.fence)?))
}

/// `Cancel`: end the record without running it.
pub fn cancel(req: pb::CancelRequest) -> Result<Command, RequestError> {
    Ok(Command::Cancel(fenced(req.scope, req.key, req.fence)?))
}
