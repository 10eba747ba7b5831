//! The one error type of the node's API, and its one conversion to a gRPC status.
//!
//! Every failure a client can see passes through [`ApiError`] and leaves as a
//! [`tonic::Status`] built by `idem_proto::status`, so it always carries a machine-readable
//! reason (in a `google.rpc.ErrorInfo` and in the `idem-reason` metadata) and, where useful,
//! hints (`leader-id`, `leader-addr`).
//!
//! The distinction that matters most is between *definite* and *indeterminate* failures.
//! A validation error or a core [`Rejection`] means nothing changed. A Raft write or
//! read-index that did not finish in time may still be applied, so it is
//! [`ApiError::OutcomeUnknown`] (`UNAVAILABLE` / `UNAVAILABLE_OUTCOME_UNKNOWN`): the client
//! retries with the same key, holder or fence and the state machine's idempotence makes the
//! retry safe. It is never reported as "did not happen".

use idem_core::fingerprint::FingerprintError;
use idem_core::{Rejection, ValidationError};
use idem_proto::convert::DecodeError;
use idem_proto::{reason, status};
use tonic::Status;

/// Why an API call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Malformed input; nothing was proposed. `reason` is one of the `INVALID_*`,
    /// `BODY_TOO_LARGE` or `RESULT_TOO_LARGE` reasons.
    #[error("{message}")]
    Invalid {
        /// The machine-readable reason.
        reason: &'static str,
        /// What was wrong, for a person.
        message: String,
    },
    /// The state machine refused the command; nothing changed.
    #[error("{0}")]
    Rejected(Rejection),
    /// This node cannot serve the request; the leader may.
    #[error("not the leader")]
    NotLeader {
        /// The leader's Raft id, when known.
        leader_id: Option<u64>,
        /// The leader's public API address, when known.
        leader_addr: Option<String>,
    },
    /// A write or read barrier did not complete in time (or lost its leader midway): it may
    /// or may not have taken effect.
    #[error("{0}")]
    OutcomeUnknown(String),
    /// Refused before anything changed, for a reason other than malformed input: a
    /// membership change the cluster's state does not allow (`WRONG_STATE`), an unknown
    /// member (`NOT_FOUND`), or such an answer relayed from the leader.
    #[error("{message}")]
    Refused {
        /// The machine-readable reason.
        reason: &'static str,
        /// Why, for a person.
        message: String,
    },
    /// A bug or a storage failure on this node.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// An [`ApiError::Invalid`] with the given reason.
    pub fn invalid(reason: &'static str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            reason,
            message: message.into(),
        }
    }

    /// `INVALID_ARGUMENT` for a malformed field that has no more specific reason.
    pub fn argument(message: impl Into<String>) -> Self {
        Self::invalid(reason::INVALID_ARGUMENT, message)
    }

    /// [`ApiError::Refused`] with the given reason.
    pub fn refused(reason: &'static str, message: impl Into<String>) -> Self {
        ApiError::Refused {
            reason,
            message: message.into(),
        }
    }

    /// The machine-readable reason of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::Invalid { reason, .. } => reason,
            ApiError::Rejected(rejection) => rejection.reason(),
            ApiError::NotLeader { .. } => reason::NOT_LEADER,
            ApiError::OutcomeUnknown(_) => reason::UNAVAILABLE_OUTCOME_UNKNOWN,
            ApiError::Refused { reason, .. } => reason,
            ApiError::Internal(_) => reason::INTERNAL,
        }
    }

    /// True when the failure is indeterminate: the operation may have taken effect.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, ApiError::OutcomeUnknown(_))
    }
}

impl From<ValidationError> for ApiError {
    fn from(error: ValidationError) -> Self {
        ApiError::invalid(error.reason(), error.to_string())
    }
}

/// A request field the shared decoder refused keeps the decoder's reason and message.
impl From<DecodeError> for ApiError {
    fn from(error: DecodeError) -> Self {
        ApiError::invalid(error.reason(), error.to_string())
    }
}

impl From<Rejection> for ApiError {
    fn from(rejection: Rejection) -> Self {
        ApiError::Rejected(rejection)
    }
}

impl From<FingerprintError> for ApiError {
    fn from(error: FingerprintError) -> Self {
        let reason = match error {
            FingerprintError::TooLarge { .. } => reason::BODY_TOO_LARGE,
            _ => reason::INVALID_FINGERPRINT,
        };
        ApiError::invalid(reason, error.to_string())
    }
}

impl From<ApiError> for Status {
    fn from(error: ApiError) -> Self {
        match error {
            ApiError::NotLeader {
                leader_id,
                leader_addr,
            } => status::not_leader(leader_id, leader_addr.as_deref()),
            ApiError::Rejected(Rejection::Invalid { field, message }) => {
                status::error(field.reason(), message, [])
            }
            ApiError::Rejected(rejection @ Rejection::RegionFailover { retry_after }) => {
                status::with_retry_after(rejection.reason(), rejection.to_string(), retry_after)
            }
            other => {
                let reason = other.reason();
                status::error(reason, other.to_string(), [])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use idem_core::{Field, State};
    use tonic::Code;

    use super::*;

    fn check(error: ApiError, code: Code, expected_reason: &str) -> Status {
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
            check(ApiError::from(rejection), code, expected);
        }
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
        let error = ApiError::OutcomeUnknown("write not confirmed within 5s".into());
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
            ApiError::NotLeader {
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
            ApiError::Internal("storage failed".into()),
            Code::Internal,
            reason::INTERNAL,
        );
    }
}
