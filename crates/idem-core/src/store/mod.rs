//! The state apply works on, as a trait, so that the in-memory store used by tests and the
//! RocksDB store used by nodes run the very same semantics (and the same test suite, see
//! `idem_core::testing`, behind the `testing` feature).
//!
//! The trait is deliberately dumb: point reads, two ordered scans, and one atomic
//! [`WriteSet`] commit. Index maintenance is decided by the core (in [`WriteSet`]), so a
//! backend only stores what it is told.

mod memory;
mod overlay;
mod write_set;

pub use memory::MemoryStore;
pub use overlay::Overlay;
pub use write_set::{ExpiryKey, Meta, WriteSet};

use crate::audit::AuditEntry;
use crate::error::StoreError;
use crate::operation_id::OperationId;
use crate::placement::Placement;
use crate::record::{Record, RecordKey};
use crate::time::Timestamp;

/// Storage for records, their indexes (operation id, expiry time), the audit log and the
/// state-machine metadata.
pub trait StateStore {
    /// The record for a scope and key.
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, StoreError>;

    /// The record key for an operation id (operation-id index).
    fn operation(&self, id: &OperationId) -> Result<Option<RecordKey>, StoreError>;

    /// Expiry-index entries with `at <= now`, oldest first, at most `limit`.
    fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<(ExpiryKey, RecordKey)>, StoreError>;

    /// Records whose encoded key starts with `prefix` and sorts strictly after `after`, in
    /// key order, at most `limit`.
    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;

    /// Audit entries with `seq >= from`, in order, at most `limit`.
    fn audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;

    /// State-machine metadata (last stamp, next audit sequence number).
    fn meta(&self) -> Result<Meta, StoreError>;

    /// The group's placement state (default when never changed).
    fn placement(&self) -> Result<Placement, StoreError>;

    /// Applies `writes` atomically: all of them or none.
    fn commit(&mut self, writes: WriteSet) -> Result<(), StoreError>;
}
