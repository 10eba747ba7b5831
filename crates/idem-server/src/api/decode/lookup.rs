//! The reads (`Get`, `GetOperation`, `Wait`), decoded into what they look up and, for a
//! wait, how long.

use std::time::Duration;

use idem_core::{OperationId, RecordKey};
use idem_proto::v1 as pb;

use super::fields;
use crate::api::observe::record_key_hash;
use crate::backend::RequestError;

/// Longest `Wait` budget.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// What a read looks up.
#[derive(Debug)]
pub enum Lookup {
    /// A record by scope and key.
    Key(RecordKey),
    /// A record by operation id.
    Operation(OperationId),
}

/// `Get`: by scope and key.
pub fn get(req: pb::GetRequest) -> Result<Lookup, RequestError> {
    key(req.scope, req.key)
}

/// `GetOperation`: by operation id.
pub fn get_operation(req: pb::GetOperationRequest) -> Result<Lookup, RequestError> {
    Ok(Lookup::Operation(fields::operation_id(&req.operation_id)?))
}

/// `Wait`: by key or by operation id (exactly one), with a budget of at most [`MAX_WAIT`]
/// (0: the longest).
pub fn wait(req: pb::WaitRequest) -> Result<(Lookup, Duration), RequestError> {
    let by_key = req.scope.is_some() || !req.key.is_empty();
    let target = match (by_key, req.operation_id.is_empty()) {
        (true, true) => key(req.scope, req.key)?,
        (false, false) => Lookup::Operation(fields::operation_id(&req.operation_id)?),
        (true, false) => {
            return Err(RequestError::argument(
                "set either scope and key or operation_id, not both",
            ))
        }
        (false, true) => {
            return Err(RequestError::argument(
                "set either scope and key or operation_id",
            ))
        }
    };
    let budget = match req.timeout_ms {
        0 => MAX_WAIT,
        ms => fields::duration_from_ms(ms).min(MAX_WAIT),
    };
    Ok((target, budget))
}

fn key(scope: Option<pb::Scope>, key: String) -> Result<Lookup, RequestError> {
    let key = fields::record_key(scope, key)?;
    record_key_hash(&key.key);
    Ok(Lookup::Key(key))
}
