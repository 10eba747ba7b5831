//! What one pass did: counts of every outcome, and the records it touched (bounded).

use idem_core::{OperationId, Stage, State};

/// At most this many [`Item`]s are kept per pass; the counts stay complete.
pub const MAX_ITEMS: usize = 1000;

/// What happened to one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Reconciled (or, in a dry run, would be) to this state.
    Settled(State),
    /// The downstream could not tell; left alone.
    Unknown,
    /// The downstream contradicts the record; left alone.
    Contradiction,
    /// The check failed; left alone.
    CheckError,
    /// The record changed between the listing and the reconcile (a worker or another
    /// reconciler got there first); nothing written by this pass.
    Conflict,
    /// The reconcile failed for another reason.
    SettleError,
}

impl Action {
    /// A short lowercase name, e.g. `completed`, `unknown`, `conflict`.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Settled(State::Completed) => "completed",
            Action::Settled(State::RetryableFailure) => "retryable_failure",
            Action::Settled(State::TerminalFailure) => "terminal_failure",
            Action::Settled(State::Cancelled) => "cancelled",
            Action::Settled(_) => "settled",
            Action::Unknown => "unknown",
            Action::Contradiction => "contradiction",
            Action::CheckError => "check_error",
            Action::Conflict => "conflict",
            Action::SettleError => "settle_error",
        }
    }
}

/// One record a pass examined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The record.
    pub operation_id: OperationId,
    /// Its tenant.
    pub tenant: String,
    /// Its endpoint.
    pub endpoint: String,
    /// Its state when listed.
    pub state: State,
    /// Its stage when listed.
    pub stage: Stage,
    /// What the pass did.
    pub action: Action,
    /// The downstream's reference, why it could not tell, or the error (no keys, no bodies).
    pub detail: String,
}

/// Counts of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records examined.
    pub scanned: u64,
    /// Moved (or, dry run, would be) to COMPLETED.
    pub completed: u64,
    /// Moved (or would be) to RETRYABLE_FAILURE.
    pub retryable_failure: u64,
    /// Moved (or would be) to TERMINAL_FAILURE.
    pub terminal_failure: u64,
    /// Moved (or would be) to CANCELLED.
    pub cancelled: u64,
    /// Left alone: the downstream could not tell.
    pub unknown: u64,
    /// Left alone: the downstream contradicts the record.
    pub contradictions: u64,
    /// Left alone: the check failed.
    pub check_errors: u64,
    /// Lost the race to a worker or another reconciler.
    pub conflicts: u64,
    /// Reconcile calls that failed otherwise.
    pub settle_errors: u64,
}

impl Counts {
    /// Records settled (or, dry run, that would be).
    pub fn settled(&self) -> u64 {
        self.completed + self.retryable_failure + self.terminal_failure + self.cancelled
    }

    /// Records left alone for a person or a later pass.
    pub fn left_alone(&self) -> u64 {
        self.unknown + self.contradictions + self.check_errors + self.settle_errors
    }

    fn add(&mut self, action: &Action) {
        let slot = match action {
            Action::Settled(State::Completed) => &mut self.completed,
            Action::Settled(State::TerminalFailure) => &mut self.terminal_failure,
            Action::Settled(State::Cancelled) => &mut self.cancelled,
            Action::Settled(_) => &mut self.retryable_failure,
            Action::Unknown => &mut self.unknown,
            Action::Contradiction => &mut self.contradictions,
            Action::CheckError => &mut self.check_errors,
            Action::Conflict => &mut self.conflicts,
            Action::SettleError => &mut self.settle_errors,
        };
        *slot += 1;
    }
}

/// The outcome of one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// True when nothing was written.
    pub dry_run: bool,
    /// Every outcome, counted.
    pub counts: Counts,
    /// The records examined, in listing order (at most [`MAX_ITEMS`]).
    pub items: Vec<Item>,
}

impl PassReport {
    pub(crate) fn record(&mut self, item: Item) {
        self.counts.scanned += 1;
        self.counts.add(&item.action);
        if self.items.len() < MAX_ITEMS {
            self.items.push(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_settlement_counts_under_its_state() {
        let mut report = PassReport::default();
        for state in [
            State::Completed,
            State::RetryableFailure,
            State::TerminalFailure,
            State::Cancelled,
        ] {
            report.record(Item {
                operation_id: OperationId::from_bytes([1; 16]),
                tenant: "acme".into(),
                endpoint: "POST /v1/charges".into(),
                state: State::NeedsReconciliation,
                stage: Stage::Calling,
                action: Action::Settled(state),
                detail: String::new(),
            });
        }
        let counts = report.counts;
        assert_eq!(
            (
                counts.completed,
                counts.retryable_failure,
                counts.terminal_failure
            ),
            (1, 1, 1)
        );
        assert_eq!((counts.cancelled, counts.settled()), (1, 4));
        assert_eq!(Action::Settled(State::Cancelled).name(), "cancelled");
    }
}
