//! The Raft log and the Raft metadata (vote, committed, last purged) in RocksDB.
//!
//! Entries live in `raft_log` under their big-endian index, so a range of indexes is a
//! range of keys: reads are one forward iteration (an implicit RocksDB snapshot, hence
//! atomic), truncation and purge are one range deletion each. Every write goes through the
//! [`LogWriter`] thread, which serialises them and fires the append callback only after
//! the WAL is fsynced. Votes and purges are synced before they are acknowledged; truncation
//! and `committed` need not be (openraft re-derives both), but since the WAL is ordered they
//! become durable with the next synced write anyway.
//!
//! The tail of the log is also kept in memory (the `entry_cache` module): the state machine
//! and the replication tasks read every entry right after it is appended, and serving those
//! reads from memory spares each a trip to the blocking pool and a RocksDB iterator.
//!
//! Purge never passes what is covered elsewhere: openraft purges only up to the last log id
//! of a snapshot, and a snapshot is fsynced (file and pointer) before openraft learns of it.
//! It may pass the state on disk, though: state-machine batches skip the WAL and reach disk
//! only with RocksDB's next memtable flush. What a crash takes of them is then restored from
//! that snapshot, which openraft installs at start when it is newer than the state
//! recovered, before it applies the entries after it again (see `state_machine`).

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::OptionalSend;
use rocksdb::{Direction, IteratorMode, WriteBatch};

use crate::codec::{self, COMMITTED, LAST_PURGED, VOTE};
use crate::db::{blocking, Cf, Db};
use crate::entry_cache::{self, EntryCache};
use crate::error::StoreError;
use crate::types::{Entry, LogId, TypeConfig, Vote};
use crate::writer::LogWriter;

/// Largest total size of entries `limited_get_log_entries` returns (at least one entry is
/// always returned).
const MAX_READ_BYTES: usize = 4 << 20;

/// openraft's log storage (and log reader) over the node's RocksDB.
///
/// Cheap to clone: clones share the database, the cache of recent entries and the writer
/// thread, which stops when the last clone is dropped.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    writer: Arc<LogWriter>,
    recent: Arc<Mutex<EntryCache>>,
}

impl LogStore {
    /// A log store over `db`, with its writer thread.
    pub(crate) fn new(db: Arc<Db>) -> Result<Self, StoreError> {
        let writer = Arc::new(LogWriter::spawn(db.clone())?);
        let recent = EntryCache::new(entry_cache::MAX_ENTRIES, entry_cache::MAX_BYTES);
        Ok(LogStore {
            db,
            writer,
            recent: Arc::new(Mutex::new(recent)),
        })
    }

    /// The cache of recent entries (a panic while it was held cannot leave it torn: each
    /// operation either completes or leaves a valid, shorter suffix).
    fn recent(&self) -> MutexGuard<'_, EntryCache> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `[start, end)` from the cache when it holds that part of the log, else from RocksDB
    /// on the blocking pool.
    async fn read(
        &self,
        start: u64,
        end: Option<u64>,
        max_bytes: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        if let Some(entries) = self.recent().range(start, end, max_bytes) {
            return Ok(entries);
        }
        let db = self.db.clone();
        blocking(move || read_range(&db, start, end, max_bytes)).await
    }

    /// The id of the last entry present, if any.
    fn last_entry_id(&self) -> Result<Option<LogId>, StoreError> {
        let mut last = self
            .db
            .raw()
            .iterator_cf(self.db.cf(Cf::RaftLog), IteratorMode::End);
        match last.next() {
            Some(item) => {
                let (_, value) = item?;
                Ok(Some(codec::decode::<Entry>(&value)?.log_id()))
            }
            None => Ok(None),
        }
    }

    /// The write of `entries`, and the entries with their encoded sizes (for the cache).
    fn append_batch(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<(WriteBatch, Vec<(Entry, usize)>), StoreError> {
        let mut batch = WriteBatch::default();
        let mut sized = Vec::new();
        let log = self.db.cf(Cf::RaftLog);
        for entry in entries {
            let value = codec::encode(&entry)?;
            batch.put_cf(log, codec::u64_key(entry.index()), &value);
            sized.push((entry, value.len()));
        }
        Ok((batch, sized))
    }

    fn truncate_batch(&self, from: u64) -> WriteBatch {
        let mut batch = WriteBatch::default();
        let log = self.db.cf(Cf::RaftLog);
        batch.delete_range_cf(log, codec::u64_key(from), codec::u64_key(u64::MAX));
        batch.delete_cf(log, codec::u64_key(u64::MAX));
        batch
    }

    fn purge_batch(&self, upto: &LogId) -> Result<WriteBatch, StoreError> {
        let mut batch = WriteBatch::default();
        self.db.put(&mut batch, Cf::RaftMeta, LAST_PURGED, upto)?;
        let log = self.db.cf(Cf::RaftLog);
        let end = upto.index().saturating_add(1);
        batch.delete_range_cf(log, codec::u64_key(0), codec::u64_key(end));
        if end == u64::MAX {
            batch.delete_cf(log, codec::u64_key(u64::MAX));
        }
        Ok(batch)
    }

    fn meta_batch<T: serde::Serialize>(
        &self,
        key: &[u8],
        value: Option<&T>,
    ) -> Result<WriteBatch, StoreError> {
        let mut batch = WriteBatch::default();
        match value {
            Some(value) => self.db.put(&mut batch, Cf::RaftMeta, key, value)?,
            None => batch.delete_cf(self.db.cf(Cf::RaftMeta), key),
        }
        Ok(batch)
    }
}

/// Reads entries with `start <= index < end` in order, stopping early once `max_bytes`
/// have been read (after at least one entry). A gap inside the range is corruption.
fn read_range(
    db: &Db,
    start: u64,
    end: Option<u64>,
    max_bytes: usize,
) -> Result<Vec<Entry>, StoreError> {
    let from = codec::u64_key(start);
    let iter = db.raw().iterator_cf(
        db.cf(Cf::RaftLog),
        IteratorMode::From(&from, Direction::Forward),
    );
    let mut entries: Vec<Entry> = Vec::new();
    let mut bytes = 0;
    for item in iter {
        let (key, value) = item?;
        let index = codec::key_u64(&key, "raft log key")?;
        let full = !entries.is_empty() && bytes >= max_bytes;
        if full || end.is_some_and(|end| index >= end) {
            break;
        }
        let entry: Entry = codec::decode(&value)?;
        check_position(&entries, index, &entry)?;
        bytes += value.len();
        entries.push(entry);
    }
    Ok(entries)
}

fn check_position(before: &[Entry], index: u64, entry: &Entry) -> Result<(), StoreError> {
    if entry.index() != index {
        return Err(StoreError::corrupt(
            "raft log",
            format!("entry {} stored under index {index}", entry.index()),
        ));
    }
    match before.last() {
        Some(prev) if prev.index() + 1 != index => Err(StoreError::corrupt(
            "raft log",
            format!("hole between {} and {index}", prev.index()),
        )),
        _ => Ok(()),
    }
}

/// `[start, end)` of a range of log indexes; `end` `None` is unbounded.
fn index_bounds<RB: RangeBounds<u64>>(range: &RB) -> Option<(u64, Option<u64>)> {
    let start = match range.start_bound() {
        Bound::Included(&start) => start,
        Bound::Excluded(&start) => start.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&end) => end.checked_add(1),
        Bound::Excluded(&end) => Some(end),
        Bound::Unbounded => None,
    };
    Some((start, end))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let Some((start, end)) = index_bounds(&range) else {
            return Ok(Vec::new());
        };
        Ok(self.read(start, end, usize::MAX).await?)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.db.get(Cf::RaftMeta, VOTE)?)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, io::Error> {
        Ok(self.read(start, Some(end), MAX_READ_BYTES).await?)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let last_purged_log_id: Option<LogId> = self.db.get(Cf::RaftMeta, LAST_PURGED)?;
        let last_log_id = self.last_entry_id()?.or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let batch = self.meta_batch(VOTE, Some(vote))?;
        Ok(self.writer.write(batch, true).await?)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let batch = self.meta_batch(COMMITTED, committed.as_ref())?;
        // Not awaited: RaftCore waits for this before it applies, and behind an fsync in
        // the writer's queue that wait was up to a WAL sync long. Durability is not asked
        // for; the writer keeps the order, and a failed write fails the next append too.
        Ok(self.writer.write_detached(batch)?)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.db.get(Cf::RaftMeta, COMMITTED)?)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let (batch, sized) = self.append_batch(entries)?;
        // Cached first, in call order like the log itself: openraft reads the entries only
        // once this returns, and by then the writer has written them too.
        self.recent().append(sized);
        Ok(self.writer.append(batch, callback).await?)
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |id| id.index().saturating_add(1));
        tracing::debug!(from, "truncating the raft log");
        let batch = self.truncate_batch(from);
        self.recent().truncate_from(from);
        Ok(self.writer.write(batch, false).await?)
    }

    async fn purge(&mut self, upto: LogId) -> Result<(), io::Error> {
        let purged: Option<LogId> = self.db.get(Cf::RaftMeta, LAST_PURGED)?;
        if purged.as_ref().is_some_and(|purged| purged >= &upto) {
            return Ok(());
        }
        tracing::debug!(upto = upto.index(), "purging the raft log");
        let batch = self.purge_batch(&upto)?;
        self.recent().purge_upto(upto.index());
        Ok(self.writer.write(batch, true).await?)
    }
}
