//! Conversions between the wire types of `idem.v1` and the domain types of idem-core.
//!
//! The SDK speaks idem-core's validated types ([`Scope`], [`IdempotencyKey`],
//! [`Fingerprint`], [`StoredResult`], [`Record`], ...) so that a caller cannot send a
//! malformed key or misread an enum. Records are returned as idem-core's own [`Record`]
//! rather than an SDK copy: the conversion is lossless in both directions (see
//! [`record_from_proto`]), and one type for the server, the store, the SDK and the test
//! checkers means one set of meanings.
//!
//! Wire conventions applied here: enum value 0 (`*_UNSPECIFIED`) is never a valid answer;
//! an instant or optional string of zero/empty means "absent"; a proto map becomes a sorted
//! map. An answer that breaks these rules is [`ClientError::InvalidResponse`].

use idem_core::fingerprint::{jcs, CanonicalRequest, Fingerprint, RequestBody};
use idem_core::{
    ClaimKind, ErrorSummary, Holder, IdempotencyKey, Lease, OperationId, Policy, Record, RecordKey,
    Risk, Scope, Stage, State, StoredResult, Timestamp,
};
use idem_proto::v1;
use std::time::Duration;

use crate::error::ClientError;

type Result<T> = std::result::Result<T, ClientError>;

fn bad(what: impl std::fmt::Display) -> ClientError {
    ClientError::invalid_response(what.to_string())
}

/// The wire form of a scope.
pub fn scope_to_proto(scope: &Scope) -> v1::Scope {
    v1::Scope {
        tenant: scope.tenant().to_owned(),
        environment: scope.environment().to_owned(),
        actor: scope.actor().to_owned(),
        endpoint: scope.endpoint().to_owned(),
    }
}

/// A scope from the wire, validated.
pub fn scope_from_proto(scope: Option<v1::Scope>) -> Result<Scope> {
    let s = scope.ok_or_else(|| bad("record without scope"))?;
    Scope::new(s.tenant, s.environment, s.actor, s.endpoint).map_err(bad)
}

/// The wire form of a fingerprint.
pub fn fingerprint_to_proto(fingerprint: &Fingerprint) -> v1::Fingerprint {
    v1::Fingerprint {
        algorithm: fingerprint.algorithm.clone(),
        schema_version: fingerprint.schema_version,
        digest: fingerprint.digest.clone(),
    }
}

/// A fingerprint from the wire, validated.
pub fn fingerprint_from_proto(fingerprint: Option<v1::Fingerprint>) -> Result<Fingerprint> {
    let f = fingerprint.ok_or_else(|| bad("record without fingerprint"))?;
    Fingerprint::new(f.algorithm, f.schema_version, f.digest).map_err(bad)
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
    }
}

/// A stored result from the wire (status code must fit in 16 bits).
pub fn result_from_proto(result: v1::StoredResult) -> Result<StoredResult> {
    Ok(StoredResult {
        status_code: u16::try_from(result.status_code)
            .map_err(|_| bad(format!("status code {} out of range", result.status_code)))?,
        resource_id: result.resource_id,
        resource_version: result.resource_version,
        fields: result.fields.into_iter().collect(),
        purged: result.purged,
    })
}

/// The wire form of an error summary.
pub fn error_to_proto(error: &ErrorSummary) -> v1::ErrorSummary {
    v1::ErrorSummary {
        code: error.code.clone(),
        message: error.message.clone(),
    }
}

/// An error summary from the wire.
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

/// A risk class from the wire; `UNSPECIFIED` or unknown values are invalid.
pub fn risk_from_proto(risk: i32) -> Result<Risk> {
    match v1::Risk::try_from(risk) {
        Ok(v1::Risk::Low) => Ok(Risk::Low),
        Ok(v1::Risk::Normal) => Ok(Risk::Normal),
        Ok(v1::Risk::High) => Ok(Risk::High),
        _ => Err(bad(format!("invalid risk {risk}"))),
    }
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

/// A state from the wire; `UNSPECIFIED` or unknown values are invalid.
pub fn state_from_proto(state: i32) -> Result<State> {
    let wire = v1::State::try_from(state).map_err(|_| bad(format!("invalid state {state}")))?;
    State::ALL
        .into_iter()
        .find(|s| state_to_proto(*s) == wire)
        .ok_or_else(|| bad(format!("invalid state {state}")))
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

/// An optional stage from the wire: `UNSPECIFIED` is `None`, unknown values are invalid.
pub fn optional_stage_from_proto(stage: i32) -> Result<Option<Stage>> {
    match v1::Stage::try_from(stage) {
        Ok(v1::Stage::Unspecified) => Ok(None),
        Ok(v1::Stage::NotCalled) => Ok(Some(Stage::NotCalled)),
        Ok(v1::Stage::Calling) => Ok(Some(Stage::Calling)),
        Ok(v1::Stage::RemoteConfirmed) => Ok(Some(Stage::RemoteConfirmed)),
        Ok(v1::Stage::LocalDone) => Ok(Some(Stage::LocalDone)),
        Err(_) => Err(bad(format!("invalid stage {stage}"))),
    }
}

/// A stage from the wire; `UNSPECIFIED` or unknown values are invalid.
pub fn stage_from_proto(stage: i32) -> Result<Stage> {
    optional_stage_from_proto(stage)?.ok_or_else(|| bad("stage unspecified"))
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

/// A claim outcome kind from the wire; `UNSPECIFIED` or unknown values are invalid.
pub fn claim_kind_from_proto(outcome: i32) -> Result<ClaimKind> {
    use ClaimKind::*;
    let wire = v1::ClaimOutcome::try_from(outcome)
        .map_err(|_| bad(format!("invalid outcome {outcome}")))?;
    [
        Acquired,
        TakenOver,
        InProgress,
        Completed,
        Failed,
        FingerprintMismatch,
        FingerprintUnverifiable,
        NeedsReconciliation,
    ]
    .into_iter()
    .find(|k| claim_kind_to_proto(*k) == wire)
    .ok_or_else(|| bad("claim outcome unspecified"))
}

/// Milliseconds of a duration, saturating.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn optional_instant(ms: u64) -> Option<Timestamp> {
    (ms != 0).then_some(Timestamp(ms))
}

fn optional_text(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// A record from the wire, validated.
///
/// Lossless: [`record_to_proto`] of the result gives back the same message for every record
/// a server can send (absent optional parts are zero or empty on the wire, by the
/// conventions of `idempotency.proto`).
pub fn record_from_proto(record: v1::Record) -> Result<Record> {
    let scope = scope_from_proto(record.scope)?;
    let key = IdempotencyKey::new(record.key).map_err(bad)?;
    let operation_id: OperationId = record.operation_id.parse().map_err(bad)?;
    let lease = record
        .lease
        .map(|l| -> Result<Lease> {
            Ok(Lease {
                holder: Holder::new(l.holder).map_err(bad)?,
                expires_at: Timestamp(l.expires_at_ms),
            })
        })
        .transpose()?;
    Ok(Record {
        key: RecordKey::new(scope, key),
        operation_id,
        fingerprint: fingerprint_from_proto(record.fingerprint)?,
        state: state_from_proto(record.state)?,
        stage: stage_from_proto(record.stage)?,
        remote_ref: optional_text(record.remote_ref),
        previous_stage: optional_stage_from_proto(record.previous_stage)?,
        fence: record.fence,
        lease,
        attempts: record.attempts,
        version: record.version,
        policy: Policy {
            lease: Duration::from_millis(record.lease_ms),
            retention: Duration::from_millis(record.retention_ms),
            risk: risk_from_proto(record.risk)?,
            max_result_bytes: record.max_result_bytes,
        },
        result: record.result.map(result_from_proto).transpose()?,
        error: record.error.map(error_from_proto),
        created_at: Timestamp(record.created_at_ms),
        updated_at: Timestamp(record.updated_at_ms),
        completed_at: optional_instant(record.completed_at_ms),
        expires_at: optional_instant(record.expires_at_ms),
    })
}

/// The wire form of a record (the inverse of [`record_from_proto`]).
pub fn record_to_proto(record: &Record) -> v1::Record {
    v1::Record {
        scope: Some(scope_to_proto(&record.key.scope)),
        key: record.key.key.as_str().to_owned(),
        operation_id: record.operation_id.to_string(),
        fingerprint: Some(fingerprint_to_proto(&record.fingerprint)),
        state: state_to_proto(record.state) as i32,
        stage: stage_to_proto(record.stage) as i32,
        remote_ref: record.remote_ref.clone().unwrap_or_default(),
        fence: record.fence,
        lease: record.lease.as_ref().map(|l| v1::Lease {
            holder: l.holder.as_str().to_owned(),
            expires_at_ms: l.expires_at.millis(),
        }),
        attempts: record.attempts,
        version: record.version,
        risk: risk_to_proto(record.policy.risk) as i32,
        lease_ms: millis(record.policy.lease),
        retention_ms: millis(record.policy.retention),
        max_result_bytes: record.policy.max_result_bytes,
        result: record.result.as_ref().map(result_to_proto),
        error: record.error.as_ref().map(error_to_proto),
        created_at_ms: record.created_at.millis(),
        updated_at_ms: record.updated_at.millis(),
        completed_at_ms: record.completed_at.map_or(0, Timestamp::millis),
        expires_at_ms: record.expires_at.map_or(0, Timestamp::millis),
        previous_stage: record
            .previous_stage
            .map_or(v1::Stage::Unspecified, stage_to_proto) as i32,
    }
}

/// The record of a response that must carry one.
pub(crate) fn required_record(record: Option<v1::Record>) -> Result<Record> {
    record_from_proto(record.ok_or_else(|| bad("response without record"))?)
}

/// The wire form of a canonical request, for the server to fingerprint.
///
/// A body given as a parsed value is sent as its canonical JSON text; a raw body is sent as
/// is (the server parses it with the same rules).
pub fn canonical_request_to_proto(
    request: &CanonicalRequest,
    schema_version: u32,
) -> Result<v1::CanonicalRequest> {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    pub(crate) fn sample_record() -> Record {
        let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges").unwrap();
        Record {
            key: RecordKey::new(scope, IdempotencyKey::new("order-7f3a").unwrap()),
            operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap(),
            fingerprint: Fingerprint::new("jcs-sha256/v1", 1, vec![7; 32]).unwrap(),
            state: State::Completed,
            stage: Stage::LocalDone,
            remote_ref: Some("ch_1".into()),
            previous_stage: Some(Stage::Calling),
            fence: 3,
            lease: None,
            attempts: 2,
            version: 9,
            policy: Policy {
                risk: Risk::High,
                ..Policy::default()
            },
            result: Some(StoredResult {
                status_code: 201,
                resource_id: "ch_1".into(),
                resource_version: "v1".into(),
                fields: BTreeMap::from([("amount".into(), "100".into())]),
                purged: false,
            }),
            error: None,
            created_at: Timestamp(1_000),
            updated_at: Timestamp(2_000),
            completed_at: Some(Timestamp(2_000)),
            expires_at: Some(Timestamp(86_402_000)),
        }
    }

    #[test]
    fn record_round_trips() {
        let record = sample_record();
        let wire = record_to_proto(&record);
        assert_eq!(wire.completed_at_ms, 2_000);
        assert_eq!(wire.risk, v1::Risk::High as i32);
        assert_eq!(record_from_proto(wire.clone()).unwrap(), record);

        let mut live = record;
        live.state = State::InProgress;
        live.stage = Stage::NotCalled;
        live.remote_ref = None;
        live.previous_stage = None;
        live.result = None;
        live.error = Some(ErrorSummary {
            code: "timeout".into(),
            message: "upstream".into(),
        });
        live.completed_at = None;
        live.expires_at = None;
        live.lease = Some(Lease {
            holder: Holder::new("w-1").unwrap(),
            expires_at: Timestamp(31_000),
        });
        let wire = record_to_proto(&live);
        assert_eq!(wire.previous_stage, 0);
        assert_eq!(wire.remote_ref, "");
        assert_eq!(record_from_proto(wire).unwrap(), live);
    }

    #[test]
    fn invalid_records_are_rejected() {
        let good = record_to_proto(&sample_record());
        let cases: [fn(&mut v1::Record); 9] = [
            |r| r.state = 0,
            |r| r.state = 99,
            |r| r.stage = 0,
            |r| r.risk = 0,
            |r| r.scope = None,
            |r| r.fingerprint = None,
            |r| r.key = "no spaces".into(),
            |r| r.operation_id = "x".into(),
            |r| r.result.as_mut().unwrap().status_code = 70_000,
        ];
        for (i, mutate) in cases.iter().enumerate() {
            let mut wire = good.clone();
            mutate(&mut wire);
            let err = record_from_proto(wire).unwrap_err();
            assert_eq!(err.reason(), "INVALID_RESPONSE", "case {i}");
        }
    }

    #[test]
    fn enums_map_one_to_one() {
        for state in State::ALL {
            assert_eq!(
                state_from_proto(state_to_proto(state) as i32).unwrap(),
                state
            );
            // The wire name is the core name with the enum prefix.
            assert_eq!(
                state_to_proto(state).as_str_name(),
                format!("STATE_{}", state.name())
            );
        }
        for stage in [
            Stage::NotCalled,
            Stage::Calling,
            Stage::RemoteConfirmed,
            Stage::LocalDone,
        ] {
            assert_eq!(
                stage_from_proto(stage_to_proto(stage) as i32).unwrap(),
                stage
            );
        }
        for risk in [Risk::Low, Risk::Normal, Risk::High] {
            assert_eq!(risk_from_proto(risk_to_proto(risk) as i32).unwrap(), risk);
        }
        for n in 1..=8 {
            let kind = claim_kind_from_proto(n).unwrap();
            assert_eq!(claim_kind_to_proto(kind) as i32, n);
            assert_eq!(
                claim_kind_to_proto(kind).as_str_name(),
                format!("CLAIM_OUTCOME_{}", kind.name())
            );
        }
        assert!(claim_kind_from_proto(0).is_err());
        assert_eq!(optional_stage_from_proto(0).unwrap(), None);
    }

    #[test]
    fn canonical_request_keeps_body_presence_and_query_order() {
        let request = CanonicalRequest::new("POST", "/v1/charges/{id}")
            .unwrap()
            .with_path_param("id", "7")
            .with_query_param("tag", "b")
            .with_query_param("tag", "a");
        let wire = canonical_request_to_proto(&request, 2).unwrap();
        assert_eq!(wire.body_json, None);
        assert_eq!(wire.schema_version, 2);
        assert_eq!(wire.path_params.get("id").map(String::as_str), Some("7"));
        let values: Vec<_> = wire.query.iter().map(|q| q.value.as_str()).collect();
        assert_eq!(values, ["b", "a"]);

        let with_body = request.with_json_body("null");
        let wire = canonical_request_to_proto(&with_body, 1).unwrap();
        assert_eq!(wire.body_json.as_deref(), Some(&b"null"[..]));
    }
}
