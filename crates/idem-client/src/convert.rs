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
    use idem_core::testing::sample::completed_record;

    use super::*;

    #[test]
    fn invalid_records_are_rejected() {
        let good = record_to_proto(&completed_record());
        assert_eq!(
            required_record(Some(good.clone())).unwrap(),
            completed_record()
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
