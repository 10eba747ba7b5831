//! The in-memory [`StateStore`]: the reference backend for tests, the SDK and the checker.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde::Serialize;

use super::{ExpiryKey, Meta, StateStore, WriteSet};
use crate::audit::AuditEntry;
use crate::error::StoreError;
use crate::operation_id::OperationId;
use crate::placement::Placement;
use crate::record::{Record, RecordKey};
use crate::time::Timestamp;

/// Records, indexes, audit log and metadata in ordered maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemoryStore {
    records: BTreeMap<Vec<u8>, Record>,
    operations: BTreeMap<OperationId, RecordKey>,
    expiry: BTreeMap<ExpiryKey, RecordKey>,
    audit: BTreeMap<u64, AuditEntry>,
    meta: Meta,
    placement: Placement,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A canonical byte image of the whole state (ordered maps, stable encoding), used to
    /// prove that apply is deterministic.
    pub fn dump(&self) -> Vec<u8> {
        bincode::serialize(self).expect("in-memory state always serialises")
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl StateStore for MemoryStore {
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        Ok(self.records.get(&key.encode()).cloned())
    }

    fn operation(&self, id: &OperationId) -> Result<Option<RecordKey>, StoreError> {
        Ok(self.operations.get(id).cloned())
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<(ExpiryKey, RecordKey)>, StoreError> {
        Ok(self
            .expiry
            .iter()
            .take_while(|(key, _)| key.at <= now)
            .take(limit)
            .map(|(key, record)| (*key, record.clone()))
            .collect())
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let start = match after {
            Some(after) => Bound::Excluded(after.to_vec()),
            None => Bound::Included(prefix.to_vec()),
        };
        Ok(self
            .records
            .range((start, Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .take(limit)
            .map(|(_, record)| record.clone())
            .collect())
    }

    fn audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(self
            .audit
            .range(from..)
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect())
    }

    fn meta(&self) -> Result<Meta, StoreError> {
        Ok(self.meta)
    }

    fn placement(&self) -> Result<Placement, StoreError> {
        Ok(self.placement.clone())
    }

    fn commit(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        apply_map(&mut self.records, writes.records);
        apply_map(&mut self.operations, writes.operations);
        apply_map(&mut self.expiry, writes.expiry);
        for entry in writes.audit {
            self.audit.insert(entry.seq, entry);
        }
        if let Some(meta) = writes.meta {
            self.meta = meta;
        }
        if let Some(placement) = writes.placement {
            self.placement = placement;
        }
        Ok(())
    }
}

fn apply_map<K: Ord, V>(map: &mut BTreeMap<K, V>, writes: BTreeMap<K, Option<V>>) {
    for (key, value) in writes {
        match value {
            Some(value) => map.insert(key, value),
            None => map.remove(&key),
        };
    }
}
