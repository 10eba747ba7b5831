//! The takeover workload: workers that stall past their lease and come back late.
//!
//! Leases are 1 s; a third of the owning workers stall for longer (before recording the call
//! or before completing). Meanwhile another worker takes the key over with a higher fence —
//! asking the ledger first when the stalled holder had recorded `CALLING` — and completes it.
//! When the late worker resumes, its `call` or `complete` must be refused with `STALE_FENCE`;
//! if it executes on the ledger anyway, the ledger (an idempotent downstream keyed by
//! operation id) records a duplicate without effect.

use std::time::Duration;

use idem_core::Risk;

use super::Behaviour;

/// Takeover: a short lease and frequent stalls past it.
pub fn behaviour() -> Behaviour {
    Behaviour {
        lease: Duration::from_secs(1),
        bodies: 1,
        stall_chance: 0.33,
        read_chance: 0.2,
        risk: Risk::Normal,
        die_after_call_chance: 0.0,
    }
}
