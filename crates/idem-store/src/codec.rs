//! Byte encodings of keys and values.
//!
//! * Keys that are integers (log index, audit sequence number) are 8-byte big-endian, so
//!   RocksDB's bytewise order is numeric order and range deletes/scans are plain key ranges.
//! * Record keys, expiry keys and operation ids use the core's own storage encodings
//!   ([`RecordKey::encode`](idem_core::RecordKey::encode),
//!   [`ExpiryKey::encode`](idem_core::store::ExpiryKey::encode), the 16 id bytes), which
//!   are prefix-free and order-preserving by design.
//! * Every value is bincode 1 (fixed-width little-endian integers, positional fields): one
//!   encoding for log entries, Raft metadata and state alike. It is compact, deterministic
//!   (two replicas encode the same state to the same bytes, which snapshots rely on) and
//!   every serialised type (core records, openraft's vote/log id/membership) is
//!   self-delimiting without `deserialize_any`.
//! * Values of the `operations` and `expiry` indexes are encoded record keys, not bincode.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::StoreError;

/// `raft_meta` key of the vote.
pub(crate) const VOTE: &[u8] = b"vote";
/// `raft_meta` key of the last committed log id.
pub(crate) const COMMITTED: &[u8] = b"committed";
/// `raft_meta` key of the last purged log id.
pub(crate) const LAST_PURGED: &[u8] = b"last_purged";

/// `sm_meta` key of the core's [`Meta`](idem_core::store::Meta).
pub(crate) const CORE_META: &[u8] = b"core";
/// `sm_meta` key of the core's [`Placement`](idem_core::Placement).
pub(crate) const PLACEMENT: &[u8] = b"placement";
/// `sm_meta` key of the last applied log id.
pub(crate) const APPLIED: &[u8] = b"applied";
/// `sm_meta` key of the last applied membership.
pub(crate) const MEMBERSHIP: &[u8] = b"membership";
/// `sm_meta` key of the current snapshot's pointer (meta and file name).
pub(crate) const SNAPSHOT: &[u8] = b"snapshot";
/// `sm_meta` key of the pointer to a snapshot being installed: present from before the
/// state is cleared until the batch that completes the install (see the `install` module).
pub(crate) const INSTALLING: &[u8] = b"installing";

/// Encodes a value with bincode.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, StoreError> {
    Ok(bincode::serialize(value)?)
}

/// Decodes a bincode value.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    Ok(bincode::deserialize(bytes)?)
}

/// The big-endian key of an integer.
pub(crate) fn u64_key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

/// Decodes [`u64_key`]'s output.
pub(crate) fn key_u64(bytes: &[u8], what: &'static str) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = bytes
        .try_into()
        .map_err(|_| StoreError::corrupt(what, format!("key of {} bytes, want 8", bytes.len())))?;
    Ok(u64::from_be_bytes(bytes))
}
