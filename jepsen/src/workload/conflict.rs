//! The conflict workload: one key, different requests.
//!
//! Claims of a key carry one of two bodies at random, as a client that reuses a key for an
//! edited request would. Whichever body's claim is first stored fixes the key's fingerprint;
//! every claim with the other body must get `FINGERPRINT_MISMATCH` and change nothing —
//! never a replay of the other request's result, never a second execution.

use std::time::Duration;

use idem_core::Risk;

use super::Behaviour;

/// Conflict: two bodies per key.
pub fn behaviour() -> Behaviour {
    Behaviour {
        lease: Duration::from_secs(3),
        bodies: 2,
        stall_chance: 0.0,
        read_chance: 0.2,
        risk: Risk::Normal,
        die_after_call_chance: 0.0,
    }
}
