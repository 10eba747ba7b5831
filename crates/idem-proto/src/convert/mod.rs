//! Conversions between the wire types of [`crate::v1`] and the validated types of idem-core.
//!
//! The server and the SDK both work with idem-core's types ([`Scope`], [`Fingerprint`],
//! [`StoredResult`], [`Record`](idem_core::Record), ...) and translate only at the wire. Both
//! directions live here, once, so the two ends cannot drift apart: a field added to
//! `idem.v1.Record` is mapped in one place, and what one side encodes the other decodes with
//! the same rules.
//!
//! Wire conventions of `idempotency.proto` applied here: enum value 0 (`*_UNSPECIFIED`) means
//! "absent" (the `optional_*` decoders return `None` for it, the others reject it); an instant
//! of zero or an optional string that is empty means "absent"; a proto map becomes a sorted map.
//!
//! Decoding validates with idem-core's constructors and fails with a [`DecodeError`] carrying
//! the API's machine-readable reason (`INVALID_SCOPE`, `INVALID_KEY`, ...). What a failure
//! means is the caller's business: the server answers a bad request with that reason, the SDK
//! reads a bad answer as `INVALID_RESPONSE`. Canonical requests fail with idem-core's
//! [`FingerprintError`], which each side already maps.

mod error;
mod record;

use std::time::Duration;

use idem_core::fingerprint::{jcs, CanonicalRequest, Fingerprint, FingerprintError, RequestBody};
use idem_core::record::{RESULT_VERSION_BODY, RESULT_VERSION_FIELDS};
use idem_core::{
    ClaimKind, ErrorSummary, Field, Risk, Scope, Stage, State, StoredBody, StoredResult, Timestamp,
    ValidationError,
};

use crate::reason;
use crate::v1;

pub use error::DecodeError;
pub use record::{record_from_proto, record_to_proto};

/// Every risk class, in wire order.
const RISKS: [Risk; 3] = [Risk::Low, Risk::Normal, Risk::High];

/// Every stage, in wire order.
const STAGES: [Stage; 4] = [
    Stage::NotCalled,
    Stage::Calling,
    Stage::RemoteConfirmed,
    Stage::LocalDone,
];

/// Every claim outcome kind, in wire order.
const CLAIM_KINDS: [ClaimKind; 8] = [
    ClaimKind::Acquired,
    ClaimKind::TakenOver,
    ClaimKind::InProgress,
    ClaimKind::Completed,
    ClaimKind::Failed,
    ClaimKind::FingerprintMismatch,
    ClaimKind::FingerprintUnverifiable,
    ClaimKind::NeedsReconciliation,
];

/// The wire form of a scope.
pub fn scope_to_proto(scope: &Scope) -> v1::Scope {
    v1::Scope {
        tenant: scope.tenant().to_owned(),
        environment: scope.environment().to_owned(),
        actor: scope.actor().to_owned(),
        endpoint: scope.endpoint().to_owned(),
    }
}

/// A scope from the wire, validated; absent is `INVALID_SCOPE`.
pub fn scope_from_proto(scope: Option<v1::Scope>) -> Result<Scope, DecodeError> {
    let s = scope.ok_or(DecodeError::Missing {
        reason: reason::INVALID_SCOPE,
        message: "scope is required (tenant, environment, actor, endpoint)",
    })?;
    Ok(Scope::new(s.tenant, s.environment, s.actor, s.endpoint)?)
}

/// The wire form of a fingerprint.
pub fn fingerprint_to_proto(fingerprint: &Fingerprint) -> v1::Fingerprint {
    v1::Fingerprint {
        algorithm: fingerprint.algorithm.clone(),
        schema_version: fingerprint.schema_version,
        digest: fingerprint.digest.clone(),
    }
}

/// A fingerprint from the wire, validated (`INVALID_FINGERPRINT`).
pub fn fingerprint_from_proto(fingerprint: v1::Fingerprint) -> Result<Fingerprint, DecodeError> {
    Ok(Fingerprint::new(
        fingerprint.algorithm,
        fingerprint.schema_version,
        fingerprint.digest,
    )?)
}

/// The wire form of a stored result.
pub fn result_to_proto(result: &StoredResult) -> v1::StoredResult {
    v1::StoredResult {
        status_code: u32::from(result.status_code),
        resource_id: result.resource_id.clone(),
        resource_version: result.resource_version.clone(),
        fields: result
            .fields
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        purged: result.purged,
        body: result
            .body
            .as_ref()
            .map(|b| b.bytes.clone())
            .unwrap_or_default(),
        content_type: result
            .body
            .as_ref()
            .map(|b| b.content_type.clone())
            .unwrap_or_default(),
        result_version: result.version(),
    }
}

/// A stored result from the wire, as sent (`purged` included).
///
/// Only the status code and the result version are checked here (the status must fit in 16
/// bits; the version is 0 without a body or 1 with one, else `INVALID_RESULT`);
/// [`StoredResult::validate`] is the caller's choice.
pub fn result_from_proto(result: v1::StoredResult) -> Result<StoredResult, DecodeError> {
    let status_code =
        u16::try_from(result.status_code).map_err(|_| idem_core::ValidationError::Range {
            field: idem_core::Field::StatusCode,
            value: u64::from(result.status_code),
            min: 100,
            max: 599,
        })?;
    let body = stored_body(result.result_version, result.body, result.content_type)?;
    Ok(StoredResult {
        status_code,
        resource_id: result.resource_id,
        resource_version: result.resource_version,
        fields: result.fields.into_iter().collect(),
        purged: result.purged,
        body,
    })
}

/// The verbatim body of a result of `version`: none for version 0 (a body or content type
/// sent with it is refused rather than dropped), both parts for version 1.
fn stored_body(
    version: u32,
    bytes: Vec<u8>,
    content_type: String,
) -> Result<Option<StoredBody>, DecodeError> {
    let rule = match version {
        RESULT_VERSION_FIELDS if bytes.is_empty() && content_type.is_empty() => return Ok(None),
        RESULT_VERSION_FIELDS => "a body or content type needs result_version 1",
        RESULT_VERSION_BODY => {
            return Ok(Some(StoredBody {
                content_type,
                bytes,
            }))
        }
        _ => "unknown result version (this node knows 0 and 1)",
    };
    Err(ValidationError::Rule {
        field: Field::ResultVersion,
        rule,
    }
    .into())
}

/// The wire form of an error summary.
pub fn error_to_proto(error: &ErrorSummary) -> v1::ErrorSummary {
    v1::ErrorSummary {
        code: error.code.clone(),
        message: error.message.clone(),
    }
}

/// An error summary from the wire, as sent ([`ErrorSummary::validate`] is the caller's choice).
pub fn error_from_proto(error: v1::ErrorSummary) -> ErrorSummary {
    ErrorSummary {
        code: error.code,
        message: error.message,
    }
}

/// The wire form of a risk class.
pub fn risk_to_proto(risk: Risk) -> v1::Risk {
    match risk {
        Risk::Low => v1::Risk::Low,
        Risk::Normal => v1::Risk::Normal,
        Risk::High => v1::Risk::High,
    }
}

/// An optional risk class from the wire: `UNSPECIFIED` is `None`, unknown values are
/// `INVALID_POLICY`.
pub fn optional_risk_from_proto(risk: i32) -> Result<Option<Risk>, DecodeError> {
    from_wire(&RISKS, risk_to_proto, risk, "risk", reason::INVALID_POLICY)
}

/// A risk class from the wire; `UNSPECIFIED` or unknown values are `INVALID_POLICY`.
pub fn risk_from_proto(risk: i32) -> Result<Risk, DecodeError> {
    optional_risk_from_proto(risk)?.ok_or(DecodeError::Missing {
        reason: reason::INVALID_POLICY,
        message: "risk is required",
    })
}

/// The wire form of a state.
pub fn state_to_proto(state: State) -> v1::State {
    match state {
        State::Pending => v1::State::Pending,
        State::InProgress => v1::State::InProgress,
        State::Completed => v1::State::Completed,
        State::RetryableFailure => v1::State::RetryableFailure,
        State::TerminalFailure => v1::State::TerminalFailure,
        State::Cancelled => v1::State::Cancelled,
        State::NeedsReconciliation => v1::State::NeedsReconciliation,
    }
}

/// An optional state from the wire: `UNSPECIFIED` is `None`, unknown values are
/// `INVALID_ARGUMENT`.
pub fn optional_state_from_proto(state: i32) -> Result<Option<State>, DecodeError> {
    from_wire(
        &State::ALL,
        state_to_proto,
        state,
        "state",
        reason::INVALID_ARGUMENT,
    )
}

/// A state from the wire; `UNSPECIFIED` or unknown values are `INVALID_ARGUMENT`.
pub fn state_from_proto(state: i32) -> Result<State, DecodeError> {
    optional_state_from_proto(state)?.ok_or(DecodeError::Missing {
        reason: reason::INVALID_ARGUMENT,
        message: "state is required",
    })
}

/// The wire form of a stage.
pub fn stage_to_proto(stage: Stage) -> v1::Stage {
    match stage {
        Stage::NotCalled => v1::Stage::NotCalled,
        Stage::Calling => v1::Stage::Calling,
        Stage::RemoteConfirmed => v1::Stage::RemoteConfirmed,
        Stage::LocalDone => v1::Stage::LocalDone,
    }
}

/// An optional stage from the wire: `UNSPECIFIED` is `None`, unknown values are
/// `INVALID_ARGUMENT`.
pub fn optional_stage_from_proto(stage: i32) -> Result<Option<Stage>, DecodeError> {
    from_wire(
        &STAGES,
        stage_to_proto,
        stage,
        "stage",
        reason::INVALID_ARGUMENT,
    )
}

/// A stage from the wire; `UNSPECIFIED` or unknown values are `INVALID_ARGUMENT`.
pub fn stage_from_proto(stage: i32) -> Result<Stage, DecodeError> {
    optional_stage_from_proto(stage)?.ok_or(DecodeError::Missing {
        reason: reason::INVALID_ARGUMENT,
        message: "stage is required",
    })
}

/// The wire form of a claim outcome kind.
pub fn claim_kind_to_proto(kind: ClaimKind) -> v1::ClaimOutcome {
    match kind {
        ClaimKind::Acquired => v1::ClaimOutcome::Acquired,
        ClaimKind::TakenOver => v1::ClaimOutcome::TakenOver,
        ClaimKind::InProgress => v1::ClaimOutcome::InProgress,
        ClaimKind::Completed => v1::ClaimOutcome::Completed,
        ClaimKind::Failed => v1::ClaimOutcome::Failed,
        ClaimKind::FingerprintMismatch => v1::ClaimOutcome::FingerprintMismatch,
        ClaimKind::FingerprintUnverifiable => v1::ClaimOutcome::FingerprintUnverifiable,
        ClaimKind::NeedsReconciliation => v1::ClaimOutcome::NeedsReconciliation,
    }
}

/// A claim outcome kind from the wire; `UNSPECIFIED` or unknown values are `INVALID_ARGUMENT`.
pub fn claim_kind_from_proto(outcome: i32) -> Result<ClaimKind, DecodeError> {
    from_wire(
        &CLAIM_KINDS,
        claim_kind_to_proto,
        outcome,
        "outcome",
        reason::INVALID_ARGUMENT,
    )?
    .ok_or(DecodeError::Missing {
        reason: reason::INVALID_ARGUMENT,
        message: "outcome is required",
    })
}

/// The core value of a wire enum value: `None` for `UNSPECIFIED` (0), an error for a value
/// no core value maps to. `all` lists every core value, `to_proto` is the one-to-one encoding.
fn from_wire<T: Copy, W: Into<i32>>(
    all: &[T],
    to_proto: fn(T) -> W,
    value: i32,
    field: &'static str,
    reason: &'static str,
) -> Result<Option<T>, DecodeError> {
    if value == 0 {
        return Ok(None);
    }
    all.iter()
        .copied()
        .find(|v| to_proto(*v).into() == value)
        .map(Some)
        .ok_or(DecodeError::UnknownValue {
            field,
            value,
            reason,
        })
}

/// Milliseconds of a duration, saturating.
pub fn duration_to_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A duration given in milliseconds.
pub fn duration_from_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Milliseconds of an optional instant; 0 when absent.
pub fn instant_to_ms(at: Option<Timestamp>) -> u64 {
    at.map_or(0, Timestamp::millis)
}

/// An optional instant from milliseconds; 0 is absent.
pub fn instant_from_ms(ms: u64) -> Option<Timestamp> {
    (ms != 0).then_some(Timestamp(ms))
}

/// The wire form of a canonical request, for the server to fingerprint.
///
/// A body given as a parsed value is sent as its canonical JSON text; a raw body is sent as
/// is (the server parses it with the same rules).
pub fn canonical_request_to_proto(
    request: &CanonicalRequest,
    schema_version: u32,
) -> Result<v1::CanonicalRequest, FingerprintError> {
    let body_json = match request.body() {
        None => None,
        Some(RequestBody::Raw(raw)) => Some(raw.clone()),
        Some(RequestBody::Value(value)) => Some(jcs::canonicalize_value(value)?),
    };
    Ok(v1::CanonicalRequest {
        method: request.method().to_owned(),
        route: request.route().to_owned(),
        path_params: request
            .path_params()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        query: request
            .query()
            .iter()
            .map(|(name, value)| v1::QueryParam {
                name: name.clone(),
                value: value.clone(),
            })
            .collect(),
        body_json,
        schema_version,
    })
}

/// A canonical request from the wire, with the default [`idem_core::fingerprint::JcsOptions`]
/// and the body kept raw (parsed when fingerprinted). Its `schema_version` is not part of a
/// [`CanonicalRequest`]: the caller passes it to [`CanonicalRequest::fingerprint`].
pub fn canonical_request_from_proto(
    request: v1::CanonicalRequest,
) -> Result<CanonicalRequest, FingerprintError> {
    Ok(CanonicalRequest::new(request.method, request.route)?
        .with_path_params(request.path_params)
        .with_query(request.query.into_iter().map(|q| (q.name, q.value)))
        .with_body(request.body_json.map(RequestBody::Raw)))
}

#[cfg(test)]
mod tests;
