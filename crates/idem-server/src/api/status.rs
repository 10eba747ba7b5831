//! The one conversion from a [`RequestError`] to the gRPC status a client sees.
//!
//! The status is built by `idem_proto::status`, so it carries the machine-readable reason
//! (`google.rpc.ErrorInfo` and `idem-reason` metadata) and the leader and retry hints.

use idem_core::Rejection;
use idem_proto::status;
use tonic::Status;

use crate::backend::RequestError;

impl From<RequestError> for Status {
    fn from(error: RequestError) -> Self {
        match error {
            RequestError::NotLeader {
                leader_id,
                leader_addr,
            } => status::not_leader(leader_id, leader_addr.as_deref()),
            RequestError::Rejected(Rejection::Invalid { field, message }) => {
                status::error(field.reason(), message, [])
            }
            RequestError::Rejected(rejection @ Rejection::RegionFailover { retry_after }) => {
                status::with_retry_after(rejection.reason(), rejection.to_string(), retry_after)
            }
            RequestError::Exhausted {
                reason,
                message,
                retry_after: Some(after),
            } => status::with_retry_after(reason, message, after),
            other => {
                let reason = other.reason();
                status::error(reason, other.to_string(), [])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use idem_core::fingerprint::FingerprintError;
    use idem_core::{Field, State};
    use idem_proto::reason;
    use tonic::Code;

    use super::*;

    fn check(error: RequestError, code: Code, expected_reason: &str) -> Status {
        assert_eq!(error.reason(), expected_reason);
        let status = Status::from(error);
        assert_eq!(status.code(), code, "{status:?}");
        assert_eq!(
            status::reason_of(&status).as_deref(),
            Some(expected_reason),
            "{status:?}"
        );
        status
    }

    #[test]
    fn rejections_keep_their_reason() {
        let cases = [
            (Rejection::NotFound, Code::NotFound, reason::NOT_FOUND),
            (
                Rejection::StaleFence,
                Code::FailedPrecondition,
                reason::STALE_FENCE,
            ),
            (
                Rejection::WrongState {
                    state: State::Pending,
                },
                Code::FailedPrecondition,
                reason::WRONG_STATE,
            ),
            (
                Rejection::AlreadyTerminal {
                    state: State::Completed,
                },
                Code::FailedPrecondition,
                reason::ALREADY_TERMINAL,
            ),
            (
                Rejection::IrreversibleStage {
                    stage: idem_core::Stage::Calling,
                },
                Code::FailedPrecondition,
                reason::IRREVERSIBLE_STAGE,
            ),
            (
                Rejection::ResultTooLarge {
                    limit: 64,
                    actual: 100,
                },
                Code::InvalidArgument,
                reason::RESULT_TOO_LARGE,
            ),
            (
                Rejection::VersionMismatch { current: 4 },
                Code::Aborted,
                reason::VERSION_MISMATCH,
            ),
            (
                Rejection::Invalid {
                    field: Field::Key,
                    message: "key: bad".into(),
                },
                Code::InvalidArgument,
                reason::INVALID_KEY,
            ),
        ];
        for (rejection, code, expected) in cases {
            check(RequestError::from(rejection), code, expected);
        }
    }

    #[test]
    fn limits_are_resource_exhausted_with_a_retry_hint() {
        let limited = RequestError::exhausted(
            reason::RATE_LIMITED,
            "claims of this tenant are limited",
            Some(std::time::Duration::from_millis(250)),
        );
        let status = check(limited, Code::ResourceExhausted, reason::RATE_LIMITED);
        assert_eq!(
            status::retry_after(&status),
            Some(std::time::Duration::from_millis(250))
        );
        let quota = RequestError::exhausted(reason::QUOTA_EXCEEDED, "quota", None);
        let status = check(quota, Code::ResourceExhausted, reason::QUOTA_EXCEEDED);
        assert_eq!(status::retry_after(&status), None);
        let shed = RequestError::exhausted(reason::OVERLOADED, "busy", None);
        check(shed, Code::ResourceExhausted, reason::OVERLOADED);
    }

    #[test]
    fn validation_errors_map_to_their_field_reason() {
        let key = idem_core::IdempotencyKey::new("bad key").unwrap_err();
        let status = check(key.into(), Code::InvalidArgument, reason::INVALID_KEY);
        assert!(status.message().contains("key"), "{}", status.message());

        let scope = idem_core::Scope::new("", "prod", "u", "POST /x").unwrap_err();
        check(scope.into(), Code::InvalidArgument, reason::INVALID_SCOPE);
    }

    #[test]
    fn fingerprint_errors_are_invalid_fingerprint_or_body_too_large() {
        let not_json = FingerprintError::NotJson {
            line: 1,
            column: 2,
            message: "expected value".into(),
        };
        let status = check(
            not_json.into(),
            Code::InvalidArgument,
            reason::INVALID_FINGERPRINT,
        );
        assert!(status.message().contains("expected value"));
        check(
            FingerprintError::TooLarge {
                limit: 1,
                actual: 2,
            }
            .into(),
            Code::InvalidArgument,
            reason::BODY_TOO_LARGE,
        );
    }

    #[test]
    fn timeouts_are_indeterminate_unavailable() {
        let error = RequestError::OutcomeUnknown("write not confirmed within 5s".into());
        assert!(error.is_indeterminate());
        check(
            error,
            Code::Unavailable,
            reason::UNAVAILABLE_OUTCOME_UNKNOWN,
        );
    }

    #[test]
    fn not_leader_carries_the_leader_hint() {
        let status = check(
            RequestError::NotLeader {
                leader_id: Some(2),
                leader_addr: Some("10.0.0.2:7400".into()),
            },
            Code::Unavailable,
            reason::NOT_LEADER,
        );
        assert_eq!(
            status::leader_hint(&status),
            (Some(2), Some("10.0.0.2:7400".to_owned()))
        );
    }

    #[test]
    fn internal_errors_are_internal() {
        check(
            RequestError::Internal("storage failed".into()),
            Code::Internal,
            reason::INTERNAL,
        );
    }
}
