//! How a call to one node failed, sorted by what it says about the request's effect.
//!
//! The history needs the distinction Jepsen makes: a definite refusal (`REGION_FAILOVER`,
//! `NOT_LEADER`, `WRONG_GROUP`, validation errors) certainly changed nothing and is a `:fail`;
//! anything that may have reached a leader (a timeout, a lost connection,
//! `UNAVAILABLE_OUTCOME_UNKNOWN`, `INTERNAL`) is unknown, an `:info`.

use std::time::Duration;

use idem_proto::{reason, status};
use tonic::Status;

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A definite answer that changed nothing, with the server's reason.
    #[error("{reason}")]
    Refused {
        /// The reason, e.g. `REGION_FAILOVER`.
        reason: String,
        /// The server's `retry-after-ms` hint, if any.
        retry_after: Option<Duration>,
    },
    /// No such record.
    #[error("NOT_FOUND")]
    NotFound,
    /// The call may or may not have taken effect.
    #[error("outcome unknown: {0}")]
    Unknown(String),
}

impl CallError {
    /// The machine-readable reason: the server's, `NOT_FOUND`, or `UNKNOWN`.
    pub fn reason(&self) -> &str {
        match self {
            CallError::Refused { reason, .. } => reason,
            CallError::NotFound => reason::NOT_FOUND,
            CallError::Unknown(_) => "UNKNOWN",
        }
    }

    /// The error of a gRPC status.
    pub fn of(status: &Status) -> CallError {
        match status::reason_of(status).as_deref() {
            Some(reason::NOT_FOUND) => CallError::NotFound,
            Some(r @ (reason::UNAVAILABLE_OUTCOME_UNKNOWN | reason::INTERNAL)) => {
                CallError::Unknown(format!("{r}: {}", status.message()))
            }
            Some(r) => CallError::Refused {
                reason: r.to_owned(),
                retry_after: status::retry_after(status),
            },
            None => CallError::Unknown(format!("{:?}: {}", status.code(), status.message())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_definite_the_rest_unknown() {
        let failover = status::with_retry_after(
            reason::REGION_FAILOVER,
            "group 2 in failover",
            Duration::from_secs(2),
        );
        assert_eq!(
            CallError::of(&failover),
            CallError::Refused {
                reason: "REGION_FAILOVER".into(),
                retry_after: Some(Duration::from_secs(2)),
            }
        );
        let unknown = status::error(reason::UNAVAILABLE_OUTCOME_UNKNOWN, "no quorum", Vec::new());
        assert_eq!(CallError::of(&unknown).reason(), "UNKNOWN");
        assert_eq!(
            CallError::of(&Status::unavailable("connection reset")).reason(),
            "UNKNOWN"
        );
    }
}
