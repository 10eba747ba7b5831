//! The register workload: the same request retried from everywhere.
//!
//! Every claim of a key carries the same body, as a client retrying after timeouts would. The
//! first claim acquires; concurrent and later ones see `IN_PROGRESS` or `COMPLETED` (the
//! replay), or take over once the holder's short lease lapsed (a holder that crashed, i.e. a
//! process retired after an unknown outcome). Checked: one effective execution and one
//! operation id per key, acknowledged results never lost or changed, each key linearizable.

use std::time::Duration;

use idem_core::Risk;

use super::Behaviour;

/// Register: one body per key, no deliberate stalls, a 3 s lease.
pub fn behaviour() -> Behaviour {
    Behaviour {
        lease: Duration::from_secs(3),
        bodies: 1,
        stall_chance: 0.0,
        read_chance: 0.2,
        risk: Risk::Normal,
        die_after_call_chance: 0.0,
    }
}
