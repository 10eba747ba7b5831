//! What the reconciler does with one record, given the downstream's answer: a pure function,
//! so every rule is tested without a cluster.
//!
//! The rules, in order of how much harm a mistake would do:
//!
//! - **found** → COMPLETED with the downstream's reference as the result's `resource_id`: the
//!   effect happened once, and every retry now replays it instead of running again;
//! - **absent** → by [`AbsentPolicy`]: RETRYABLE_FAILURE (the next claim takes over and runs
//!   again, which is right when the caller still wants the effect), CANCELLED (nothing
//!   happened and the key is closed: every later claim answers CANCELLED, the caller must use
//!   a new key) or TERMINAL_FAILURE (the same, replayed as a failure with an error code, for
//!   callers that treat CANCELLED as "they cancelled it themselves");
//! - **unknown** → left alone: only a person or a later pass can decide;
//! - a **contradiction** between the record and the downstream (the record holds a confirmed
//!   reference, and the downstream answers absent or another reference) → left alone and
//!   counted: a reconciler must never overwrite evidence.

use idem_core::{ErrorSummary, Record, Stage, StoredResult};

use super::check::Remote;
use crate::types::ReconcileTarget;

/// The error code stored when the downstream has no trace of the operation.
pub const ABSENT_CODE: &str = "reconciled_absent";

/// What an operation the downstream never executed becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AbsentPolicy {
    /// RETRYABLE_FAILURE: the next claim of the key takes over and runs again.
    #[default]
    Retry,
    /// TERMINAL_FAILURE: the failure is replayed to every later claim, like a cancellation.
    Fail,
    /// CANCELLED: nothing irreversible happened, which the downstream's answer establishes;
    /// every later claim answers CANCELLED. Needs every node at the release that added it.
    Cancel,
}

/// Why a record is left as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leave {
    /// The downstream could not tell.
    Unknown(String),
    /// The downstream's answer contradicts the record's confirmed reference.
    Contradiction(String),
}

/// The reconciler's decision on one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Reconcile to this target.
    Settle(ReconcileTarget),
    /// Do nothing.
    Leave(Leave),
}

/// Decides `record` from the downstream's answer; `completed_status` is the status code of
/// the stored result when the operation is found.
pub fn decide(
    record: &Record,
    remote: &Remote,
    absent: AbsentPolicy,
    completed_status: u16,
) -> Decision {
    let confirmed = record
        .remote_ref
        .as_deref()
        .filter(|_| record.stage == Stage::RemoteConfirmed);
    match remote {
        Remote::Found { reference } => match confirmed {
            Some(known) if known != reference => Decision::Leave(Leave::Contradiction(format!(
                "the record confirmed {known}, the downstream answers {reference}"
            ))),
            _ => Decision::Settle(ReconcileTarget::Completed(StoredResult {
                status_code: completed_status,
                resource_id: reference.clone(),
                ..StoredResult::default()
            })),
        },
        Remote::Absent => match confirmed {
            Some(known) => Decision::Leave(Leave::Contradiction(format!(
                "the record confirmed {known}, the downstream answers absent"
            ))),
            None => Decision::Settle(absent_target(absent)),
        },
        Remote::Unknown { why } => Decision::Leave(Leave::Unknown(why.clone())),
    }
}

fn absent_target(policy: AbsentPolicy) -> ReconcileTarget {
    let error = ErrorSummary {
        code: ABSENT_CODE.to_owned(),
        message: "the downstream has no trace of this operation".to_owned(),
    };
    match policy {
        AbsentPolicy::Retry => ReconcileTarget::RetryableFailure(Some(error)),
        AbsentPolicy::Fail => ReconcileTarget::TerminalFailure(error),
        AbsentPolicy::Cancel => ReconcileTarget::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use idem_core::testing::sample::completed_record;
    use idem_core::State;

    use super::*;

    fn calling() -> Record {
        let mut r = completed_record();
        r.state = State::NeedsReconciliation;
        r.stage = Stage::Calling;
        r.remote_ref = None;
        r.result = None;
        r
    }

    fn found(reference: &str) -> Remote {
        Remote::Found {
            reference: reference.into(),
        }
    }

    #[test]
    fn found_completes_with_the_reference() {
        let Decision::Settle(ReconcileTarget::Completed(result)) =
            decide(&calling(), &found("psp_1"), AbsentPolicy::Retry, 201)
        else {
            panic!("not completed");
        };
        assert_eq!((result.status_code, &*result.resource_id), (201, "psp_1"));
    }

    #[test]
    fn absent_follows_the_policy() {
        let retry = decide(&calling(), &Remote::Absent, AbsentPolicy::Retry, 200);
        assert!(matches!(
            retry,
            Decision::Settle(ReconcileTarget::RetryableFailure(Some(ref e))) if e.code == ABSENT_CODE
        ));
        let fail = decide(&calling(), &Remote::Absent, AbsentPolicy::Fail, 200);
        assert!(matches!(
            fail,
            Decision::Settle(ReconcileTarget::TerminalFailure(ref e)) if e.code == ABSENT_CODE
        ));
        let cancel = decide(&calling(), &Remote::Absent, AbsentPolicy::Cancel, 200);
        assert_eq!(cancel, Decision::Settle(ReconcileTarget::Cancelled));
    }

    #[test]
    fn unknown_and_contradictions_are_left_alone() {
        let unknown = Remote::Unknown { why: "?".into() };
        assert!(matches!(
            decide(&calling(), &unknown, AbsentPolicy::Retry, 200),
            Decision::Leave(Leave::Unknown(_))
        ));
        let mut confirmed = calling();
        confirmed.stage = Stage::RemoteConfirmed;
        confirmed.remote_ref = Some("psp_1".into());
        for remote in [Remote::Absent, found("psp_2")] {
            for policy in [AbsentPolicy::Fail, AbsentPolicy::Cancel] {
                assert!(matches!(
                    decide(&confirmed, &remote, policy, 200),
                    Decision::Leave(Leave::Contradiction(_))
                ));
            }
        }
        assert!(matches!(
            decide(&confirmed, &found("psp_1"), AbsentPolicy::Fail, 200),
            Decision::Settle(ReconcileTarget::Completed(_))
        ));
    }
}
