//! The errors of mounting, controlling and corrupting a faultfs.

use std::io;
use std::path::PathBuf;

/// An error of the library or the binary.
#[derive(Debug, thiserror::Error)]
pub enum FaultfsError {
    /// A control command the filesystem does not know.
    #[error(
        "unknown control command {0:?} (expected clear-cache, checkpoint, fail-fsync on|off, \
         fail-write enospc|eio|off)"
    )]
    UnknownCommand(String),
    /// A file system call failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

impl FaultfsError {
    /// A closure turning an `io::Error` on `path` into [`FaultfsError::Io`].
    pub(crate) fn io(what: &'static str, path: &std::path::Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_owned();
        move |source| FaultfsError::Io { what, path, source }
    }
}
