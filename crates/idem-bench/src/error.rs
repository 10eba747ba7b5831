//! The error type of the tool.
//!
//! A benchmark must not hide failures inside its numbers: a backend error during a measured
//! run is counted (and shown in the table and the JSON), while everything that stops the tool
//! itself (a bad flag, an unreachable cluster at setup, an unwritable output) is one of these
//! variants, printed once, with exit status 2.

use std::path::PathBuf;

/// Everything that stops `idem-bench`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A command-line value that the parser could not check.
    #[error("invalid argument: {0}")]
    Argument(String),
    /// Connecting to a backend failed.
    #[error("cannot connect to {backend} at {endpoint}: {message}")]
    Connect {
        /// `idem`, `etcd` or `postgres`.
        backend: &'static str,
        /// The endpoint tried.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
    /// The setup phase (filling the pool of completed keys, preloading) failed.
    #[error("setup failed: {0}")]
    Setup(String),
    /// Reading or writing a file (results, plots, the fsync probe's file).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A socket of the loopback probe.
    #[error("loopback probe: {0}")]
    Probe(std::io::Error),
    /// A results file that is not valid idem-bench JSON.
    #[error("{path}: not an idem-bench results file: {source}")]
    Results {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// Drawing a plot failed.
    #[error("plot {path}: {message}")]
    Plot {
        /// The PNG being drawn.
        path: PathBuf,
        /// plotters' error.
        message: String,
    },
}

impl BenchError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}
