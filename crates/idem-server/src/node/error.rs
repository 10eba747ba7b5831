//! Why a node could not start, or stopped badly, and the exit code `idemd` gives for it.
//!
//! Its own module because the groups a node opens report the same errors: they import this,
//! not the node that wires them.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a node could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The data directory cannot be created, read or written.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The data directory belongs to another node id.
    #[error("data directory {path} belongs to node {found}; this node is configured as {configured} (node_id); use that id or another data directory")]
    IdentityMismatch {
        /// The data directory.
        path: PathBuf,
        /// The id recorded in it.
        found: u64,
        /// The configured id.
        configured: u64,
    },
    /// The data directory was written in an on-disk format newer than this release reads.
    #[error("data directory file {path} records data format {found}; this idemd (version {version}) reads up to {supported}: start it with a release that reads format {found} (the one that wrote it), or replace this node with a new, empty member (docs/operations.md, \"Upgrades\")", version = crate::VERSION)]
    NewerDataFormat {
        /// The identity file recording the format.
        path: PathBuf,
        /// The format recorded there.
        found: u32,
        /// The newest format this release reads.
        supported: u32,
    },
    /// The credentials file of `[auth]` cannot be used.
    #[error("{0}")]
    Credentials(#[from] crate::auth::CredentialsError),
    /// A certificate, key or CA file of `[tls]` or `[peer_tls]` cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The log hash secret cannot be read.
    #[error("log_key_file {path}: {source}")]
    LogKey {
        /// The file.
        path: PathBuf,
        /// The I/O error, or why its contents cannot be a secret.
        source: io::Error,
    },
    /// The store failed to open.
    #[error("store: {0}")]
    Store(#[from] idem_store::StoreError),
    /// Raft failed to start, bootstrap or recover.
    #[error("raft: {0}")]
    Raft(String),
    /// A listening socket could not be bound.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        /// Which port.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: io::Error,
    },
    /// A server task failed.
    #[error("{what} server failed: {message}")]
    Serve {
        /// Which server.
        what: &'static str,
        /// Why.
        message: String,
    },
}

impl NodeError {
    /// The process exit code for this error: 2 for configuration problems, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            NodeError::IdentityMismatch { .. }
            | NodeError::NewerDataFormat { .. }
            | NodeError::Credentials(_)
            | NodeError::LogKey { .. } => 2,
            NodeError::Tls(_) => 2,
            _ => 1,
        }
    }
}
