//! The high-risk workload: HIGH-risk claims with long leases, workers that die mid-call.
//!
//! Every claim is HIGH risk with a 4 s lease (long beside the takeover workload's 1 s). A
//! quarter of the owners die right after recording `CALLING` — half of them after executing
//! on the ledger, half before — and never complete: their process is retired, as a crashed
//! service instance's would be. When the lease lapses the record must move to
//! `NEEDS_RECONCILIATION`, and no claim may take it over until a worker that is told so
//! reconciles it as an operator would (docs/semantics.md, docs/reconciliation.md): it asks
//! the ledger whether the operation id executed, then moves the record, version-checked, to
//! `COMPLETED` (with the ledger's reference) or `RETRYABLE_FAILURE` (the next claim takes
//! over and executes). The `reconciliation` checker verifies that no takeover and no second
//! execution happened without such a reconcile in between.

use std::time::Duration;

use idem_core::Risk;

use super::Behaviour;

/// High risk: a long lease, no stalls, owners that die after `CALLING`.
pub fn behaviour() -> Behaviour {
    Behaviour {
        lease: Duration::from_secs(4),
        bodies: 1,
        stall_chance: 0.0,
        read_chance: 0.2,
        risk: Risk::High,
        die_after_call_chance: 0.25,
    }
}
