//! How a handler's answer settles the record.
//!
//! The mapping decides what a retry sees, so it errs towards letting the client try again
//! only when that is safe: a success or a deliberate final answer is stored and replayed; an
//! answer that says "try again" (5xx, 429, 408) or no answer at all (panic, timeout) lets the
//! next request take over; a client error is stored as a terminal failure, since the same
//! request would fail the same way.

use http::StatusCode;
use idem_core::Stage;

use crate::config::RoutePolicy;

/// What the layer does with the record after the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Store the result (COMPLETED); retries replay it.
    Complete,
    /// Store a terminal failure; retries replay it.
    FailTerminal,
    /// Record a retryable failure; the next request takes over (told the stage).
    FailRetryable,
    /// Give the record back (PENDING): nothing irreversible began.
    Release,
}

impl Settle {
    /// The name used in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Settle::Complete => "complete",
            Settle::FailTerminal => "fail_terminal",
            Settle::FailRetryable => "fail_retryable",
            Settle::Release => "release",
        }
    }
}

/// The settlement of an answer with `status`, given the ledger's `stage`.
pub fn settle_status(status: StatusCode, policy: &RoutePolicy, stage: Stage) -> Settle {
    let code = status.as_u16();
    if status.is_success() || status.is_redirection() || policy.complete_statuses.contains(&status)
    {
        Settle::Complete
    } else if status.is_client_error() && code != 408 && code != 429 {
        Settle::FailTerminal
    } else {
        settle_retryable(stage)
    }
}

/// The settlement when the handler gave no usable answer (panic, timeout, error): release
/// while nothing irreversible began, else a retryable failure (the stage stays recorded).
pub fn settle_retryable(stage: Stage) -> Settle {
    if stage.is_irreversible() {
        Settle::FailRetryable
    } else {
        Settle::Release
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settle(code: u16, stage: Stage) -> Settle {
        let policy = RoutePolicy {
            complete_statuses: vec![StatusCode::CONFLICT],
            ..RoutePolicy::default()
        };
        settle_status(StatusCode::from_u16(code).unwrap(), &policy, stage)
    }

    #[test]
    fn status_mapping() {
        for code in [200, 201, 204, 301, 303, 409] {
            assert_eq!(settle(code, Stage::Calling), Settle::Complete, "{code}");
        }
        for code in [400, 402, 404, 422] {
            assert_eq!(
                settle(code, Stage::NotCalled),
                Settle::FailTerminal,
                "{code}"
            );
        }
        for code in [408, 429, 500, 502, 503, 504, 100] {
            assert_eq!(settle(code, Stage::NotCalled), Settle::Release, "{code}");
            assert_eq!(
                settle(code, Stage::Calling),
                Settle::FailRetryable,
                "{code}"
            );
            assert_eq!(
                settle(code, Stage::RemoteConfirmed),
                Settle::FailRetryable,
                "{code}"
            );
        }
    }
}
