//! Replacing the whole state with a snapshot file, in bounded batches, crash-safe.
//!
//! Why not one `WriteBatch`: a batch lives in memory, so one batch holding the whole state
//! costs as much memory as the state (gigabytes at millions of records). The state is
//! replaced in batches of at most [`MAX_BATCH_BYTES`] or [`MAX_BATCH_FRAMES`] instead, and
//! atomicity comes from a durable marker rather than from a single batch:
//!
//! 1. the caller has checked the file whole (digest, every frame), made it durable under
//!    its final name, and written `sm_meta/installing` (a pointer to it) with a synced write;
//! 2. [`replace_state`] clears the state column families (range deletes) and the core
//!    metadata, then loads the frames batch by batch (unsynced: they are ordered in the
//!    WAL before the final batch);
//! 3. one final synced batch writes the last applied log id, the membership and the
//!    snapshot pointer, and deletes the marker.
//!
//! A crash before the marker leaves the old state and old snapshot; a crash after the final
//! batch leaves the new ones. A crash in between leaves the marker: the store redoes steps
//! 2 and 3 from the marked file when it opens, before anything reads the state, so after a
//! restart the state is old or new, never a mix. While an install runs (a lagging follower
//! catching up), the state column families are incomplete; the applied index, and with it
//! every read barrier, moves only with the final batch.

use rocksdb::WriteBatch;

use crate::blob;
use crate::codec::{APPLIED, CORE_META, INSTALLING, MEMBERSHIP, PLACEMENT, SNAPSHOT};
use crate::db::{Cf, Db};
use crate::error::StoreError;
use crate::frames::FrameReader;
use crate::snapshot::Pointer;
use crate::snapshot_file::SnapshotFile;

/// Largest batch of frames written at once, in bytes.
const MAX_BATCH_BYTES: usize = 4 << 20;
/// Most frames written in one batch.
const MAX_BATCH_FRAMES: usize = 10_000;

/// Replaces the state with the frames of `file` (step 2 and 3 above); `pointer` names the
/// file and carries its length and Raft position.
pub(crate) fn replace_state(
    db: &Db,
    file: &SnapshotFile,
    pointer: &Pointer,
) -> Result<(), StoreError> {
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
    clear_state(db)?;
    let mut reader = FrameReader::new(file)?;
    let mut batch = WriteBatch::default();
    let mut in_batch = 0;
    let mut batches = 0;
    while let Some(frame) = reader.next_frame()? {
        let (cf, key) = blob::target(frame.tag, frame.key, frame.value)?;
        batch.put_cf(db.cf(cf), key, frame.value);
        in_batch += 1;
        if in_batch >= max_frames() || batch.size_in_bytes() >= MAX_BATCH_BYTES {
            db.write(std::mem::take(&mut batch), false)?;
            in_batch = 0;
            batches += 1;
            crash_point(batches)?;
        }
    }
    reader.finish()?;
    let meta = &pointer.meta;
    match &meta.last_log_id {
        Some(applied) => db.put(&mut batch, Cf::SmMeta, APPLIED, applied)?,
        None => batch.delete_cf(db.cf(Cf::SmMeta), APPLIED),
    }
    db.put(&mut batch, Cf::SmMeta, MEMBERSHIP, &meta.last_membership)?;
    db.put(&mut batch, Cf::SmMeta, SNAPSHOT, pointer)?;
    batch.delete_cf(db.cf(Cf::SmMeta), INSTALLING);
    db.write(batch, true)
}

/// Deletes every key of the state column families and the core metadata.
fn clear_state(db: &Db) -> Result<(), StoreError> {
    let mut batch = WriteBatch::default();
    for cf in Cf::STATE {
        db.clear(&mut batch, cf)?;
    }
    batch.delete_cf(db.cf(Cf::SmMeta), CORE_META);
    batch.delete_cf(db.cf(Cf::SmMeta), PLACEMENT);
    db.write(batch, false)
}

#[cfg(not(test))]
fn max_frames() -> usize {
    MAX_BATCH_FRAMES
}

#[cfg(not(test))]
fn crash_point(_batches: usize) -> Result<(), StoreError> {
    Ok(())
}

#[cfg(test)]
pub(crate) use hook::{crash_point, max_frames, CRASH};

/// Test hook: small batches, and a load that stops after some batches as if the process
/// had died there.
#[cfg(test)]
mod hook {
    use std::cell::Cell;

    use super::{StoreError, MAX_BATCH_FRAMES};

    thread_local! {
        /// (frames per batch, batches after which the load fails), on this thread.
        pub(crate) static CRASH: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
    }

    pub(crate) fn max_frames() -> usize {
        CRASH.get().map_or(MAX_BATCH_FRAMES, |(frames, _)| frames)
    }

    pub(crate) fn crash_point(batches: usize) -> Result<(), StoreError> {
        match CRASH.get() {
            Some((_, after)) if batches >= after => Err(StoreError::corrupt(
                "install",
                format!("injected crash after {batches} batches"),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::stream;
    use idem_core::testing::{Harness, BODY_A};
    use idem_core::{MemoryStore, Timestamp};
    use openraft::entry::RaftEntry;
    use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
    use rocksdb::IteratorMode;
    use tempfile::TempDir;

    use super::CRASH;
    use crate::codec::INSTALLING;
    use crate::db::{db_dir, Cf, Db};
    use crate::snapshot::{dir_of, SnapshotStore};
    use crate::types::{Entry, Request, TypeConfig};
    use crate::{StateMachine, StateReader};

    /// `claims` first claims of distinct keys, as log entries from `first`.
    fn claims(prefix: &str, claims: usize, first: u64) -> Vec<Entry> {
        let mut h = Harness::new(MemoryStore::new());
        (0..claims)
            .map(|i| {
                let key = Harness::<MemoryStore>::target(&format!("{prefix}-{i}"));
                let request = Request {
                    stamp: Timestamp(1_000_000 + i as u64),
                    command: h.claim_command(&key, BODY_A, "w1").into(),
                };
                let log_id = openraft::testing::log_id::<TypeConfig>(1, 1, first + i as u64);
                Entry::new_normal(log_id, request)
            })
            .collect()
    }

    async fn apply(sm: &mut StateMachine, entries: Vec<Entry>) {
        let items = entries.into_iter().map(|e| Ok((e, None)));
        sm.apply(stream::iter(items)).await.unwrap();
    }

    fn everything(reader: &StateReader) -> impl PartialEq + std::fmt::Debug {
        (
            reader.scan(&[], None, usize::MAX).unwrap(),
            reader.audit(0, usize::MAX).unwrap(),
            reader.meta().unwrap(),
        )
    }

    fn records(db: &Db) -> usize {
        db.raw()
            .iterator_cf(db.cf(Cf::Records), IteratorMode::Start)
            .count()
    }

    /// An install that dies after a few batches (the state half replaced) is finished when
    /// the store reopens: the new state is complete, nothing of the old one is left.
    #[tokio::test(flavor = "multi_thread")]
    async fn an_interrupted_install_is_finished_at_open() {
        let (leader_dir, follower_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
        let (_l_log, mut leader, leader_reader) = crate::open(leader_dir.path()).unwrap();
        apply(&mut leader, claims("new", 200, 1)).await;
        let snapshot = leader
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        let bytes = std::fs::read(snapshot.snapshot.path()).unwrap();
        {
            let (_f_log, mut follower, _reader) = crate::open(follower_dir.path()).unwrap();
            apply(&mut follower, claims("old", 50, 1)).await;
        }

        {
            let db = Arc::new(Db::open(&db_dir(follower_dir.path())).unwrap());
            let store = SnapshotStore::open(db.clone(), dir_of(follower_dir.path())).unwrap();
            let mut received = store.temporary().unwrap();
            received.append(&bytes).unwrap();
            CRASH.set(Some((20, 3)));
            let crashed = store.install(&snapshot.meta, received);
            CRASH.set(None);
            assert!(crashed.is_err());
            // Mid-install: the marker is durable and the state is neither old nor new.
            assert!(db.get_raw(Cf::SmMeta, INSTALLING).unwrap().is_some());
            let loaded = records(&db);
            assert!(loaded > 0 && loaded < 200, "{loaded} records loaded");
        }

        let (_f_log, mut follower, follower_reader) = crate::open(follower_dir.path()).unwrap();
        assert_eq!(
            everything(&follower_reader),
            everything(&leader_reader),
            "the install was finished"
        );
        assert_eq!(
            follower_reader.applied().unwrap(),
            snapshot.meta.last_log_id
        );
        assert_eq!(snapshot.meta.last_log_id.map(|id| id.index()), Some(200));
        let current = follower.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, snapshot.meta);
        assert_eq!(std::fs::read(current.snapshot.path()).unwrap(), bytes);
    }
}
