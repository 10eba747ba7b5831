//! Conversions between the wire types of `idem.v1` and the domain types of idem-core.
//!
//! The SDK speaks idem-core's validated types ([`Scope`](idem_core::Scope),
//! [`Fingerprint`](idem_core::fingerprint::Fingerprint), [`Record`], ...) so that a caller
//! cannot send a malformed key or misread an enum. Records are returned as idem-core's own
//! [`Record`] rather than an SDK copy: the conversion is lossless in both directions (see
//! [`record_from_proto`]), and one type for the server, the store, the SDK and the test
//! checkers means one set of meanings.
//!
//! The conversions are shared with the server: they live in [`idem_proto::convert`] and are
//! re-exported here. An answer that breaks the wire conventions fails with a
//! [`DecodeError`], which the SDK reports as [`ClientError::InvalidResponse`].

use idem_core::Record;
use idem_proto::v1;

pub use idem_proto::convert::{
    canonical_request_to_proto, claim_kind_from_proto, claim_kind_to_proto,
    duration_to_ms as millis, error_from_proto, error_to_proto, fingerprint_from_proto,
    fingerprint_to_proto, optional_stage_from_proto, record_from_proto, record_to_proto,
    result_from_proto, result_to_proto, risk_from_proto, risk_to_proto, scope_from_proto,
    scope_to_proto, stage_from_proto, stage_to_proto, state_from_proto, state_to_proto,
    DecodeError,
};

use crate::error::ClientError;

/// The record of a response that must carry one.
pub(crate) fn required_record(record: Option<v1::Record>) -> Result<Record, ClientError> {
    let record = record.ok_or_else(|| ClientError::invalid_response("response without record"))?;
    Ok(record_from_proto(record)?)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use idem_core::fingerprint::Fingerprint;
    use idem_core::{
        IdempotencyKey, Policy, RecordKey, Risk, Scope, Stage, State, StoredResult, Timestamp,
    };

    use super::*;

    fn sample_record() -> Record {
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
    fn invalid_records_are_rejected() {
        let good = record_to_proto(&sample_record());
        assert_eq!(
            required_record(Some(good.clone())).unwrap(),
            sample_record()
        );
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
            let err = required_record(Some(wire)).unwrap_err();
            assert_eq!(err.reason(), "INVALID_RESPONSE", "case {i}");
        }
        let err = required_record(None).unwrap_err();
        assert_eq!(err.reason(), "INVALID_RESPONSE");
    }
}
