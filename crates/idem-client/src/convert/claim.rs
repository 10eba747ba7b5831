//! Claims on the wire: the request a [`ClaimRequest`] sends and the [`Claim`] a response
//! becomes.
//!
//! Decoding is strict about what each outcome must carry (an owned claim without a fence, a
//! `COMPLETED` claim without a result, no outcome at all are `INVALID_RESPONSE`), so that a
//! caller can trust the typed [`ClaimOutcome`] it matches on.

use std::time::Duration;

use idem_core::{ClaimKind, Holder, State, Timestamp};
use idem_proto::v1;

use super::{
    claim_kind_from_proto, error_from_proto, fingerprint_to_proto, millis,
    optional_stage_from_proto, result_from_proto, risk_to_proto, scope_to_proto, stage_from_proto,
    state_from_proto,
};
use crate::claim::{Claim, ClaimOutcome, ClaimRequest, Identity, Target};
use crate::error::ClientError;
use crate::holder;
use crate::key_warning::KeyWarning;

/// The wire request of a claim, with its holder (the given one, or a new one), and that
/// holder.
pub(crate) fn claim_request_to_proto(claim: ClaimRequest) -> (v1::ClaimRequest, Holder) {
    let holder = claim.holder.unwrap_or_else(holder::generate);
    let (fingerprints, request) = match claim.identity {
        Identity::Fingerprints(f) => (f.iter().map(fingerprint_to_proto).collect(), None),
        Identity::Canonical(r) => (Vec::new(), Some(r)),
    };
    let wire = v1::ClaimRequest {
        scope: Some(scope_to_proto(&claim.target.scope)),
        key: claim.target.key.as_str().to_owned(),
        fingerprints,
        request,
        risk: claim.risk.map_or(v1::Risk::Unspecified, risk_to_proto) as i32,
        lease_ms: claim.lease.map(millis),
        retention_ms: claim.retention.map(millis),
        holder: holder.as_str().to_owned(),
        max_result_bytes: claim.max_result_bytes,
    };
    (wire, holder)
}

/// The typed answer of a claim sent with `holder` for `target`.
pub(crate) fn claim_from_proto(
    response: v1::ClaimResponse,
    holder: Holder,
    target: Target,
) -> Result<Claim, ClientError> {
    let kind = claim_kind_from_proto(response.outcome)?;
    let state = state_from_proto(response.state)?;
    let warnings = response
        .warnings
        .iter()
        .map(|w| KeyWarning::from_proto(*w))
        .collect();
    Ok(Claim {
        operation_id: response
            .operation_id
            .parse()
            .map_err(|e| ClientError::invalid_response(format!("operation id: {e}")))?,
        stage: stage_from_proto(response.stage)?,
        version: response.version,
        attempts: response.attempts,
        outcome: outcome_from_proto(kind, state, response)?,
        state,
        holder,
        target,
        warnings,
    })
}

fn outcome_from_proto(
    kind: ClaimKind,
    state: State,
    r: v1::ClaimResponse,
) -> Result<ClaimOutcome, ClientError> {
    let lease_expires_at = (r.lease_expires_at_ms != 0).then_some(Timestamp(r.lease_expires_at_ms));
    let owned_fence = || {
        (r.fence != 0)
            .then_some(r.fence)
            .ok_or_else(|| ClientError::invalid_response("owned claim without fence"))
    };
    Ok(match kind {
        ClaimKind::Acquired => ClaimOutcome::Acquired {
            fence: owned_fence()?,
            lease_expires_at,
            redelivered: r.redelivered,
        },
        ClaimKind::TakenOver => ClaimOutcome::TakenOver {
            fence: owned_fence()?,
            previous_stage: optional_stage_from_proto(r.previous_stage)?,
            remote_ref: (!r.remote_ref.is_empty()).then_some(r.remote_ref),
            lease_expires_at,
            redelivered: r.redelivered,
        },
        ClaimKind::InProgress => ClaimOutcome::InProgress {
            retry_after: Duration::from_millis(r.retry_after_ms),
            lease_expires_at,
        },
        ClaimKind::Completed => {
            let result = r
                .result
                .ok_or_else(|| ClientError::invalid_response("COMPLETED claim without result"))?;
            ClaimOutcome::Completed {
                result: result_from_proto(result)?,
            }
        }
        ClaimKind::Failed => ClaimOutcome::Failed {
            error: r.error.map(error_from_proto),
            state,
        },
        ClaimKind::FingerprintMismatch => ClaimOutcome::FingerprintMismatch,
        ClaimKind::FingerprintUnverifiable => ClaimOutcome::FingerprintUnverifiable {
            required_algorithm: r.required_algorithm,
        },
        ClaimKind::NeedsReconciliation => ClaimOutcome::NeedsReconciliation,
    })
}

#[cfg(test)]
mod tests {
    use idem_core::fingerprint::CanonicalRequest;
    use idem_core::{IdempotencyKey, RecordKey, Risk, Scope, Stage};

    use super::*;

    fn target() -> Target {
        let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges").unwrap();
        RecordKey::new(scope, IdempotencyKey::new("k1").unwrap())
    }

    fn response(outcome: v1::ClaimOutcome) -> v1::ClaimResponse {
        v1::ClaimResponse {
            outcome: outcome as i32,
            operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".into(),
            state: v1::State::Pending as i32,
            stage: v1::Stage::NotCalled as i32,
            version: 1,
            attempts: 1,
            ..Default::default()
        }
    }

    fn decode(r: v1::ClaimResponse) -> Result<Claim, ClientError> {
        claim_from_proto(r, Holder::new("h").unwrap(), target())
    }

    #[test]
    fn builder_computes_fingerprint_and_generates_holder() {
        let request = CanonicalRequest::new("POST", "/v1/charges")
            .unwrap()
            .with_json_body(r#"{"b":1,"a":2}"#);
        let claim = ClaimRequest::for_request(target(), &request, 1)
            .unwrap()
            .risk(Risk::High)
            .lease(Duration::from_millis(1500))
            .retention(Duration::from_secs(60));
        let (wire, holder) = claim_request_to_proto(claim.clone());
        assert_eq!(wire.fingerprints.len(), 1);
        assert_eq!(wire.fingerprints[0].algorithm, "jcs-sha256/v1");
        assert_eq!(
            wire.fingerprints[0].digest,
            request.fingerprint(1).unwrap().digest
        );
        assert_eq!(wire.request, None);
        assert_eq!(wire.risk, v1::Risk::High as i32);
        assert_eq!(wire.lease_ms, Some(1500));
        assert_eq!(wire.retention_ms, Some(60_000));
        assert_eq!(wire.max_result_bytes, None);
        assert_eq!(wire.holder, holder.as_str());
        assert_eq!(wire.key, "k1");
        // Each claim gets its own holder unless one is given.
        let (again, _) = claim_request_to_proto(claim.clone());
        assert_ne!(again.holder, wire.holder);
        let fixed = claim.holder(Holder::new("me-1").unwrap());
        assert_eq!(claim_request_to_proto(fixed).0.holder, "me-1");

        let server = ClaimRequest::server_hashed(target(), &request, 3).unwrap();
        let (wire, _) = claim_request_to_proto(server);
        assert!(wire.fingerprints.is_empty());
        assert_eq!(wire.request.unwrap().schema_version, 3);
        assert_eq!(wire.risk, v1::Risk::Unspecified as i32);
    }

    #[test]
    fn warnings_decode_in_order() {
        let mut r = response(v1::ClaimOutcome::Completed);
        r.result = Some(v1::StoredResult {
            status_code: 200,
            ..Default::default()
        });
        r.warnings = vec![
            v1::KeyWarning::Sequential as i32,
            v1::KeyWarning::Short as i32,
            42,
        ];
        let claim = decode(r).unwrap();
        assert_eq!(
            claim.warnings,
            [
                KeyWarning::Sequential,
                KeyWarning::Short,
                KeyWarning::Other(42)
            ]
        );
        assert!(decode(response(v1::ClaimOutcome::FingerprintMismatch))
            .unwrap()
            .warnings
            .is_empty());
    }

    #[test]
    fn outcomes_decode() {
        let mut r = response(v1::ClaimOutcome::Acquired);
        r.fence = 4;
        r.lease_expires_at_ms = 9;
        let claim = decode(r).unwrap();
        assert_eq!(claim.fence(), Some(4));
        assert!(claim.owns());
        assert_eq!(
            claim.outcome,
            ClaimOutcome::Acquired {
                fence: 4,
                lease_expires_at: Some(Timestamp(9)),
                redelivered: false
            }
        );

        let mut r = response(v1::ClaimOutcome::TakenOver);
        r.fence = 5;
        r.previous_stage = v1::Stage::RemoteConfirmed as i32;
        r.remote_ref = "ch_1".into();
        let outcome = decode(r).unwrap().outcome;
        assert_eq!(
            outcome,
            ClaimOutcome::TakenOver {
                fence: 5,
                previous_stage: Some(Stage::RemoteConfirmed),
                remote_ref: Some("ch_1".into()),
                lease_expires_at: None,
                redelivered: false
            }
        );

        let mut r = response(v1::ClaimOutcome::InProgress);
        r.retry_after_ms = 250;
        let claim = decode(r).unwrap();
        assert_eq!(claim.fence(), None);
        assert_eq!(
            claim.outcome,
            ClaimOutcome::InProgress {
                retry_after: Duration::from_millis(250),
                lease_expires_at: None
            }
        );

        let mut r = response(v1::ClaimOutcome::Completed);
        r.state = v1::State::Completed as i32;
        r.result = Some(v1::StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            ..Default::default()
        });
        match decode(r).unwrap().outcome {
            ClaimOutcome::Completed { result } => assert_eq!(result.status_code, 201),
            other => panic!("{other:?}"),
        }

        let mut r = response(v1::ClaimOutcome::Failed);
        r.state = v1::State::Cancelled as i32;
        assert_eq!(
            decode(r).unwrap().outcome,
            ClaimOutcome::Failed {
                error: None,
                state: State::Cancelled
            }
        );

        let mut r = response(v1::ClaimOutcome::FingerprintUnverifiable);
        r.required_algorithm = "jcs-sha256/v1".into();
        assert_eq!(
            decode(r).unwrap().outcome.kind().name(),
            "FINGERPRINT_UNVERIFIABLE"
        );
        assert_eq!(
            decode(response(v1::ClaimOutcome::FingerprintMismatch))
                .unwrap()
                .outcome,
            ClaimOutcome::FingerprintMismatch
        );
    }

    #[test]
    fn malformed_responses_are_invalid() {
        // Owned without a fence, COMPLETED without a result, no outcome at all.
        for r in [
            response(v1::ClaimOutcome::Acquired),
            response(v1::ClaimOutcome::Completed),
            response(v1::ClaimOutcome::Unspecified),
        ] {
            assert_eq!(decode(r).unwrap_err().reason(), "INVALID_RESPONSE");
        }
    }
}
