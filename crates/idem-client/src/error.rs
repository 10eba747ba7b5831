//! The one error type of the SDK.
//!
//! A caller of an idempotency store must tell apart three situations, because each asks for a
//! different reaction:
//!
//! - the server **refused** the call and nothing changed ([`ClientError::Rejected`],
//!   [`ClientError::NotFound`], [`ClientError::InvalidArgument`]): retrying the same call is
//!   pointless;
//! - the call **may or may not have taken effect** ([`ClientError::OutcomeUnknown`]): retry
//!   it later with the same key, holder and fence, or read the record with `get`;
//! - **no server could be reached** ([`ClientError::Unavailable`]): nothing was applied.
//!
//! Every variant has a machine-readable [`ClientError::reason`] (the server's reason, e.g.
//! `STALE_FENCE`, or one of the client-side reasons below), which is what `idemctl -w json`
//! prints.

use std::time::Duration;

use idem_core::fingerprint::FingerprintError;
use idem_core::ValidationError;
use idem_proto::convert::DecodeError;
use idem_proto::reason;
use tonic::Code;

/// Reason of [`ClientError::Unavailable`]: no endpoint answered.
pub const UNAVAILABLE: &str = "UNAVAILABLE";
/// Reason of [`ClientError::InvalidResponse`]: a server answer the SDK cannot use.
pub const INVALID_RESPONSE: &str = "INVALID_RESPONSE";

/// Everything that can go wrong in a call through [`crate::Client`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The server refused the call with a definite answer; nothing changed. Never retried by
    /// the SDK (e.g. `STALE_FENCE`, `WRONG_STATE`, `ALREADY_TERMINAL`, `VERSION_MISMATCH`,
    /// `REGION_FAILOVER`, `INTERNAL`).
    #[error("{reason}: {message}")]
    Rejected {
        /// The machine-readable reason, e.g. `STALE_FENCE` (for a status without an idem
        /// reason: the gRPC code's name, e.g. `UNIMPLEMENTED`).
        reason: String,
        /// The gRPC status code.
        code: Code,
        /// The server's message.
        message: String,
        /// The server's suggested wait before trying again (`retry-after-ms`), if any.
        retry_after: Option<Duration>,
    },
    /// No record for this scope and key, or operation id.
    #[error("NOT_FOUND: {message}")]
    NotFound {
        /// The server's message.
        message: String,
    },
    /// The call may or may not have been applied: the server answered
    /// `UNAVAILABLE_OUTCOME_UNKNOWN`, or the connection failed or timed out after the request
    /// may have been sent, on every attempt the retry policy allowed. Re-send the same call
    /// (same key, holder, fence) or read the record.
    #[error("UNAVAILABLE_OUTCOME_UNKNOWN: {message}")]
    OutcomeUnknown {
        /// What happened on the last attempt.
        message: String,
    },
    /// No endpoint could be reached (or none answered a read) within the retry policy.
    #[error("UNAVAILABLE: {message}")]
    Unavailable {
        /// What happened on the last attempt.
        message: String,
    },
    /// The input is malformed, as found by the SDK before sending or by the server
    /// (`INVALID_KEY`, `INVALID_SCOPE`, `INVALID_FINGERPRINT`, `INVALID_POLICY`,
    /// `INVALID_RESULT`, `INVALID_ARGUMENT`, `BODY_TOO_LARGE`, `RESULT_TOO_LARGE`).
    #[error("{reason}: {message}")]
    InvalidArgument {
        /// The machine-readable reason, e.g. `INVALID_KEY`.
        reason: String,
        /// What is wrong.
        message: String,
    },
    /// The server's answer is not what this SDK version understands (a missing record, an
    /// unknown enum value): a bug or a version skew.
    #[error("INVALID_RESPONSE: {message}")]
    InvalidResponse {
        /// What is wrong with the answer.
        message: String,
    },
}

impl ClientError {
    /// The machine-readable reason: the server's (e.g. `STALE_FENCE`, `NOT_FOUND`,
    /// `UNAVAILABLE_OUTCOME_UNKNOWN`) or the client's ([`UNAVAILABLE`],
    /// [`INVALID_RESPONSE`]).
    pub fn reason(&self) -> &str {
        match self {
            ClientError::Rejected { reason, .. } | ClientError::InvalidArgument { reason, .. } => {
                reason
            }
            ClientError::NotFound { .. } => reason::NOT_FOUND,
            ClientError::OutcomeUnknown { .. } => reason::UNAVAILABLE_OUTCOME_UNKNOWN,
            ClientError::Unavailable { .. } => UNAVAILABLE,
            ClientError::InvalidResponse { .. } => INVALID_RESPONSE,
        }
    }

    /// The human-readable message, without the reason.
    pub fn message(&self) -> &str {
        match self {
            ClientError::Rejected { message, .. }
            | ClientError::NotFound { message }
            | ClientError::OutcomeUnknown { message }
            | ClientError::Unavailable { message }
            | ClientError::InvalidArgument { message, .. }
            | ClientError::InvalidResponse { message } => message,
        }
    }

    /// The server's suggested wait before trying again, if it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::Rejected { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// True for a `REGION_FAILOVER` refusal: the tenant's group is in region failover and
    /// refused a HIGH-risk claim or takeover. Nothing changed; the SDK never retries it
    /// (the first attempt may still be running in the cut-off home region). Try again after
    /// [`ClientError::retry_after`], or answer the caller "try later".
    pub fn is_region_failover(&self) -> bool {
        self.reason() == reason::REGION_FAILOVER
    }

    /// True when the call may have been applied and should be re-sent unchanged (or the
    /// record read) before anything else is decided.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, ClientError::OutcomeUnknown { .. })
    }

    /// An [`ClientError::InvalidArgument`] with the given reason.
    pub fn invalid(reason: &str, message: impl Into<String>) -> Self {
        ClientError::InvalidArgument {
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// An [`ClientError::InvalidResponse`].
    pub(crate) fn invalid_response(message: impl Into<String>) -> Self {
        ClientError::InvalidResponse {
            message: message.into(),
        }
    }
}

/// A value that failed idem-core validation is an invalid argument with that field's reason.
impl From<ValidationError> for ClientError {
    fn from(error: ValidationError) -> Self {
        ClientError::invalid(error.reason(), error.to_string())
    }
}

/// A server answer that cannot be decoded into idem-core types is
/// [`ClientError::InvalidResponse`] (whatever field reason the decoder gives).
impl From<DecodeError> for ClientError {
    fn from(error: DecodeError) -> Self {
        ClientError::invalid_response(error.to_string())
    }
}

/// A request that cannot be fingerprinted: `BODY_TOO_LARGE` for a size limit, else
/// `INVALID_ARGUMENT` (the body is not acceptable JSON, or the method or route is malformed).
impl From<FingerprintError> for ClientError {
    fn from(error: FingerprintError) -> Self {
        let reason = match error {
            FingerprintError::TooLarge { .. } => reason::BODY_TOO_LARGE,
            _ => reason::INVALID_ARGUMENT,
        };
        ClientError::invalid(reason, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons() {
        let rejected = ClientError::Rejected {
            reason: reason::STALE_FENCE.into(),
            code: Code::FailedPrecondition,
            message: "stale".into(),
            retry_after: Some(Duration::from_secs(1)),
        };
        assert_eq!(rejected.reason(), "STALE_FENCE");
        assert_eq!(rejected.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(rejected.to_string(), "STALE_FENCE: stale");
        let unknown = ClientError::OutcomeUnknown {
            message: "reset".into(),
        };
        assert_eq!(unknown.reason(), "UNAVAILABLE_OUTCOME_UNKNOWN");
        assert!(unknown.is_outcome_unknown());
        assert_eq!(
            ClientError::Unavailable {
                message: String::new()
            }
            .reason(),
            "UNAVAILABLE"
        );
        let failover = ClientError::Rejected {
            reason: reason::REGION_FAILOVER.into(),
            code: Code::Unavailable,
            message: "home region lost".into(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert!(failover.is_region_failover());
        assert_eq!(failover.retry_after(), Some(Duration::from_secs(2)));
        assert!(!rejected.is_region_failover());
        let key = idem_core::IdempotencyKey::new("bad key").unwrap_err();
        assert_eq!(ClientError::from(key).reason(), "INVALID_KEY");
    }
}
