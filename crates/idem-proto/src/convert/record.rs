//! A whole record, both directions.
//!
//! Lossless: [`record_to_proto`] of a decoded record gives back the message for every record a
//! server can send (absent optional parts are zero or empty on the wire).

use idem_core::{Holder, IdempotencyKey, Lease, Policy, Record, RecordKey, Timestamp};

use super::{
    duration_from_ms, duration_to_ms, error_from_proto, error_to_proto, fingerprint_from_proto,
    fingerprint_to_proto, instant_from_ms, instant_to_ms, optional_stage_from_proto,
    result_from_proto, result_to_proto, risk_from_proto, risk_to_proto, scope_from_proto,
    scope_to_proto, stage_from_proto, stage_to_proto, state_from_proto, state_to_proto,
    DecodeError,
};
use crate::{reason, v1};

/// A record from the wire, validated (the inverse of [`record_to_proto`]).
pub fn record_from_proto(record: v1::Record) -> Result<Record, DecodeError> {
    let key = RecordKey::new(
        scope_from_proto(record.scope)?,
        IdempotencyKey::new(record.key)?,
    );
    let fingerprint = record.fingerprint.ok_or(DecodeError::Missing {
        reason: reason::INVALID_FINGERPRINT,
        message: "fingerprint is required",
    })?;
    Ok(Record {
        key,
        operation_id: record.operation_id.parse()?,
        fingerprint: fingerprint_from_proto(fingerprint)?,
        state: state_from_proto(record.state)?,
        stage: stage_from_proto(record.stage)?,
        remote_ref: (!record.remote_ref.is_empty()).then_some(record.remote_ref),
        previous_stage: optional_stage_from_proto(record.previous_stage)?,
        fence: record.fence,
        lease: record.lease.map(lease_from_proto).transpose()?,
        attempts: record.attempts,
        version: record.version,
        policy: Policy {
            lease: duration_from_ms(record.lease_ms),
            retention: duration_from_ms(record.retention_ms),
            risk: risk_from_proto(record.risk)?,
            max_result_bytes: record.max_result_bytes,
        },
        result: record.result.map(result_from_proto).transpose()?,
        error: record.error.map(error_from_proto),
        created_at: Timestamp(record.created_at_ms),
        updated_at: Timestamp(record.updated_at_ms),
        completed_at: instant_from_ms(record.completed_at_ms),
        expires_at: instant_from_ms(record.expires_at_ms),
    })
}

/// The wire form of a record (the inverse of [`record_from_proto`]).
pub fn record_to_proto(record: &Record) -> v1::Record {
    v1::Record {
        scope: Some(scope_to_proto(&record.key.scope)),
        key: record.key.key.as_str().to_owned(),
        operation_id: record.operation_id.to_string(),
        fingerprint: Some(fingerprint_to_proto(&record.fingerprint)),
        state: state_to_proto(record.state).into(),
        stage: stage_to_proto(record.stage).into(),
        remote_ref: record.remote_ref.clone().unwrap_or_default(),
        fence: record.fence,
        lease: record.lease.as_ref().map(lease_to_proto),
        attempts: record.attempts,
        version: record.version,
        risk: risk_to_proto(record.policy.risk).into(),
        lease_ms: duration_to_ms(record.policy.lease),
        retention_ms: duration_to_ms(record.policy.retention),
        max_result_bytes: record.policy.max_result_bytes,
        result: record.result.as_ref().map(result_to_proto),
        error: record.error.as_ref().map(error_to_proto),
        created_at_ms: record.created_at.millis(),
        updated_at_ms: record.updated_at.millis(),
        completed_at_ms: instant_to_ms(record.completed_at),
        expires_at_ms: instant_to_ms(record.expires_at),
        previous_stage: record
            .previous_stage
            .map_or(v1::Stage::Unspecified, stage_to_proto)
            .into(),
    }
}

/// A lease from the wire (the holder is validated).
fn lease_from_proto(lease: v1::Lease) -> Result<Lease, DecodeError> {
    Ok(Lease {
        holder: Holder::new(lease.holder)?,
        expires_at: Timestamp(lease.expires_at_ms),
    })
}

/// The wire form of a lease.
fn lease_to_proto(lease: &Lease) -> v1::Lease {
    v1::Lease {
        holder: lease.holder.as_str().to_owned(),
        expires_at_ms: lease.expires_at.millis(),
    }
}
