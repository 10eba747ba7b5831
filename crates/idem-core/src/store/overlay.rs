//! A [`StateStore`] that buffers commits on top of a read-only base.
//!
//! A Raft node applies a batch of log entries as one storage write. Each command must see
//! the effects of the commands before it in the batch, but the backend's batch (RocksDB's
//! `WriteBatch`) cannot be read. The overlay answers reads from its pending writes first,
//! then from the base, and hands back the merged [`WriteSet`] for one atomic commit.
//!
//! Every command reads the group's [`Placement`] (to refuse tenants the group does not
//! decide), and it changes only by rare placement commands; the overlay reads it from the
//! base once and keeps it, which is sound because the base does not change under an overlay
//! (the state machine is its only writer, and it writes the overlay's merged set at the end).

use std::cell::OnceCell;
use std::collections::BTreeMap;

use super::{ExpiryKey, Meta, StateStore, WriteSet};
use crate::audit::AuditEntry;
use crate::error::StoreError;
use crate::operation_id::OperationId;
use crate::placement::Placement;
use crate::record::{Record, RecordKey};
use crate::time::Timestamp;

/// Pending writes over a base store.
pub struct Overlay<'a, S: StateStore + ?Sized> {
    base: &'a S,
    pending: WriteSet,
    base_placement: OnceCell<Placement>,
}

impl<'a, S: StateStore + ?Sized> Overlay<'a, S> {
    /// An overlay with nothing pending.
    pub fn new(base: &'a S) -> Self {
        Overlay {
            base,
            pending: WriteSet::default(),
            base_placement: OnceCell::new(),
        }
    }

    /// The merged writes of every commit so far.
    pub fn into_writes(self) -> WriteSet {
        self.pending
    }
}

impl<S: StateStore + ?Sized> StateStore for Overlay<'_, S> {
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        match self.pending.records.get(&key.encode()) {
            Some(pending) => Ok(pending.clone()),
            None => self.base.record(key),
        }
    }

    fn operation(&self, id: &OperationId) -> Result<Option<RecordKey>, StoreError> {
        match self.pending.operations.get(id) {
            Some(pending) => Ok(pending.clone()),
            None => self.base.operation(id),
        }
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<(ExpiryKey, RecordKey)>, StoreError> {
        // Pending deletions can hide at most `pending.len()` base entries.
        let base = self.base.due(now, limit + self.pending.expiry.len())?;
        let mut merged: BTreeMap<ExpiryKey, RecordKey> = base.into_iter().collect();
        for (key, value) in &self.pending.expiry {
            match value {
                Some(record) if key.at <= now => merged.insert(*key, record.clone()),
                _ => merged.remove(key),
            };
        }
        Ok(merged.into_iter().take(limit).collect())
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let base = self
            .base
            .scan(prefix, after, limit + self.pending.records.len())?;
        let mut merged: BTreeMap<Vec<u8>, Record> =
            base.into_iter().map(|r| (r.key.encode(), r)).collect();
        let in_range = |key: &[u8]| key.starts_with(prefix) && after.is_none_or(|a| key > a);
        for (key, value) in &self.pending.records {
            if !in_range(key) {
                continue;
            }
            match value {
                Some(record) => merged.insert(key.clone(), record.clone()),
                None => merged.remove(key),
            };
        }
        Ok(merged.into_values().take(limit).collect())
    }

    fn audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let mut entries = self.base.audit(from, limit)?;
        entries.extend(self.pending.audit.iter().filter(|e| e.seq >= from).cloned());
        entries.truncate(limit);
        Ok(entries)
    }

    fn meta(&self) -> Result<Meta, StoreError> {
        match self.pending.meta {
            Some(meta) => Ok(meta),
            None => self.base.meta(),
        }
    }

    fn placement(&self) -> Result<Placement, StoreError> {
        if let Some(placement) = self
            .pending
            .placement
            .as_ref()
            .or(self.base_placement.get())
        {
            return Ok(placement.clone());
        }
        let placement = self.base.placement()?;
        Ok(self.base_placement.get_or_init(|| placement).clone())
    }

    fn commit(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        self.pending.merge(writes);
        Ok(())
    }
}
