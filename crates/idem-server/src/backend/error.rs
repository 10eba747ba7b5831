//! Why a request failed, below the API: the one error type of the [`Backend`](super::Backend)
//! and everything under it.
//!
//! Every failure a client can see passes through [`RequestError`] and leaves the node as a
//! `tonic::Status` (the conversion lives in `api::status`), so it always carries a
//! machine-readable reason (in a `google.rpc.ErrorInfo` and in the `idem-reason` metadata)
//! and, where useful, hints (`leader-id`, `leader-addr`).
//!
//! The distinction that matters most is between *definite* and *indeterminate* failures.
//! A validation error or a core [`Rejection`] means nothing changed. A Raft write or
//! read-index that did not finish in time may still be applied, so it is
//! [`RequestError::OutcomeUnknown`] (`UNAVAILABLE` / `UNAVAILABLE_OUTCOME_UNKNOWN`): the client
//! retries with the same key, holder or fence and the state machine's idempotence makes the
//! retry safe. It is never reported as "did not happen".

use idem_core::fingerprint::FingerprintError;
use idem_core::{Rejection, ValidationError};
use idem_proto::convert::DecodeError;
use idem_proto::reason;

/// Why an API call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
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
    /// A limit refused the request before anything was proposed (`RATE_LIMITED`,
    /// `QUOTA_EXCEEDED`, `OVERLOADED`); the client may retry after `retry_after`.
    #[error("{message}")]
    Exhausted {
        /// The machine-readable reason.
        reason: &'static str,
        /// Which limit, for a person (never a key or a body).
        message: String,
        /// When a retry may succeed, if the limit knows (sent as `retry-after-ms`).
        retry_after: Option<std::time::Duration>,
    },
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
    /// Authentication or authorization refused the call (`UNAUTHENTICATED`,
    /// `TENANT_FORBIDDEN`, `ROLE_FORBIDDEN`); nothing was read or written.
    #[error("{message}")]
    Denied {
        /// The machine-readable reason.
        reason: &'static str,
        /// Why, for a person (never names another tenant's data).
        message: String,
    },
    /// This node's Raft stopped on a fatal error (a failed fsync or write of its storage,
    /// or a shutdown): it serves nothing, reads included, until restarted. Nothing was done.
    #[error("{0}")]
    Stopped(String),
    /// A bug or a storage failure on this node.
    #[error("{0}")]
    Internal(String),
}

impl RequestError {
    /// An [`RequestError::Invalid`] with the given reason.
    pub fn invalid(reason: &'static str, message: impl Into<String>) -> Self {
        RequestError::Invalid {
            reason,
            message: message.into(),
        }
    }

    /// `INVALID_ARGUMENT` for a malformed field that has no more specific reason.
    pub fn argument(message: impl Into<String>) -> Self {
        Self::invalid(reason::INVALID_ARGUMENT, message)
    }

    /// [`RequestError::Refused`] with the given reason.
    pub fn refused(reason: &'static str, message: impl Into<String>) -> Self {
        RequestError::Refused {
            reason,
            message: message.into(),
        }
    }

    /// [`RequestError::Denied`] with the given reason.
    pub fn denied(reason: &'static str, message: impl Into<String>) -> Self {
        RequestError::Denied {
            reason,
            message: message.into(),
        }
    }

    /// [`RequestError::Exhausted`] with the given reason and retry hint.
    pub fn exhausted(
        reason: &'static str,
        message: impl Into<String>,
        retry_after: Option<std::time::Duration>,
    ) -> Self {
        RequestError::Exhausted {
            reason,
            message: message.into(),
            retry_after,
        }
    }

    /// The machine-readable reason of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            RequestError::Invalid { reason, .. } => reason,
            RequestError::Rejected(rejection) => rejection.reason(),
            RequestError::NotLeader { .. } => reason::NOT_LEADER,
            RequestError::OutcomeUnknown(_) => reason::UNAVAILABLE_OUTCOME_UNKNOWN,
            RequestError::Exhausted { reason, .. } => reason,
            RequestError::Refused { reason, .. } => reason,
            RequestError::Denied { reason, .. } => reason,
            RequestError::Stopped(_) => reason::NODE_STOPPED,
            RequestError::Internal(_) => reason::INTERNAL,
        }
    }

    /// True when the failure is indeterminate: the operation may have taken effect.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, RequestError::OutcomeUnknown(_))
    }
}

impl From<ValidationError> for RequestError {
    fn from(error: ValidationError) -> Self {
        RequestError::invalid(error.reason(), error.to_string())
    }
}

/// A request field the shared decoder refused keeps the decoder's reason and message.
impl From<DecodeError> for RequestError {
    fn from(error: DecodeError) -> Self {
        RequestError::invalid(error.reason(), error.to_string())
    }
}

impl From<Rejection> for RequestError {
    fn from(rejection: Rejection) -> Self {
        RequestError::Rejected(rejection)
    }
}

impl From<FingerprintError> for RequestError {
    fn from(error: FingerprintError) -> Self {
        let reason = match error {
            FingerprintError::TooLarge { .. } => reason::BODY_TOO_LARGE,
            _ => reason::INVALID_FINGERPRINT,
        };
        RequestError::invalid(reason, error.to_string())
    }
}
