//! The replicated idempotency state in RocksDB, behind the core's
//! [`StateStore`](idem_core::StateStore) trait.
//!
//! The core decides what to write (records, index entries, audit entries, metadata, all in
//! one [`WriteSet`]); this type only stores it, so the in-memory reference store and RocksDB
//! run the same semantics and the same test suite. Reads go straight to the database (the
//! state machine is its only writer); `commit` turns a write set into one atomic
//! `WriteBatch`. The state machine uses [`RocksState::stage`] instead, to add its own log
//! position to the same batch.

use std::path::Path;
use std::sync::Arc;

use idem_core::store::{ExpiryKey, Meta, WriteSet};
use idem_core::{AuditEntry, OperationId, Placement, Record, RecordKey, StateStore, Timestamp};
use rocksdb::{Direction, IteratorMode, WriteBatch};

use crate::codec::{self, CORE_META, PLACEMENT};
use crate::db::{db_dir, Cf, Db};
use crate::error::StoreError;

/// The core's state store over RocksDB.
#[derive(Clone)]
pub struct RocksState {
    db: Arc<Db>,
}

impl RocksState {
    /// Opens the state of the node data directory `dir` without a Raft node (for tools
    /// and tests). Do not use it while the node runs: RocksDB allows one opener.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Ok(RocksState::new(Arc::new(Db::open(&db_dir(dir))?)))
    }

    /// A state store over the node's database.
    pub(crate) fn new(db: Arc<Db>) -> Self {
        RocksState { db }
    }

    /// The record stored under `key`.
    pub(crate) fn get_record(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        self.db.get(Cf::Records, &key.encode())
    }

    /// The record key indexed under an operation id.
    pub(crate) fn get_operation(&self, id: &OperationId) -> Result<Option<RecordKey>, StoreError> {
        match self.db.get_raw(Cf::Operations, id.as_bytes())? {
            Some(bytes) => Ok(Some(RecordKey::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Expiry entries due at `now`, oldest first.
    pub(crate) fn get_due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<(ExpiryKey, RecordKey)>, StoreError> {
        let iter = self
            .db
            .raw()
            .iterator_cf(self.db.cf(Cf::Expiry), IteratorMode::Start);
        let mut due = Vec::new();
        for item in iter {
            if due.len() >= limit {
                break;
            }
            let (key, value) = item?;
            let key = ExpiryKey::decode(&key)
                .ok_or_else(|| StoreError::corrupt("expiry key", format!("{key:?}")))?;
            if key.at > now {
                break;
            }
            due.push((key, RecordKey::decode(&value)?));
        }
        Ok(due)
    }

    /// Records under `prefix`, strictly after `after`, in key order. Like the reference
    /// store, the scan stops at the first key outside the prefix.
    pub(crate) fn get_scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let start = after.unwrap_or(prefix);
        let iter = self.db.raw().iterator_cf(
            self.db.cf(Cf::Records),
            IteratorMode::From(start, Direction::Forward),
        );
        let mut records = Vec::new();
        for item in iter {
            let (key, value) = item?;
            if after == Some(&*key) {
                continue;
            }
            if records.len() >= limit || !key.starts_with(prefix) {
                break;
            }
            records.push(codec::decode(&value)?);
        }
        Ok(records)
    }

    /// Audit entries from `from`, in order.
    pub(crate) fn get_audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let start = codec::u64_key(from);
        let iter = self.db.raw().iterator_cf(
            self.db.cf(Cf::Audit),
            IteratorMode::From(&start, Direction::Forward),
        );
        iter.take(limit)
            .map(|item| codec::decode(&item?.1))
            .collect()
    }

    /// The core metadata (default when nothing was ever applied).
    pub(crate) fn get_meta(&self) -> Result<Meta, StoreError> {
        Ok(self.db.get(Cf::SmMeta, CORE_META)?.unwrap_or_default())
    }

    /// The group's placement state (default when never changed), in this version's form
    /// or the one stored before replicated tokens existed ([`Placement::decode`]).
    pub(crate) fn get_placement(&self) -> Result<Placement, StoreError> {
        match self.db.get_raw(Cf::SmMeta, PLACEMENT)? {
            Some(bytes) => Ok(Placement::decode(&bytes)?),
            None => Ok(Placement::default()),
        }
    }

    /// Adds `writes` to `batch`.
    pub(crate) fn stage(&self, batch: &mut WriteBatch, writes: WriteSet) -> Result<(), StoreError> {
        let db = &self.db;
        for (key, record) in writes.records {
            match record {
                Some(record) => db.put(batch, Cf::Records, &key, &record)?,
                None => batch.delete_cf(db.cf(Cf::Records), key),
            }
        }
        for (id, key) in writes.operations {
            put_or_delete(db, batch, Cf::Operations, id.as_bytes(), key)?;
        }
        for (at, key) in writes.expiry {
            put_or_delete(db, batch, Cf::Expiry, &at.encode(), key)?;
        }
        for entry in writes.audit {
            db.put(batch, Cf::Audit, &codec::u64_key(entry.seq), &entry)?;
        }
        if let Some(meta) = writes.meta {
            db.put(batch, Cf::SmMeta, CORE_META, &meta)?;
        }
        if let Some(placement) = writes.placement {
            db.put(batch, Cf::SmMeta, PLACEMENT, &placement)?;
        }
        Ok(())
    }
}

/// Index entries map to encoded record keys; `None` deletes.
fn put_or_delete(
    db: &Db,
    batch: &mut WriteBatch,
    cf: Cf,
    key: &[u8],
    value: Option<RecordKey>,
) -> Result<(), StoreError> {
    match value {
        Some(record) => batch.put_cf(db.cf(cf), key, record.encode()),
        None => batch.delete_cf(db.cf(cf), key),
    }
    Ok(())
}

impl StateStore for RocksState {
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, idem_core::StoreError> {
        Ok(self.get_record(key)?)
    }

    fn operation(&self, id: &OperationId) -> Result<Option<RecordKey>, idem_core::StoreError> {
        Ok(self.get_operation(id)?)
    }

    fn due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<(ExpiryKey, RecordKey)>, idem_core::StoreError> {
        Ok(self.get_due(now, limit)?)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, idem_core::StoreError> {
        Ok(self.get_scan(prefix, after, limit)?)
    }

    fn audit(&self, from: u64, limit: usize) -> Result<Vec<AuditEntry>, idem_core::StoreError> {
        Ok(self.get_audit(from, limit)?)
    }

    fn meta(&self) -> Result<Meta, idem_core::StoreError> {
        Ok(self.get_meta()?)
    }

    fn placement(&self) -> Result<Placement, idem_core::StoreError> {
        Ok(self.get_placement()?)
    }

    fn commit(&mut self, writes: WriteSet) -> Result<(), idem_core::StoreError> {
        let mut batch = WriteBatch::default();
        self.stage(&mut batch, writes)?;
        Ok(self.db.write(batch, false)?)
    }
}
