//! The lifecycle state of a record (docs/design.md §2).

use serde::{Deserialize, Serialize};

/// Where a record is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum State {
    /// Claimed; the holder has not started (or released its lease).
    Pending,
    /// The holder is working on it.
    InProgress,
    /// Finished successfully; the result is replayed. Terminal.
    Completed,
    /// Failed in a way worth retrying; the next claim takes over. Never replayed.
    RetryableFailure,
    /// Failed for good; the error summary is replayed. Terminal.
    TerminalFailure,
    /// Cancelled before anything irreversible began. Terminal.
    Cancelled,
    /// High-risk work whose outcome is unknown; an operator or reconciler decides.
    NeedsReconciliation,
}

impl State {
    /// Every state, in lifecycle order.
    pub const ALL: [State; 7] = [
        State::Pending,
        State::InProgress,
        State::Completed,
        State::RetryableFailure,
        State::TerminalFailure,
        State::Cancelled,
        State::NeedsReconciliation,
    ];

    /// Terminal records are immutable and expire after their retention.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed | State::TerminalFailure | State::Cancelled
        )
    }

    /// States in which a lease holder owns the key.
    pub fn is_active(self) -> bool {
        matches!(self, State::Pending | State::InProgress)
    }

    /// The API name, e.g. `IN_PROGRESS`.
    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "PENDING",
            State::InProgress => "IN_PROGRESS",
            State::Completed => "COMPLETED",
            State::RetryableFailure => "RETRYABLE_FAILURE",
            State::TerminalFailure => "TERMINAL_FAILURE",
            State::Cancelled => "CANCELLED",
            State::NeedsReconciliation => "NEEDS_RECONCILIATION",
        }
    }
}
