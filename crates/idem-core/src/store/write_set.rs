//! The atomic unit of change: records, their index entries, audit entries and metadata.
//!
//! Maps keep the set ordered and make later writes to the same key replace earlier ones,
//! so the write sets of several commands merge into one batch (one RocksDB `WriteBatch`
//! per applied Raft batch).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::audit::AuditEntry;
use crate::operation_id::OperationId;
use crate::placement::Placement;
use crate::record::{Record, RecordKey};
use crate::time::Timestamp;

/// State-machine metadata, committed with every write set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The replicated clock: the largest stamp applied so far.
    pub last_stamp: Timestamp,
    /// The sequence number the next audit entry gets (starts at 1).
    pub next_audit_seq: u64,
}

impl Meta {
    /// Takes the next audit sequence number.
    pub(crate) fn take_audit_seq(&mut self) -> u64 {
        self.next_audit_seq = self.next_audit_seq.max(1);
        let seq = self.next_audit_seq;
        self.next_audit_seq += 1;
        seq
    }
}

/// Key of the expiry index: when, then which operation (unique, time ordered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExpiryKey {
    /// When the record may be deleted.
    pub at: Timestamp,
    /// The record's operation id.
    pub operation_id: OperationId,
}

impl ExpiryKey {
    /// Big-endian storage encoding: sorts by time, then operation id.
    pub fn encode(&self) -> [u8; 24] {
        let mut out = [0; 24];
        out[..8].copy_from_slice(&self.at.0.to_be_bytes());
        out[8..].copy_from_slice(self.operation_id.as_bytes());
        out
    }

    /// Decodes [`ExpiryKey::encode`]'s output.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let at: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
        let id: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
        (bytes.len() == 24).then(|| ExpiryKey {
            at: Timestamp(u64::from_be_bytes(at)),
            operation_id: OperationId::from_bytes(id),
        })
    }
}

/// A set of writes applied atomically. `None` values are deletions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteSet {
    /// Records by encoded [`RecordKey`].
    pub records: BTreeMap<Vec<u8>, Option<Record>>,
    /// Operation-id index.
    pub operations: BTreeMap<OperationId, Option<RecordKey>>,
    /// Expiry index.
    pub expiry: BTreeMap<ExpiryKey, Option<RecordKey>>,
    /// New audit entries.
    pub audit: Vec<AuditEntry>,
    /// New metadata.
    pub meta: Option<Meta>,
    /// New placement state (rarely: only placement commands change it).
    pub placement: Option<Placement>,
}

impl WriteSet {
    /// Writes `new` (replacing `old`, if any) with its index entries.
    pub fn put_record(&mut self, old: Option<&Record>, new: Record) {
        if old.is_none() {
            self.operations
                .insert(new.operation_id, Some(new.key.clone()));
        }
        let old_expiry = old.and_then(expiry_key);
        let new_expiry = expiry_key(&new);
        if old_expiry != new_expiry {
            if let Some(key) = old_expiry {
                self.expiry.insert(key, None);
            }
            if let Some(key) = new_expiry {
                self.expiry.insert(key, Some(new.key.clone()));
            }
        }
        self.records.insert(new.key.encode(), Some(new));
    }

    /// Deletes `old` and its index entries.
    pub fn delete_record(&mut self, old: &Record) {
        self.operations.insert(old.operation_id, None);
        if let Some(key) = expiry_key(old) {
            self.expiry.insert(key, None);
        }
        self.records.insert(old.key.encode(), None);
    }

    /// Adds `later` on top of `self`: later writes to the same key win.
    pub fn merge(&mut self, later: WriteSet) {
        self.records.extend(later.records);
        self.operations.extend(later.operations);
        self.expiry.extend(later.expiry);
        self.audit.extend(later.audit);
        if later.meta.is_some() {
            self.meta = later.meta;
        }
        if later.placement.is_some() {
            self.placement = later.placement;
        }
    }

    /// True when nothing is written.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.operations.is_empty()
            && self.expiry.is_empty()
            && self.audit.is_empty()
            && self.meta.is_none()
            && self.placement.is_none()
    }
}

fn expiry_key(record: &Record) -> Option<ExpiryKey> {
    record.expires_at.map(|at| ExpiryKey {
        at,
        operation_id: record.operation_id,
    })
}
