//! What can go wrong taking, reading or restoring a backup.
//!
//! Separate from [`StoreError`] because these are an operator's answers, not storage
//! faults: a damaged file, a data directory already in use, a cut that cannot be taken
//! right now. Each says what to do next.

use std::path::PathBuf;

use crate::error::StoreError;

/// A backup that could not be taken, read or restored.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The storage failed underneath (I/O, RocksDB, a damaged snapshot inside the file).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The file is not a backup of this format (magic, version or header).
    #[error("not an idem backup file: {0}")]
    Format(String),
    /// The file's bytes do not hash to its recorded digest: it is damaged.
    #[error("backup digest mismatch: the file records {recorded}, its bytes hash to {computed}")]
    Digest {
        /// The digest stored in the file (hex).
        recorded: String,
        /// The digest of the bytes read (hex).
        computed: String,
    },
    /// The node has applied nothing yet: there is no state to back up.
    #[error("nothing applied yet: the group is not initialized on this node")]
    NothingApplied,
    /// A snapshot from the leader is being installed here, so the state is incomplete;
    /// try again in a moment (or on another node).
    #[error("a snapshot install is under way on this node; retry shortly")]
    Installing,
    /// Restoring into a data directory that already holds something is refused: it would
    /// mix two histories.
    #[error("{0} is not empty: restore only into a new, empty data directory")]
    NotEmpty(PathBuf),
}

impl From<std::io::Error> for BackupError {
    fn from(error: std::io::Error) -> Self {
        BackupError::Store(StoreError::Io(error))
    }
}
