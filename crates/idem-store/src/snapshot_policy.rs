//! When a snapshot is worth building: the size-aware half of the snapshot policy.
//!
//! A snapshot is a full dump of the state, so building one costs O(S) for a state of S
//! records. openraft's only policy, `SnapshotPolicy::LogsSinceLast(F)`, asks for one every F
//! log entries (F = `raft.snapshot_logs`, 100 000 by default): O(S / F) work per entry,
//! which grows with the state (at a million records, most of the leader's CPU). So
//! openraft's policy is kept as a *floor* that decides when to ask, and the state machine
//! answers through `try_create_snapshot_builder(force: false)`: it builds only when
//!
//! ```text
//! entries applied since the last snapshot >= records / STATE_DIVISOR   (STATE_DIVISOR = 2)
//! ```
//!
//! and defers otherwise (openraft asks again F entries later). Between two snapshots at
//! least `max(F, S / 2)` entries are applied, so the dump costs at most `O(S) / (S / 2)` =
//! O(1) per entry, amortized, whatever the size of the state; the log kept between two
//! snapshots is at most about half as many entries as there are records, the same order
//! as the state itself. A small state still snapshots every F entries.
//!
//! The record count is RocksDB's `rocksdb.estimate-num-keys` of the `records` column
//! family: free to read, approximate (it can over-count keys overwritten or deleted but not
//! yet compacted, which only spaces snapshots out a little more). openraft forces a build
//! (`force: true`) when it needs a snapshot it does not have; that is never deferred. A
//! manual `raft.trigger().snapshot()` goes through the same rule as the policy.

use crate::db::{Cf, Db};
use crate::error::StoreError;

/// Snapshot when the entries since the last snapshot reach the records divided by this.
const STATE_DIVISOR: u64 = 2;

/// Whether a snapshot should be built now: `applied` is the last applied index,
/// `last_snapshot` the last index the current snapshot covers (none yet: always due).
pub(crate) fn due(applied: u64, last_snapshot: Option<u64>, records: u64) -> bool {
    match last_snapshot {
        None => true,
        Some(last) => applied.saturating_sub(last) >= records / STATE_DIVISOR,
    }
}

/// RocksDB's estimate of the number of records.
pub(crate) fn estimate_records(db: &Db) -> Result<u64, StoreError> {
    Ok(db
        .raw()
        .property_int_value_cf(db.cf(Cf::Records), "rocksdb.estimate-num-keys")?
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn first_snapshot_is_always_due() {
        assert!(due(5, None, 1_000_000));
    }

    #[test]
    fn large_states_wait_for_half_their_size_in_entries() {
        // 1M records: not before 500k entries since the last snapshot.
        assert!(!due(1_499_999, Some(1_000_000), 1_000_000));
        assert!(due(1_500_000, Some(1_000_000), 1_000_000));
    }

    #[test]
    fn small_states_follow_the_floor() {
        // openraft only asks after the floor; a small state is then always due.
        assert!(due(20_000, Some(10_000), 3_000));
    }
}
