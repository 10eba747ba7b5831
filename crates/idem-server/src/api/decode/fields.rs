//! Request fields to the core's validated types.
//!
//! The conversions themselves (both directions, every message and enum) are shared with the
//! SDK in [`idem_proto::convert`]. What stays here is the server's policy on input: which fields a request must carry, which reason
//! a missing one is (`INVALID_SCOPE`, `INVALID_RESULT`, …), that `UNSPECIFIED` means "no
//! override" or "no filter", that `purged` is ignored on input, and server-side fingerprinting
//! within the node's limits. Nothing here decides what a caller may see (that is the
//! services' job), it only translates.

use idem_core::fingerprint::{Fingerprint, JcsOptions};
use idem_core::{ErrorSummary, IdempotencyKey, OperationId, RecordKey, Risk, State, StoredResult};
use idem_proto::convert as wire;
use idem_proto::reason;
use idem_proto::v1 as pb;

use crate::backend::RequestError;

pub use idem_proto::convert::duration_from_ms;

/// The record key of a request's scope and key (`INVALID_SCOPE`, `INVALID_KEY`).
pub fn record_key(scope: Option<pb::Scope>, key: String) -> Result<RecordKey, RequestError> {
    let scope = wire::scope_from_proto(scope)?;
    let key = IdempotencyKey::new(key)?;
    Ok(RecordKey::new(scope, key))
}

/// An operation id in its UUID text form.
pub fn operation_id(text: &str) -> Result<OperationId, RequestError> {
    if text.is_empty() {
        return Err(RequestError::argument("operation_id is required"));
    }
    Ok(text.parse::<OperationId>()?)
}

/// The fingerprints a claim sent.
pub fn fingerprints(fingerprints: Vec<pb::Fingerprint>) -> Result<Vec<Fingerprint>, RequestError> {
    fingerprints
        .into_iter()
        .map(|f| Ok(wire::fingerprint_from_proto(f)?))
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
) -> Result<Fingerprint, RequestError> {
    if let Some(body) = &request.body_json {
        if body.len() > limits.max_body_bytes {
            return Err(RequestError::invalid(
                reason::BODY_TOO_LARGE,
                format!(
                    "request.body_json is {} bytes, the limit is {} bytes",
                    body.len(),
                    limits.max_body_bytes
                ),
            ));
        }
    }
    let schema_version = request.schema_version;
    let options = JcsOptions::new().with_max_bytes(limits.max_canonical_bytes);
    let canonical = wire::canonical_request_from_proto(request)?.with_options(options);
    Ok(canonical.fingerprint(schema_version)?)
}

/// A claim's requested risk; `UNSPECIFIED` is "no override", unknown is `INVALID_POLICY`.
pub fn risk(value: i32) -> Result<Option<Risk>, RequestError> {
    Ok(wire::optional_risk_from_proto(value)?)
}

/// A result to store; absent is `INVALID_RESULT`.
pub fn stored_result(result: Option<pb::StoredResult>) -> Result<StoredResult, RequestError> {
    let result = result
        .ok_or_else(|| RequestError::invalid(reason::INVALID_RESULT, "result is required"))?;
    let stored = StoredResult {
        // Set by purges only; ignored on input.
        purged: false,
        ..wire::result_from_proto(result)?
    };
    stored.validate()?;
    Ok(stored)
}

/// An error summary to store; absent is `INVALID_RESULT`.
pub fn error_summary(error: Option<pb::ErrorSummary>) -> Result<ErrorSummary, RequestError> {
    let error =
        error.ok_or_else(|| RequestError::invalid(reason::INVALID_RESULT, "error is required"))?;
    let summary = wire::error_from_proto(error);
    summary.validate()?;
    Ok(summary)
}

/// A state filter of `ListOperations`; `UNSPECIFIED` means "no filter" (`None`).
pub fn state_filter(value: i32) -> Result<Option<State>, RequestError> {
    wire::optional_state_from_proto(value)
        .map_err(|_| RequestError::argument(format!("states: unknown value {value}")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use idem_core::fingerprint::CanonicalRequest;
    use idem_core::{ClaimKind, Holder, Lease, Policy, Record, Stage, Timestamp};

    use super::*;
    use crate::api::encode::{
        claim_kind_to_proto, record_to_proto, stage_to_proto, state_name, state_to_proto,
    };

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

    fn reason_of(result: Result<impl std::fmt::Debug, RequestError>) -> &'static str {
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
            ..Default::default()
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
            ..result.clone()
        };
        assert_eq!(reason_of(stored_result(Some(bad_status))), "INVALID_RESULT");
        // A verbatim body needs result_version 1 and a content type of visible ASCII.
        let with_body = pb::StoredResult {
            body: b"{}".to_vec(),
            content_type: "application/json".into(),
            result_version: 1,
            ..result.clone()
        };
        let stored = stored_result(Some(with_body.clone())).unwrap();
        assert_eq!(stored.body.map(|b| b.bytes), Some(b"{}".to_vec()));
        for bad in [
            pb::StoredResult {
                result_version: 0,
                ..with_body.clone()
            },
            pb::StoredResult {
                result_version: 2,
                ..with_body.clone()
            },
            pb::StoredResult {
                content_type: "text/plain\n".into(),
                ..with_body
            },
        ] {
            assert_eq!(reason_of(stored_result(Some(bad))), "INVALID_RESULT");
        }

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
            let value = i32::from(state_to_proto(state));
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
                stage_to_proto(stage).as_str_name(),
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
                claim_kind_to_proto(kind).as_str_name(),
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
        let view = record_to_proto(&record);
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
