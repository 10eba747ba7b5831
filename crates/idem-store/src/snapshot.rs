//! The node's current snapshot: a file under `<data dir>/snapshots/` and a pointer to it in
//! `sm_meta`. Nothing of it is kept in memory but the pointer.
//!
//! The pointer (snapshot meta, file name, length) is the single source of truth. A new
//! snapshot is dumped, streaming, into a temporary file under `snapshots/partial/`, fsynced
//! and renamed into place, then the pointer is written with a synced RocksDB write; files
//! the pointer does not name are leftovers and are deleted (after each publication and at
//! open; `partial/` is emptied at open). A snapshot received from the leader is received
//! into `partial/` too, checked whole, renamed into place and installed through the marker
//! protocol of the `install` module, which ends with the batch that writes the new
//! pointer: after a crash either the old state and old snapshot or the new state and new
//! snapshot are visible, never a mix. See the `blob` module for the data format.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};

use crate::blob;
use crate::codec::{self, APPLIED, INSTALLING, MEMBERSHIP, SNAPSHOT};
use crate::db::{Cf, Db};
use crate::error::StoreError;
use crate::frames::FrameReader;
use crate::install;
use crate::snapshot_file::SnapshotFile;
use crate::types::{LogId, Snapshot, SnapshotMeta, StoredMembership};

/// Buffer of the writer a snapshot is dumped through.
const WRITE_BUFFER: usize = 1 << 20;

/// What `sm_meta/snapshot` (and `sm_meta/installing`) holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Pointer {
    pub(crate) meta: SnapshotMeta,
    pub(crate) file: String,
    pub(crate) len: u64,
}

/// Builds, installs and serves the node's current snapshot. All methods block (file and
/// RocksDB I/O); callers run them on the blocking pool.
pub(crate) struct SnapshotStore {
    db: Arc<Db>,
    dir: PathBuf,
    /// The current snapshot's pointer. The lock serialises publications and installs, and
    /// a build takes its consistent view of the state under it (never mid-install).
    current: Mutex<Option<Pointer>>,
    /// Numbers the temporary files of this process.
    temporaries: AtomicU64,
}

impl SnapshotStore {
    /// Opens the snapshot directory, finishes an install a crash interrupted, and deletes
    /// files the pointer does not name.
    pub(crate) fn open(db: Arc<Db>, dir: PathBuf) -> Result<Self, StoreError> {
        let partial = partial_dir(&dir);
        if partial.exists() {
            fs::remove_dir_all(&partial)?;
        }
        crate::dirs::create_durable(&partial)?;
        let store = SnapshotStore {
            db,
            dir,
            current: Mutex::new(None),
            temporaries: AtomicU64::new(0),
        };
        if let Some(marked) = store.db.get::<Pointer>(Cf::SmMeta, INSTALLING)? {
            tracing::warn!(
                last_log_id = ?marked.meta.last_log_id,
                "an interrupted snapshot install is being finished"
            );
            let file = SnapshotFile::open_published(store.dir.join(&marked.file))?;
            install::replace_state(&store.db, &file, &marked)?;
        }
        let pointer = store.pointer()?;
        store.remove_others(pointer.as_ref().map(|p| p.file.as_str()));
        *store.lock() = pointer;
        store.check_current()?;
        Ok(store)
    }

    /// Checks the current snapshot whole (header, frames, count, digest), so that a node
    /// never sends a damaged one to a follower: a damaged file is an error naming it.
    fn check_current(&self) -> Result<(), StoreError> {
        let Some(current) = self.current()? else {
            return Ok(());
        };
        check(&current.snapshot).map_err(|e| {
            StoreError::corrupt(
                "snapshot file",
                format!(
                    "{}: {e}; the node's data is damaged (replace the node from its peers, \
                     see docs/guarantees.md)",
                    current.snapshot.path().display()
                ),
            )
        })
    }

    /// Builds a snapshot of the state as of now and makes it current (unless a newer one
    /// was installed meanwhile).
    pub(crate) fn build(&self) -> Result<Snapshot, StoreError> {
        let view = {
            let _current = self.lock();
            self.db.raw().snapshot()
        };
        let meta = read_meta(&self.db, &view)?;
        let mut file = self.temporary()?;
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, &mut file);
        blob::dump(&self.db, &view, &mut out)?;
        out.flush()?;
        drop(out);
        drop(view);
        let mut current = self.lock();
        let published = current.as_ref().map(|c| c.meta.last_log_id);
        // An install may have published a newer snapshot while this one was dumped; then
        // the temporary file is deleted when openraft drops it.
        if published.is_none_or(|published| published <= meta.last_log_id) {
            let name = file_name(&meta);
            file.publish_as(self.dir.join(&name))?;
            sync_dir(&self.dir)?;
            let pointer = Pointer {
                meta: meta.clone(),
                file: name,
                len: file.len(),
            };
            let mut batch = WriteBatch::default();
            self.db.put(&mut batch, Cf::SmMeta, SNAPSHOT, &pointer)?;
            self.db.write(batch, true)?;
            self.publish(&mut current, pointer);
        }
        Ok(Snapshot {
            meta,
            snapshot: file,
        })
    }

    /// Replaces the whole state with `data` at `meta`'s position and makes the snapshot
    /// current. `data` is checked whole first: a damaged file changes nothing.
    pub(crate) fn install(
        &self,
        meta: &SnapshotMeta,
        mut data: SnapshotFile,
    ) -> Result<(), StoreError> {
        check(&data)?;
        let mut current = self.lock();
        let name = file_name(meta);
        self.adopt(&mut data, self.dir.join(&name))?;
        let pointer = Pointer {
            meta: meta.clone(),
            file: name,
            len: data.len(),
        };
        let mut batch = WriteBatch::default();
        self.db.put(&mut batch, Cf::SmMeta, INSTALLING, &pointer)?;
        self.db.write(batch, true)?;
        install::replace_state(&self.db, &data, &pointer)?;
        self.publish(&mut current, pointer);
        Ok(())
    }

    /// The current snapshot, opened.
    pub(crate) fn current(&self) -> Result<Option<Snapshot>, StoreError> {
        let current = self.lock();
        let Some(pointer) = current.as_ref() else {
            return Ok(None);
        };
        let file = SnapshotFile::open_published(self.dir.join(&pointer.file))?;
        if file.len() != pointer.len {
            return Err(StoreError::corrupt(
                "snapshot file",
                format!(
                    "{} has {} bytes, want {}",
                    pointer.file,
                    file.len(),
                    pointer.len
                ),
            ));
        }
        Ok(Some(Snapshot {
            meta: pointer.meta.clone(),
            snapshot: file,
        }))
    }

    /// The index of the last entry the current snapshot covers, if there is one.
    pub(crate) fn last_index(&self) -> Option<u64> {
        self.lock()
            .as_ref()
            .and_then(|p| p.meta.last_log_id.as_ref().map(|id| id.index()))
    }

    /// A new, empty temporary file under `partial/` (a snapshot being received or built).
    pub(crate) fn temporary(&self) -> Result<SnapshotFile, StoreError> {
        let n = self.temporaries.fetch_add(1, Ordering::Relaxed);
        let path = partial_dir(&self.dir).join(format!("{n}.part"));
        Ok(SnapshotFile::create_temporary(path)?)
    }

    fn pointer(&self) -> Result<Option<Pointer>, StoreError> {
        self.db.get(Cf::SmMeta, SNAPSHOT)
    }

    /// Makes `data` durable at `to`: renamed if it is one of this store's temporary files,
    /// copied otherwise (a snapshot handed over from another store).
    fn adopt(&self, data: &mut SnapshotFile, to: PathBuf) -> Result<(), StoreError> {
        let ours = data.is_temporary() && data.path().parent() == Some(&partial_dir(&self.dir));
        if !ours {
            let mut copy = self.temporary()?;
            let mut out = BufWriter::with_capacity(WRITE_BUFFER, &mut copy);
            io::copy(&mut data.reader(), &mut out)?;
            out.flush()?;
            drop(out);
            *data = copy;
        }
        data.publish_as(to)?;
        sync_dir(&self.dir)?;
        Ok(())
    }

    fn publish(&self, current: &mut Option<Pointer>, pointer: Pointer) {
        self.remove_others(Some(&pointer.file));
        *current = Some(pointer);
    }

    /// Deletes every file of the directory but `keep` (best effort); `partial/` is left
    /// alone (it holds snapshots being built or received).
    fn remove_others(&self, keep: Option<&str>) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if !is_file || keep.is_some_and(|keep| name.as_os_str() == keep) {
                continue;
            }
            if let Err(e) = fs::remove_file(entry.path()) {
                tracing::warn!(file = ?entry.path(), error = %e, "cannot remove an old snapshot");
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Pointer>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Checks a whole snapshot file: header, every frame, count and digest.
fn check(data: &SnapshotFile) -> Result<(), StoreError> {
    let mut reader = FrameReader::new(data)?;
    while let Some(frame) = reader.next_frame()? {
        blob::target(frame.tag, frame.key, frame.value)?;
    }
    reader.finish()?;
    Ok(())
}

/// The Raft position of the state seen by `view`.
pub(crate) fn read_meta(db: &Db, view: &rocksdb::Snapshot<'_>) -> Result<SnapshotMeta, StoreError> {
    let meta_cf = db.cf(Cf::SmMeta);
    let last_log_id: Option<LogId> = match view.get_cf(meta_cf, APPLIED)? {
        Some(bytes) => Some(codec::decode(&bytes)?),
        None => None,
    };
    let last_membership: StoredMembership = match view.get_cf(meta_cf, MEMBERSHIP)? {
        Some(bytes) => codec::decode(&bytes)?,
        None => StoredMembership::default(),
    };
    Ok(SnapshotMeta {
        last_log_id,
        last_membership,
    })
}

/// Makes renames and creations in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    crate::dirs::sync(dir)?;
    Ok(())
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

/// Where snapshots being built or received are written.
fn partial_dir(dir: &Path) -> PathBuf {
    dir.join("partial")
}
