//! The node's current snapshot: a file under `<data dir>/snapshots/`, a pointer to it in
//! `sm_meta`, and an in-memory copy.
//!
//! The pointer (snapshot meta, file name, length) is the single source of truth. A new
//! snapshot is written to a temporary file, fsynced and renamed into place, then the
//! pointer is written with a synced RocksDB write; files the pointer does not name are
//! leftovers and are deleted (after each publication and at open). Installing a snapshot
//! received from the leader puts the pointer in the same `WriteBatch` that replaces the
//! state, so after a crash either the old state and old snapshot or the new state and new
//! snapshot are visible, never a mix. See the `blob` module for the data format.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};

use crate::blob;
use crate::codec::{self, APPLIED, CORE_META, MEMBERSHIP, PLACEMENT, SNAPSHOT};
use crate::db::{Cf, Db};
use crate::error::StoreError;
use crate::types::{LogId, Snapshot, SnapshotData, SnapshotMeta, StoredMembership};

/// What `sm_meta/snapshot` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pointer {
    meta: SnapshotMeta,
    file: String,
    len: u64,
}

/// The current snapshot, loaded.
struct Current {
    pointer: Pointer,
    data: Arc<SnapshotData>,
}

/// Builds, installs and serves the node's current snapshot. All methods block (file and
/// RocksDB I/O); callers run them on the blocking pool.
pub(crate) struct SnapshotStore {
    db: Arc<Db>,
    dir: PathBuf,
    /// The loaded current snapshot; the lock also serialises publications.
    current: Mutex<Option<Current>>,
}

impl SnapshotStore {
    /// Opens the snapshot directory and deletes files the pointer does not name.
    pub(crate) fn open(db: Arc<Db>, dir: PathBuf) -> Result<Self, StoreError> {
        fs::create_dir_all(&dir)?;
        let store = SnapshotStore {
            db,
            dir,
            current: Mutex::new(None),
        };
        let pointer = store.pointer()?;
        store.remove_others(pointer.as_ref().map(|p| p.file.as_str()));
        Ok(store)
    }

    /// Builds a snapshot of the state as of now and makes it current (unless a newer one
    /// was installed meanwhile).
    pub(crate) fn build(&self) -> Result<Snapshot, StoreError> {
        let (meta, data) = self.dump()?;
        let mut current = self.lock();
        let published = match current.as_ref() {
            Some(c) => Some(c.pointer.meta.last_log_id),
            None => self.pointer()?.map(|p| p.meta.last_log_id),
        };
        // An install may have published a newer snapshot while this one was dumped.
        if published.is_none_or(|published| published <= meta.last_log_id) {
            let pointer = self.write_file(&meta, &data)?;
            let mut batch = WriteBatch::default();
            self.db.put(&mut batch, Cf::SmMeta, SNAPSHOT, &pointer)?;
            self.db.write(batch, true)?;
            self.publish(&mut current, pointer, &data);
        }
        Ok(Snapshot {
            meta,
            snapshot: data,
        })
    }

    /// Replaces the whole state with `data` at `meta`'s position, atomically, and makes
    /// the snapshot current.
    pub(crate) fn install(
        &self,
        meta: &SnapshotMeta,
        data: SnapshotData,
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for cf in Cf::STATE {
            self.db.clear(&mut batch, cf)?;
        }
        batch.delete_cf(self.db.cf(Cf::SmMeta), CORE_META);
        batch.delete_cf(self.db.cf(Cf::SmMeta), PLACEMENT);
        blob::load(&self.db, &data, &mut batch)?;
        match &meta.last_log_id {
            Some(applied) => self.db.put(&mut batch, Cf::SmMeta, APPLIED, applied)?,
            None => batch.delete_cf(self.db.cf(Cf::SmMeta), APPLIED),
        }
        self.db
            .put(&mut batch, Cf::SmMeta, MEMBERSHIP, &meta.last_membership)?;
        let mut current = self.lock();
        let pointer = self.write_file(meta, &data)?;
        self.db.put(&mut batch, Cf::SmMeta, SNAPSHOT, &pointer)?;
        self.db.write(batch, true)?;
        self.publish(&mut current, pointer, &data);
        Ok(())
    }

    /// The current snapshot, loaded from disk on first use.
    pub(crate) fn current(&self) -> Result<Option<Snapshot>, StoreError> {
        let mut current = self.lock();
        if current.is_none() {
            *current = self.load()?;
        }
        Ok(current.as_ref().map(|c| Snapshot {
            meta: c.pointer.meta.clone(),
            snapshot: c.data.as_ref().clone(),
        }))
    }

    /// A consistent cut of the state: position, membership and data.
    fn dump(&self) -> Result<(SnapshotMeta, SnapshotData), StoreError> {
        let view = self.db.raw().snapshot();
        let meta_cf = self.db.cf(Cf::SmMeta);
        let last_log_id: Option<LogId> = match view.get_cf(meta_cf, APPLIED)? {
            Some(bytes) => Some(codec::decode(&bytes)?),
            None => None,
        };
        let last_membership: StoredMembership = match view.get_cf(meta_cf, MEMBERSHIP)? {
            Some(bytes) => codec::decode(&bytes)?,
            None => StoredMembership::default(),
        };
        let data = blob::dump(&self.db, &view)?;
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
        };
        Ok((meta, data))
    }

    fn load(&self) -> Result<Option<Current>, StoreError> {
        let Some(pointer) = self.pointer()? else {
            return Ok(None);
        };
        let data = fs::read(self.dir.join(&pointer.file))?;
        if data.len() as u64 != pointer.len {
            return Err(StoreError::corrupt(
                "snapshot file",
                format!(
                    "{} has {} bytes, want {}",
                    pointer.file,
                    data.len(),
                    pointer.len
                ),
            ));
        }
        Ok(Some(Current {
            pointer,
            data: Arc::new(data),
        }))
    }

    fn pointer(&self) -> Result<Option<Pointer>, StoreError> {
        self.db.get(Cf::SmMeta, SNAPSHOT)
    }

    /// Writes `data` durably under a fresh name; returns the pointer to it.
    fn write_file(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<Pointer, StoreError> {
        let file = file_name(meta);
        let tmp = self.dir.join(format!("{file}.tmp"));
        let mut out = File::create(&tmp)?;
        out.write_all(data)?;
        out.sync_all()?;
        drop(out);
        fs::rename(&tmp, self.dir.join(&file))?;
        File::open(&self.dir)?.sync_all()?;
        Ok(Pointer {
            meta: meta.clone(),
            file,
            len: data.len() as u64,
        })
    }

    fn publish(&self, current: &mut Option<Current>, pointer: Pointer, data: &SnapshotData) {
        let file = pointer.file.clone();
        *current = Some(Current {
            pointer,
            data: Arc::new(data.clone()),
        });
        self.remove_others(Some(&file));
    }

    /// Deletes every file of the directory but `keep` (best effort).
    fn remove_others(&self, keep: Option<&str>) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if keep.is_some_and(|keep| name.as_os_str() == keep) {
                continue;
            }
            if let Err(e) = fs::remove_file(entry.path()) {
                tracing::warn!(file = ?entry.path(), error = %e, "cannot remove an old snapshot");
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Current>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `snapshot-<index>-<term>-<nanos>.bin`: sortable by position, unique per write.
fn file_name(meta: &SnapshotMeta) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    match &meta.last_log_id {
        Some(id) => format!(
            "snapshot-{:020}-{}-{nanos}.bin",
            id.index(),
            id.committed_leader_id().term
        ),
        None => format!("snapshot-none-{nanos}.bin"),
    }
}

/// The directory snapshots live in, under a node's data directory.
pub(crate) fn dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join("snapshots")
}
