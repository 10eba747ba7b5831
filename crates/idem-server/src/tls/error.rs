//! Why a TLS configuration could not be built from its files.

use std::path::PathBuf;

/// A certificate, key or CA file that cannot be used; the node keeps serving with the
/// configuration it had when a reload fails.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read.
    #[error("{what} {path}: {source}")]
    Read {
        /// Which file (`certificate`, `private key`, `CA`).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not the PEM it should be (or holds none of it).
    #[error("{what} {path}: {why}")]
    Pem {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// rustls refused the material (a key that does not match the certificate, a CA it
    /// cannot use).
    #[error("{what}: {why}")]
    Rustls {
        /// What was being built.
        what: &'static str,
        /// rustls' reason.
        why: String,
    },
}
