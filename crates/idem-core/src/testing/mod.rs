//! The reusable semantic test suite.
//!
//! Every backend of [`StateStore`] must behave identically, so the scenarios are written
//! once, against the trait, and each backend instantiates them with
//! [`state_store_suite!`](crate::state_store_suite):
//!
//! ```ignore
//! idem_core::state_store_suite!(idem_core::MemoryStore::new());
//! ```
//!
//! Time is driven by the harness clock, never by sleeping.

mod harness;
pub mod sample;
pub mod scenarios;

pub use harness::{Harness, BODY_A, BODY_B};

/// Generates one `#[test]` per scenario of [`scenarios`], each on a fresh store built by
/// the given expression.
#[macro_export]
macro_rules! state_store_suite {
    ($factory:expr) => {
        $crate::state_store_suite!(@tests $factory;
            first_claim_acquires,
            concurrent_claim_sees_in_progress,
            same_holder_gets_ownership_back,
            start_moves_to_in_progress,
            complete_is_replayed,
            mismatch_never_mutates,
            unverifiable_without_stored_algorithm,
            takeover_after_lease_expiry_fences_old_worker,
            takeover_reports_calling_stage,
            taker_reconfirms_the_known_reference,
            high_risk_calling_needs_reconciliation,
            high_risk_not_called_is_taken_over,
            retryable_failure_is_never_replayed,
            terminal_failure_is_replayed,
            release_lets_next_claim_take_over,
            release_refused_after_external_call,
            cancel_only_before_irreversible,
            renew_extends_lease,
            stale_fence_changes_nothing,
            result_too_large_is_refused,
            replicated_time_never_runs_backwards,
            expire_deletes_only_terminal_past_retention,
            expire_is_bounded_and_oldest_first,
            reconcile_is_version_checked_and_audited,
            reconcile_cancels_only_unknown_outcomes,
            purge_scrubs_subject_and_keeps_tombstone,
            purge_resumes_from_cursor,
            external_call_ledger_moves_forward,
            worker_commands_are_idempotent,
            invalid_commands_change_nothing,
            missing_record_is_not_found,
            operation_index_finds_record,
            overlay_batch_equals_sequential,
        );
    };
    (@tests $factory:expr; $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::testing::scenarios::$name($factory);
            }
        )+
    };
}
