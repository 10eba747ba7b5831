//! The one RocksDB instance of a node and its column families.
//!
//! Log, Raft metadata and state share a single database on purpose: one write-ahead log
//! orders every write of the log store, so syncing the WAL for a later write (a log append,
//! a vote, a purge) also makes every earlier one durable. State-machine batches are the
//! exception: they are written WITHOUT the WAL ([`Db::write_state`]), since every one of
//! them can be recomputed from log entries that are already durable. They become durable
//! when RocksDB flushes its memtables, which it does for all column families at once
//! (`atomic_flush`), so the state on disk is always the state as of one applied index,
//! never records of one index beside the `applied` marker of another (the state machine's
//! docs say how a restart rebuilds what a crash took).
//! Column families separate the concerns (docs/design.md §4) so each can be scanned, cleared or
//! tuned on its own:
//!
//! | column family | key | value |
//! |---|---|---|
//! | `raft_log` | log index, u64 big-endian | bincode `Entry` |
//! | `raft_meta` | `vote`, `committed`, `last_purged` | bincode `Vote` / `LogId` |
//! | `records` | `RecordKey::encode` | bincode `Record` |
//! | `operations` | 16-byte operation id | `RecordKey::encode` |
//! | `expiry` | `ExpiryKey::encode` | `RecordKey::encode` |
//! | `audit` | audit seq, u64 big-endian | bincode `AuditEntry` |
//! | `sm_meta` | `core`, `applied`, `membership`, `placement`, `snapshot`, `installing` | bincode `Meta` / `LogId` / `StoredMembership` / `Placement` / snapshot pointer / pointer of an install in progress |

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBRecoveryMode, IteratorMode,
    Options, WriteBatch, WriteOptions, DB,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec;
use crate::error::StoreError;

/// The on-disk format version of a data directory: this layout of column families, keys
/// and bincode values. idemd records it in the directory's `node.toml` (`data_format`)
/// when it creates the directory (`idemctl snapshot restore` too) and refuses to start on
/// a directory of a newer format; a directory without the marker was written by a release
/// before it existed, in this layout, version 1. Any change a previous release would
/// misread (a new column family it ignores while it matters, a new key encoding, a value
/// layout change) bumps it, together with a migration at start.
pub const DATA_FORMAT_VERSION: u32 = 1;

/// A column family of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cf {
    /// Raft log entries.
    RaftLog,
    /// Vote, committed, last purged.
    RaftMeta,
    /// Idempotency records.
    Records,
    /// Operation-id index.
    Operations,
    /// Expiry index.
    Expiry,
    /// Audit log.
    Audit,
    /// State-machine metadata.
    SmMeta,
}

impl Cf {
    /// Every column family.
    pub(crate) const ALL: [Cf; 7] = [
        Cf::RaftLog,
        Cf::RaftMeta,
        Cf::Records,
        Cf::Operations,
        Cf::Expiry,
        Cf::Audit,
        Cf::SmMeta,
    ];

    /// The column families that hold replicated state (what a snapshot carries, besides
    /// the core metadata in `sm_meta`).
    pub(crate) const STATE: [Cf; 4] = [Cf::Records, Cf::Operations, Cf::Expiry, Cf::Audit];

    /// Per-family options: every family reads through the database's one block cache,
    /// index and filter blocks included (otherwise RocksDB keeps those of every table file
    /// in memory, and memory grows with the data); bloom filters where the API does point
    /// lookups by key (records by scope and key, the operation-id index).
    fn options(self, cache: &Cache) -> Options {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(cache);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        if matches!(self, Cf::Records | Cf::Operations) {
            table.set_bloom_filter(10.0, false);
        }
        let mut options = Options::default();
        options.set_block_based_table_factory(&table);
        options
    }

    /// The RocksDB name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Cf::RaftLog => "raft_log",
            Cf::RaftMeta => "raft_meta",
            Cf::Records => "records",
            Cf::Operations => "operations",
            Cf::Expiry => "expiry",
            Cf::Audit => "audit",
            Cf::SmMeta => "sm_meta",
        }
    }
}

/// The database handle shared (in an `Arc`) by the log store, the state machine, the
/// snapshot store and the readers.
pub(crate) struct Db {
    db: DB,
    /// The first failed write or WAL fsync. From then on nothing reaches RocksDB again: its
    /// WAL writer is in an error state that the linked (Debian, assertions on) build turns
    /// into an abort on the next append (`sync_without_flush_called_`), and a retried fsync
    /// could report success for data the kernel already dropped ("fsyncgate").
    failure: std::sync::OnceLock<String>,
    /// Test builds only: the write that fails, counted from 1 (0: none), see
    /// [`Db::fail_write`].
    #[cfg(test)]
    failing_write: std::sync::atomic::AtomicU64,
}

impl Db {
    /// Opens (creating if needed) the database at `path` with every column family.
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        crate::dirs::create_durable(path)?;
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.set_wal_recovery_mode(DBRecoveryMode::PointInTime);
        options.set_keep_log_file_num(8);
        // No WAL recycling (`recycle_log_file_num`), although overwriting an old WAL in place
        // would make each `fdatasync` cheaper (no size change to journal): RocksDB 7.x turns
        // it off under point-in-time recovery, the mode the Raft log needs (stop at the first
        // torn record, never skip one), and says so only in its LOG.
        // A WAL file is deleted (or recycled) only once every column family holding data in
        // it has flushed. The small families (Raft metadata, state metadata, audit) fill
        // their memtables slowly and would pin every WAL until RocksDB's default cap of
        // 4 x the total write buffers (gigabytes): disk and restart replay time with it.
        // Past this size, RocksDB flushes the families pinning the oldest WAL.
        options.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
        // State batches skip the WAL, so a flush is the only thing that makes them durable,
        // and it must take every family at one point: records written by entry 10 beside
        // an `applied` marker of entry 9 (or the reverse) would make a restart apply
        // entry 10 twice (or never). RocksDB flushes all families atomically when it
        // flushes on its own (full memtables, WAL size, shutdown) with this option; idem
        // never asks for a flush of a single family (that would be atomic over that family
        // alone).
        options.set_atomic_flush(true);
        // Memory is bounded by these two budgets (plus RocksDB's small fixed overhead),
        // not by the number of records: memtables of all families together, and the
        // block cache that also holds index and filter blocks.
        options.set_db_write_buffer_size(MEMTABLE_BYTES);
        let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES)?;
        let db = open_waiting(&options, &cache, path)?;
        for cf in Cf::ALL {
            db.cf_handle(cf.name())
                .ok_or(StoreError::MissingColumnFamily(cf.name()))?;
        }
        Ok(Db {
            db,
            failure: std::sync::OnceLock::new(),
            #[cfg(test)]
            failing_write: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The RocksDB handle.
    pub(crate) fn raw(&self) -> &DB {
        &self.db
    }

    /// The handle of a column family.
    pub(crate) fn cf(&self, cf: Cf) -> &ColumnFamily {
        self.db
            .cf_handle(cf.name())
            .expect("every column family is checked at open")
    }

    /// Reads and decodes a bincode value.
    pub(crate) fn get<T: DeserializeOwned>(
        &self,
        cf: Cf,
        key: &[u8],
    ) -> Result<Option<T>, StoreError> {
        match self.db.get_pinned_cf(self.cf(cf), key)? {
            Some(bytes) => Ok(Some(codec::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Reads raw bytes.
    pub(crate) fn get_raw(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get_cf(self.cf(cf), key)?)
    }

    /// Adds a bincode value to `batch`.
    pub(crate) fn put<T: Serialize + ?Sized>(
        &self,
        batch: &mut WriteBatch,
        cf: Cf,
        key: &[u8],
        value: &T,
    ) -> Result<(), StoreError> {
        batch.put_cf(self.cf(cf), key, codec::encode(value)?);
        Ok(())
    }

    /// Writes `batch` atomically; with `sync`, the WAL is fsynced before returning.
    pub(crate) fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), StoreError> {
        self.refuse_after_failure()?;
        self.injected_failure().map_err(|e| self.latch(e))?;
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        self.db
            .write_opt(batch, &options)
            .map_err(|e| self.latch(e.into()))
    }

    /// Writes a state-machine batch without the WAL: it reaches disk with the next memtable
    /// flush, and until then a crash loses it (the log entries it came from are replayed).
    pub(crate) fn write_state(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.refuse_after_failure()?;
        self.injected_failure().map_err(|e| self.latch(e))?;
        self.db
            .write_opt(batch, &state_options())
            .map_err(|e| self.latch(e.into()))
    }

    /// [`Db::write_state`] unless RocksDB would make the caller wait for it (a write stall,
    /// a full memtable waiting for its flush): then nothing is written and the batch comes
    /// back, for the caller to write where waiting is allowed.
    pub(crate) fn write_state_unless_stalled(
        &self,
        batch: WriteBatch,
    ) -> Result<Option<WriteBatch>, StoreError> {
        self.refuse_after_failure()?;
        self.injected_failure().map_err(|e| self.latch(e))?;
        let copy = WriteBatch::from_data(batch.data());
        let mut options = state_options();
        options.set_no_slowdown(true);
        match self.db.write_opt(batch, &options) {
            Ok(()) => Ok(None),
            Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete => Ok(Some(copy)),
            Err(e) => Err(self.latch(e.into())),
        }
    }

    /// [`StoreError::FailedBefore`] once a write or fsync failed.
    fn refuse_after_failure(&self) -> Result<(), StoreError> {
        match self.failure.get() {
            Some(first) => Err(StoreError::FailedBefore(first.clone())),
            None => Ok(()),
        }
    }

    /// Remembers the first failure (see `failure`) and hands `error` back.
    fn latch(&self, error: StoreError) -> StoreError {
        let _ = self.failure.set(error.to_string());
        error
    }

    /// Test builds only: the `nth` batch write from now (1: the next) fails before it
    /// reaches RocksDB, as a disk error below the state machine would fail it.
    #[cfg(test)]
    pub(crate) fn fail_write(&self, nth: u64) {
        self.failing_write
            .store(nth, std::sync::atomic::Ordering::SeqCst);
    }

    /// The failure [`Db::fail_write`] asked for, when this write is the one.
    #[cfg(test)]
    fn injected_failure(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering::SeqCst;
        match self
            .failing_write
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        {
            Ok(1) => Err(std::io::Error::other("injected write failure").into()),
            _ => Ok(()),
        }
    }

    /// Production builds inject nothing.
    #[cfg(not(test))]
    #[inline(always)]
    fn injected_failure(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Makes every write so far durable.
    pub(crate) fn sync_wal(&self) -> Result<(), StoreError> {
        self.refuse_after_failure()?;
        self.db.flush_wal(true).map_err(|e| self.latch(e.into()))
    }

    /// Adds to `batch` one range deletion covering every key of `cf`.
    pub(crate) fn clear(&self, batch: &mut WriteBatch, cf: Cf) -> Result<(), StoreError> {
        let handle = self.cf(cf);
        if let Some(last) = self.db.iterator_cf(handle, IteratorMode::End).next() {
            let (last, _) = last?;
            // The smallest key after `last`: the range [empty, last ++ 0x00) is everything.
            let mut end = last.to_vec();
            end.push(0);
            batch.delete_range_cf(handle, Vec::new(), end);
        }
        Ok(())
    }
}

/// The options of a state-machine write: no WAL (see [`Db::write_state`]).
fn state_options() -> WriteOptions {
    let mut options = WriteOptions::default();
    options.disable_wal(true);
    options
}

/// Memtables of all column families together; past it RocksDB flushes them all.
const MEMTABLE_BYTES: usize = 128 << 20;

/// The block cache of the database (data, index and filter blocks of every family).
const BLOCK_CACHE_BYTES: usize = 128 << 20;

/// Most bytes of WAL files kept alive before the oldest one's column families are flushed.
const MAX_TOTAL_WAL_BYTES: u64 = 256 << 20;

/// How long [`Db::open`] waits for an earlier instance in this process to close.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// Opens the database, waiting while an earlier instance in this process still holds the
/// lock: after a Raft node shuts down, its tasks drop their store handles asynchronously,
/// and a restart in the same process (tests, embedded use) must not race them. A lock held
/// by another process fails at once.
fn open_waiting(options: &Options, cache: &Cache, path: &Path) -> Result<DB, StoreError> {
    let deadline = Instant::now() + CLOSE_WAIT;
    loop {
        let families = Cf::ALL
            .iter()
            .map(|cf| ColumnFamilyDescriptor::new(cf.name(), cf.options(cache)));
        match DB::open_cf_descriptors(options, path, families) {
            Ok(db) => return Ok(db),
            Err(e) if held_by_this_process(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn held_by_this_process(error: &rocksdb::Error) -> bool {
    error.as_ref().contains("lock hold by current process")
}

/// Where the database lives under a node's data directory.
pub(crate) fn db_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("db")
}

/// Runs blocking RocksDB or file work on tokio's blocking pool, off the async executor.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, StoreError>
where
    F: FnOnce() -> Result<T, StoreError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Blocking(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_put() -> WriteBatch {
        let mut batch = WriteBatch::default();
        batch.put(b"new", b"2");
        batch
    }

    #[test]
    fn a_write_that_need_not_wait_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        assert!(db.write_state_unless_stalled(one_put()).unwrap().is_none());
        assert_eq!(db.raw().get(b"new").unwrap(), Some(b"2".to_vec()));
    }
}
