//! Conversions between the wire types of `idem.v1` and the core's validated types.
//!
//! Inbound, every field is validated by the core's constructors, so an error names the field
//! and carries the reason the API documents (`INVALID_KEY`, `INVALID_SCOPE`, …). Outbound, the
//! core's enums map one to one onto the proto enums; nothing here decides what a caller may
//! see (that is [`crate::api::idempotency`]'s job), it only translates.

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::fingerprint::{CanonicalRequest, Fingerprint, JcsOptions};
use idem_core::{
    ClaimKind, ErrorSummary, IdempotencyKey, OperationId, Record, RecordKey, Risk, Scope, Stage,
    State, StoredResult, Timestamp,
};
use idem_proto::reason;
use idem_proto::v1 as pb;

use crate::api::ApiError;

/// The scope of a request; absent is `INVALID_SCOPE`.
pub fn scope(scope: Option<pb::Scope>) -> Result<Scope, ApiError> {
    let scope = scope.ok_or_else(|| {
        ApiError::invalid(
            reason::INVALID_SCOPE,
            "scope is required (tenant, environment, actor, endpoint)",
        )
    })?;
    Ok(Scope::new(
        scope.tenant,
        scope.environment,
        scope.actor,
        scope.endpoint,
    )?)
}

/// The record key of a request's scope and key.
pub fn record_key(scope_pb: Option<pb::Scope>, key: String) -> Result<RecordKey, ApiError> {
    let scope = scope(scope_pb)?;
    let key = IdempotencyKey::new(key)?;
    Ok(RecordKey::new(scope, key))
}

/// An operation id in its UUID text form.
pub fn operation_id(text: &str) -> Result<OperationId, ApiError> {
    if text.is_empty() {
        return Err(ApiError::argument("operation_id is required"));
    }
    Ok(text.parse::<OperationId>()?)
}

/// The fingerprints a claim sent.
pub fn fingerprints(fingerprints: Vec<pb::Fingerprint>) -> Result<Vec<Fingerprint>, ApiError> {
    fingerprints
        .into_iter()
        .map(|f| Ok(Fingerprint::new(f.algorithm, f.schema_version, f.digest)?))
        .collect()
}

/// Limits for server-side fingerprinting.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Largest accepted body, in bytes (`BODY_TOO_LARGE` above).
    pub max_body_bytes: usize,
    /// Largest canonical form of the whole request, in bytes.
    pub max_canonical_bytes: usize,
}

/// The `jcs-sha256/v1` fingerprint of a canonical request, computed on this node.
pub fn canonical_fingerprint(
    request: pb::CanonicalRequest,
    limits: BodyLimits,
) -> Result<Fingerprint, ApiError> {
    if let Some(body) = &request.body_json {
        if body.len() > limits.max_body_bytes {
            return Err(ApiError::invalid(
                reason::BODY_TOO_LARGE,
                format!(
                    "request.body_json is {} bytes, the limit is {} bytes",
                    body.len(),
                    limits.max_body_bytes
                ),
            ));
        }
    }
    let options = JcsOptions::new().with_max_bytes(limits.max_canonical_bytes);
    let canonical = CanonicalRequest::new(request.method, request.route)?
        .with_options(options)
        .with_path_params(request.path_params)
        .with_query(request.query.into_iter().map(|q| (q.name, q.value)));
    let canonical = match request.body_json {
        Some(body) => canonical.with_json_body(body),
        None => canonical,
    };
    Ok(canonical.fingerprint(request.schema_version)?)
}

/// A claim's requested risk; `UNSPECIFIED` is "no override".
pub fn risk(value: i32) -> Result<Option<Risk>, ApiError> {
    match pb::Risk::try_from(value) {
        Ok(pb::Risk::Unspecified) => Ok(None),
        Ok(pb::Risk::Low) => Ok(Some(Risk::Low)),
        Ok(pb::Risk::Normal) => Ok(Some(Risk::Normal)),
        Ok(pb::Risk::High) => Ok(Some(Risk::High)),
        Err(_) => Err(ApiError::invalid(
            reason::INVALID_POLICY,
            format!("risk: unknown value {value}"),
        )),
    }
}

/// A duration in milliseconds.
pub fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A result to store; absent is `INVALID_RESULT`.
pub fn stored_result(result: Option<pb::StoredResult>) -> Result<StoredResult, ApiError> {
    let result =
        result.ok_or_else(|| ApiError::invalid(reason::INVALID_RESULT, "result is required"))?;
    let status_code = u16::try_from(result.status_code).map_err(|_| {
        ApiError::invalid(
            reason::INVALID_RESULT,
            format!(
                "result.status_code: {} is outside 100..=599",
                result.status_code
            ),
        )
    })?;
    let stored = StoredResult {
        status_code,
        resource_id: result.resource_id,
        resource_version: result.resource_version,
        fields: result.fields.into_iter().collect::<BTreeMap<_, _>>(),
        // Set by purges only; ignored on input.
        purged: false,
    };
    stored.validate()?;
    Ok(stored)
}

/// An error summary to store; absent is `INVALID_RESULT`.
pub fn error_summary(error: Option<pb::ErrorSummary>) -> Result<ErrorSummary, ApiError> {
    let error =
        error.ok_or_else(|| ApiError::invalid(reason::INVALID_RESULT, "error is required"))?;
    let summary = ErrorSummary {
        code: error.code,
        message: error.message,
    };
    summary.validate()?;
    Ok(summary)
}

/// A state filter of `ListOperations`; `UNSPECIFIED` means "no filter" (`None`).
pub fn state_filter(value: i32) -> Result<Option<State>, ApiError> {
    let state = pb::State::try_from(value)
        .map_err(|_| ApiError::argument(format!("states: unknown value {value}")))?;
    Ok(match state {
        pb::State::Unspecified => None,
        pb::State::Pending => Some(State::Pending),
        pb::State::InProgress => Some(State::InProgress),
        pb::State::Completed => Some(State::Completed),
        pb::State::RetryableFailure => Some(State::RetryableFailure),
        pb::State::TerminalFailure => Some(State::TerminalFailure),
        pb::State::Cancelled => Some(State::Cancelled),
        pb::State::NeedsReconciliation => Some(State::NeedsReconciliation),
    })
}

/// The proto value of a state.
pub fn state_pb(state: State) -> pb::State {
    match state {
        State::Pending => pb::State::Pending,
        State::InProgress => pb::State::InProgress,
        State::Completed => pb::State::Completed,
        State::RetryableFailure => pb::State::RetryableFailure,
        State::TerminalFailure => pb::State::TerminalFailure,
        State::Cancelled => pb::State::Cancelled,
        State::NeedsReconciliation => pb::State::NeedsReconciliation,
    }
}

/// The proto value of a stage.
pub fn stage_pb(stage: Stage) -> pb::Stage {
    match stage {
        Stage::NotCalled => pb::Stage::NotCalled,
        Stage::Calling => pb::Stage::Calling,
        Stage::RemoteConfirmed => pb::Stage::RemoteConfirmed,
        Stage::LocalDone => pb::Stage::LocalDone,
    }
}

/// The proto value of a risk class.
pub fn risk_pb(risk: Risk) -> pb::Risk {
    match risk {
        Risk::Low => pb::Risk::Low,
        Risk::Normal => pb::Risk::Normal,
        Risk::High => pb::Risk::High,
    }
}

/// The proto value of a claim outcome.
pub fn claim_kind_pb(kind: ClaimKind) -> pb::ClaimOutcome {
    match kind {
        ClaimKind::Acquired => pb::ClaimOutcome::Acquired,
        ClaimKind::TakenOver => pb::ClaimOutcome::TakenOver,
        ClaimKind::InProgress => pb::ClaimOutcome::InProgress,
        ClaimKind::Completed => pb::ClaimOutcome::Completed,
        ClaimKind::Failed => pb::ClaimOutcome::Failed,
        ClaimKind::FingerprintMismatch => pb::ClaimOutcome::FingerprintMismatch,
        ClaimKind::FingerprintUnverifiable => pb::ClaimOutcome::FingerprintUnverifiable,
        ClaimKind::NeedsReconciliation => pb::ClaimOutcome::NeedsReconciliation,
    }
}

/// Milliseconds of a timestamp (0 when absent).
pub fn at_ms(at: Option<Timestamp>) -> u64 {
    at.map_or(0, Timestamp::millis)
}

/// Milliseconds of a duration, saturating.
pub fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The proto scope of a core scope.
pub fn scope_pb(scope: &Scope) -> pb::Scope {
    pb::Scope {
        tenant: scope.tenant().to_owned(),
        environment: scope.environment().to_owned(),
        actor: scope.actor().to_owned(),
        endpoint: scope.endpoint().to_owned(),
    }
}

/// The proto form of a stored fingerprint.
pub fn fingerprint_pb(fingerprint: &Fingerprint) -> pb::Fingerprint {
    pb::Fingerprint {
        algorithm: fingerprint.algorithm.clone(),
        schema_version: fingerprint.schema_version,
        digest: fingerprint.digest.clone(),
    }
}

/// The proto form of a stored result.
pub fn result_pb(result: &StoredResult) -> pb::StoredResult {
    pb::StoredResult {
        status_code: result.status_code.into(),
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

/// The proto form of an error summary.
pub fn error_pb(error: &ErrorSummary) -> pb::ErrorSummary {
    pb::ErrorSummary {
        code: error.code.clone(),
        message: error.message.clone(),
    }
}

/// The full proto view of a record.
pub fn record_pb(record: &Record) -> pb::Record {
    pb::Record {
        scope: Some(scope_pb(&record.key.scope)),
        key: record.key.key.as_str().to_owned(),
        operation_id: record.operation_id.to_string(),
        fingerprint: Some(fingerprint_pb(&record.fingerprint)),
        state: state_pb(record.state).into(),
        stage: stage_pb(record.stage).into(),
        remote_ref: record.remote_ref.clone().unwrap_or_default(),
        fence: record.fence,
        lease: record.lease.as_ref().map(|lease| pb::Lease {
            holder: lease.holder.as_str().to_owned(),
            expires_at_ms: lease.expires_at.millis(),
        }),
        attempts: record.attempts,
        version: record.version,
        risk: risk_pb(record.policy.risk).into(),
        lease_ms: duration_ms(record.policy.lease),
        retention_ms: duration_ms(record.policy.retention),
        max_result_bytes: record.policy.max_result_bytes,
        result: record.result.as_ref().map(result_pb),
        error: record.error.as_ref().map(error_pb),
        created_at_ms: record.created_at.millis(),
        updated_at_ms: record.updated_at.millis(),
        completed_at_ms: at_ms(record.completed_at),
        expires_at_ms: at_ms(record.expires_at),
        previous_stage: record
            .previous_stage
            .map_or(pb::Stage::Unspecified, stage_pb)
            .into(),
    }
}

/// The proto name of a state (`STATE_PENDING`), the key of `records_by_state`.
pub fn state_name(state: State) -> &'static str {
    state_pb(state).as_str_name()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use idem_core::{Holder, Lease, Policy};

    use super::*;

    const LIMITS: BodyLimits = BodyLimits {
        max_body_bytes: 64,
        max_canonical_bytes: 4096,
    };

    fn pb_scope() -> pb::Scope {
        pb::Scope {
            tenant: "acme".into(),
            environment: "prod".into(),
            actor: "user-42".into(),
            endpoint: "POST /v1/charges".into(),
        }
    }

    fn reason_of(result: Result<impl std::fmt::Debug, ApiError>) -> &'static str {
        result.unwrap_err().reason()
    }

    #[test]
    fn identity_is_validated_with_field_reasons() {
        assert!(record_key(Some(pb_scope()), "order-1".into()).is_ok());
        assert_eq!(reason_of(record_key(None, "k".into())), "INVALID_SCOPE");
        assert_eq!(
            reason_of(record_key(Some(pb_scope()), "bad key".into())),
            "INVALID_KEY"
        );
        assert_eq!(
            reason_of(record_key(Some(pb_scope()), String::new())),
            "INVALID_KEY"
        );
        let mut bad = pb_scope();
        bad.endpoint = "charges".into();
        assert_eq!(
            reason_of(record_key(Some(bad), "k".into())),
            "INVALID_SCOPE"
        );
        assert_eq!(reason_of(operation_id("nope")), "INVALID_ARGUMENT");
        assert_eq!(reason_of(operation_id("")), "INVALID_ARGUMENT");
        let id = OperationId::generate();
        assert_eq!(operation_id(&id.to_string()).unwrap(), id);
    }

    #[test]
    fn fingerprints_are_validated() {
        let good = pb::Fingerprint {
            algorithm: "jcs-sha256/v1".into(),
            schema_version: 1,
            digest: vec![7; 32],
        };
        assert_eq!(fingerprints(vec![good.clone()]).unwrap().len(), 1);
        let short = pb::Fingerprint {
            digest: vec![1; 3],
            ..good.clone()
        };
        assert_eq!(reason_of(fingerprints(vec![short])), "INVALID_FINGERPRINT");
        let bad_algorithm = pb::Fingerprint {
            algorithm: "SHA256".into(),
            ..good
        };
        assert_eq!(
            reason_of(fingerprints(vec![bad_algorithm])),
            "INVALID_FINGERPRINT"
        );
    }

    fn canonical(body: Option<&str>) -> pb::CanonicalRequest {
        pb::CanonicalRequest {
            method: "POST".into(),
            route: "/v1/charges/{id}".into(),
            path_params: HashMap::from([("id".to_owned(), "42".to_owned())]),
            query: vec![
                pb::QueryParam {
                    name: "expand".into(),
                    value: "customer".into(),
                },
                pb::QueryParam {
                    name: "expand".into(),
                    value: "invoice".into(),
                },
            ],
            body_json: body.map(|b| b.as_bytes().to_vec()),
            schema_version: 2,
        }
    }

    #[test]
    fn server_fingerprint_matches_the_core_computation() {
        let computed = canonical_fingerprint(
            canonical(Some(r#"{"currency":"EUR","amount":1000}"#)),
            LIMITS,
        )
        .unwrap();
        let expected = CanonicalRequest::new("POST", "/v1/charges/{id}")
            .unwrap()
            .with_path_param("id", "42")
            .with_query_param("expand", "customer")
            .with_query_param("expand", "invoice")
            .with_json_body(r#"{ "amount": 1000, "currency": "EUR" }"#)
            .fingerprint(2)
            .unwrap();
        assert_eq!(computed, expected);
        assert_eq!(computed.algorithm, "jcs-sha256/v1");
        assert_eq!(computed.schema_version, 2);

        // Absent body and JSON null differ.
        let absent = canonical_fingerprint(canonical(None), LIMITS).unwrap();
        let null = canonical_fingerprint(canonical(Some("null")), LIMITS).unwrap();
        assert_ne!(absent.digest, null.digest);
    }

    #[test]
    fn bad_bodies_are_typed() {
        let big = format!("\"{}\"", "x".repeat(100));
        assert_eq!(
            reason_of(canonical_fingerprint(canonical(Some(&big)), LIMITS)),
            "BODY_TOO_LARGE"
        );
        let err = canonical_fingerprint(canonical(Some("{amount: 1}")), LIMITS).unwrap_err();
        assert_eq!(err.reason(), "INVALID_FINGERPRINT");
        assert!(err.to_string().contains("line 1"), "{err}");
        let dup = canonical_fingerprint(canonical(Some(r#"{"a":1,"a":2}"#)), LIMITS);
        assert_eq!(reason_of(dup), "INVALID_FINGERPRINT");
        let mut lower = canonical(None);
        lower.method = "post".into();
        assert_eq!(
            reason_of(canonical_fingerprint(lower, LIMITS)),
            "INVALID_FINGERPRINT"
        );
    }

    #[test]
    fn results_and_errors_are_validated() {
        let result = pb::StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            resource_version: "3".into(),
            fields: HashMap::from([("amount".to_owned(), "100".to_owned())]),
            purged: true,
        };
        let stored = stored_result(Some(result.clone())).unwrap();
        assert_eq!(stored.status_code, 201);
        assert!(!stored.purged, "purged is ignored on input");
        assert_eq!(stored.fields.get("amount").map(String::as_str), Some("100"));
        assert_eq!(reason_of(stored_result(None)), "INVALID_RESULT");
        let bad_status = pb::StoredResult {
            status_code: 70_000,
            ..result.clone()
        };
        assert_eq!(reason_of(stored_result(Some(bad_status))), "INVALID_RESULT");
        let bad_status = pb::StoredResult {
            status_code: 99,
            ..result
        };
        assert_eq!(reason_of(stored_result(Some(bad_status))), "INVALID_RESULT");

        assert_eq!(reason_of(error_summary(None)), "INVALID_RESULT");
        let bad_code = pb::ErrorSummary {
            code: "bad code".into(),
            message: String::new(),
        };
        assert_eq!(reason_of(error_summary(Some(bad_code))), "INVALID_RESULT");
    }

    #[test]
    fn enums_map_one_to_one() {
        assert_eq!(risk(0).unwrap(), None);
        assert_eq!(risk(3).unwrap(), Some(Risk::High));
        assert_eq!(reason_of(risk(9)), "INVALID_POLICY");
        for state in State::ALL {
            let value = i32::from(state_pb(state));
            assert_eq!(state_filter(value).unwrap(), Some(state));
            assert_eq!(state_name(state), format!("STATE_{}", state.name()));
        }
        assert_eq!(state_filter(0).unwrap(), None);
        assert_eq!(reason_of(state_filter(42)), "INVALID_ARGUMENT");
        for stage in [
            Stage::NotCalled,
            Stage::Calling,
            Stage::RemoteConfirmed,
            Stage::LocalDone,
        ] {
            assert_eq!(
                stage_pb(stage).as_str_name(),
                format!("STAGE_{}", stage.name())
            );
        }
        for kind in [
            ClaimKind::Acquired,
            ClaimKind::TakenOver,
            ClaimKind::InProgress,
            ClaimKind::Completed,
            ClaimKind::Failed,
            ClaimKind::FingerprintMismatch,
            ClaimKind::FingerprintUnverifiable,
            ClaimKind::NeedsReconciliation,
        ] {
            assert_eq!(
                claim_kind_pb(kind).as_str_name(),
                format!("CLAIM_OUTCOME_{}", kind.name())
            );
        }
    }

    #[test]
    fn record_view_carries_every_field() {
        let key = record_key(Some(pb_scope()), "order-1".into()).unwrap();
        let record = Record {
            key,
            operation_id: OperationId::generate(),
            fingerprint: Fingerprint::new("jcs-sha256/v1", 1, vec![1; 32]).unwrap(),
            state: State::InProgress,
            stage: Stage::RemoteConfirmed,
            remote_ref: Some("ch_9".into()),
            previous_stage: Some(Stage::Calling),
            fence: 3,
            lease: Some(Lease {
                holder: Holder::new("w-1").unwrap(),
                expires_at: Timestamp(5000),
            }),
            attempts: 2,
            version: 7,
            policy: Policy::default(),
            result: None,
            error: None,
            created_at: Timestamp(1000),
            updated_at: Timestamp(2000),
            completed_at: None,
            expires_at: None,
        };
        let view = record_pb(&record);
        assert_eq!(view.key, "order-1");
        assert_eq!(view.scope, Some(pb_scope()));
        assert_eq!(view.operation_id, record.operation_id.to_string());
        assert_eq!(view.state(), pb::State::InProgress);
        assert_eq!(view.stage(), pb::Stage::RemoteConfirmed);
        assert_eq!(view.previous_stage(), pb::Stage::Calling);
        assert_eq!(view.remote_ref, "ch_9");
        assert_eq!(view.fence, 3);
        assert_eq!(view.lease.as_ref().unwrap().expires_at_ms, 5000);
        assert_eq!(view.risk(), pb::Risk::Normal);
        assert_eq!(view.lease_ms, 30_000);
        assert_eq!(view.retention_ms, 86_400_000);
        assert_eq!(view.max_result_bytes, 16 * 1024);
        assert_eq!((view.created_at_ms, view.updated_at_ms), (1000, 2000));
        assert_eq!((view.completed_at_ms, view.expires_at_ms), (0, 0));
    }
}
