//! idem-store: the RocksDB storage of an idem node.
//!
//! One RocksDB instance per node holds the Raft log and metadata ([`LogStore`], openraft's
//! `RaftLogStorage`), the replicated idempotency state ([`StateMachine`], openraft's
//! `RaftStateMachine`, applying commands through [`idem_core::apply`]), and serves the API
//! layer's reads of committed state ([`StateReader`]). [`RocksState`] is the same state
//! behind the core's [`StateStore`](idem_core::StateStore) trait, so the core's semantic
//! suite runs against RocksDB unchanged.
//!
//! Why one database: a single write-ahead log orders all writes of the node, so one fsync
//! covers log and state alike, and purge/snapshot durability arguments stay simple (see
//! the `db` module for the column families and `codec` for the encodings).
//!
//! On-disk layout under the data directory given to [`open`]:
//!
//! ```text
//! <dir>/db/          RocksDB (column families raft_log, raft_meta, records, operations,
//!                    expiry, audit, sm_meta)
//! <dir>/snapshots/   the current snapshot file (see `snapshot` and `blob`)
//! <dir>/snapshots/partial/   snapshots being built or received (emptied at open)
//! ```

mod backup;
mod backup_error;
mod backup_file;
mod blob;
mod builder;
mod codec;
mod db;
mod dirs;
mod entry_cache;
mod error;
mod frames;
mod install;
mod log_store;
mod reader;
mod restore;
mod snapshot;
mod snapshot_file;
mod snapshot_policy;
mod state;
mod state_machine;
mod types;
mod verify;
#[cfg(test)]
mod write_failure_tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use idem_core::placement::{GroupId, GLOBAL_GROUP};

pub use backup::{
    backup_version, hex_digest, write_backup, BackupCut, BackupHeader, BackupOrigin, BackupSummary,
    BACKUP_MAGIC, BACKUP_VERSION, BACKUP_VERSION_SINGLE, MAX_GROUPS,
};
pub use backup_error::BackupError;
pub use backup_file::BackupFile;
pub use builder::SnapshotBuilder;
pub use db::DATA_FORMAT_VERSION;
pub use error::StoreError;
pub use log_store::LogStore;
pub use reader::StateReader;
pub use restore::restore;
pub use snapshot_file::SnapshotFile;
pub use state::RocksState;
pub use state_machine::StateMachine;
pub use types::{
    Entry, LogId, NodeInfo, Raft, Request, Response, Snapshot, SnapshotData, SnapshotMeta,
    StoredMembership, TypeConfig, Vote,
};

/// Where a node keeps the storage of Raft group `group` (the directory given to [`open`]):
/// the data directory itself for the global group (the single-group layout), `groups/<id>`
/// below it for a region group.
pub fn group_dir(data_dir: &Path, group: GroupId) -> PathBuf {
    if group == GLOBAL_GROUP {
        data_dir.to_path_buf()
    } else {
        data_dir.join("groups").join(group.to_string())
    }
}

/// Opens (creating if needed) the node's storage under `dir`: one RocksDB instance shared
/// by the log store, the state machine and the reader.
///
/// Drop all three (and every clone of the log store and reader) to close the database.
/// If an earlier instance in this process is still closing (a Raft node's tasks release
/// their handles asynchronously after `shutdown`), this waits up to 10 s for it; a
/// database locked by another process is an error at once.
pub fn open(dir: &Path) -> Result<(LogStore, StateMachine, StateReader), StoreError> {
    verify::logs(&db::db_dir(dir))?;
    let db = Arc::new(db::Db::open(&db::db_dir(dir))?);
    verify::tables(&db)?;
    let snapshots = Arc::new(snapshot::SnapshotStore::open(
        db.clone(),
        snapshot::dir_of(dir),
    )?);
    let applied = state_machine::read_applied(&db)?.map_or(0, |id| id.index());
    let (applied_tx, applied_rx) = tokio::sync::watch::channel(applied);
    let placement = Arc::new(RocksState::new(db.clone()).get_placement()?);
    let (placement_tx, placement_rx) = tokio::sync::watch::channel(placement);
    let log = LogStore::new(db.clone())?;
    let published = state_machine::Published {
        applied: applied_tx,
        placement: placement_tx,
    };
    let state_machine = StateMachine::new(db.clone(), snapshots, published);
    let reader = StateReader::new(db, applied_rx, placement_rx);
    Ok((log, state_machine, reader))
}
