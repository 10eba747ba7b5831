//! The crate's one error type.
//!
//! Storage errors are never interpreted, only reported: openraft turns an `io::Error` from
//! any storage call into a fatal error and stops the node, which is exactly what docs/design.md
//! §6 asks of a failed apply (stop rather than diverge). The conversions below are the two
//! boundaries: `io::Error` for openraft, [`idem_core::StoreError`] for the core's
//! [`StateStore`](idem_core::StateStore) trait.

use std::io;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB failed (I/O, corruption detected by RocksDB, lock held by another process).
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A file operation outside RocksDB failed (snapshot files, data directory).
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// A value could not be encoded or decoded with bincode.
    #[error("encoding: {}", codec_detail(.0))]
    Codec(#[from] bincode::Error),
    /// Stored bytes or a received snapshot do not have the expected shape.
    #[error("corrupt {what}: {detail}")]
    Corrupt {
        /// What was being read.
        what: &'static str,
        /// What was wrong with it.
        detail: String,
    },
    /// The core rejected stored data (for example, an invalid record key).
    #[error(transparent)]
    Core(#[from] idem_core::StoreError),
    /// A column family is missing from an existing database.
    #[error("column family {0} is missing")]
    MissingColumnFamily(&'static str),
    /// The log writer thread is gone (the store is shutting down or it panicked).
    #[error("log writer thread stopped")]
    WriterStopped,
    /// An earlier write or fsync failed: the store writes nothing more until the node is
    /// restarted (its disk checked), never retrying an fsync.
    #[error("an earlier write or fsync failed ({0}); nothing is written until the node restarts")]
    FailedBefore(String),
    /// A blocking task could not be run or did not complete.
    #[error("blocking task failed: {0}")]
    Blocking(String),
}

impl StoreError {
    /// A [`StoreError::Corrupt`] for `what`.
    pub(crate) fn corrupt(what: &'static str, detail: impl Into<String>) -> Self {
        StoreError::Corrupt {
            what,
            detail: detail.into(),
        }
    }

    /// True when stored or received data is malformed, as opposed to a failing backend.
    pub fn is_corruption(&self) -> bool {
        match self {
            StoreError::Codec(_) | StoreError::Corrupt { .. } => true,
            StoreError::Core(e) => matches!(e, idem_core::StoreError::Corrupt(_)),
            _ => false,
        }
    }
}

/// bincode's own words, except for a value cut short: bincode reports that as an I/O error
/// with an empty message (`io error: `), which names no cause.
fn codec_detail(error: &bincode::Error) -> String {
    match error.as_ref() {
        bincode::ErrorKind::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            "the value ends before its last field (truncated, or a length inside it is corrupt)"
                .to_owned()
        }
        other => other.to_string(),
    }
}

impl From<StoreError> for io::Error {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Io(e) => e,
            e if e.is_corruption() => io::Error::new(io::ErrorKind::InvalidData, e),
            e => io::Error::other(e),
        }
    }
}

impl From<StoreError> for idem_core::StoreError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Core(e) => e,
            e if e.is_corruption() => idem_core::StoreError::Corrupt(e.to_string()),
            e => idem_core::StoreError::Backend(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_cut_short_says_so() {
        let bytes = crate::codec::encode(&(7u64, String::from("result"))).unwrap();
        let error = crate::codec::decode::<(u64, String)>(&bytes[..bytes.len() - 2]).unwrap_err();
        assert!(error.is_corruption());
        assert_eq!(
            error.to_string(),
            "encoding: the value ends before its last field (truncated, or a length inside it \
             is corrupt)"
        );
    }
}
