//! Errors of reading and writing histories and ledgers.
//!
//! Parse errors carry the line and column so a corrupt line in a multi-megabyte history can be
//! found; I/O errors carry the path.

use std::path::PathBuf;

/// A syntax error in EDN text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("EDN syntax error at line {line}, column {column}: {message}")]
pub struct EdnError {
    /// 1-based line of the error.
    pub line: usize,
    /// 1-based column (in characters) of the error.
    pub column: usize,
    /// What was wrong.
    pub message: String,
}

/// Any failure to read, decode or write a history or ledger.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Writing to a stream failed (no path known).
    #[error("write failed: {0}")]
    Write(#[from] std::io::Error),
    /// EDN text was malformed.
    #[error(transparent)]
    Edn(#[from] EdnError),
    /// A JSON line was malformed.
    #[error("JSON syntax error at line {line}: {source}")]
    Json {
        /// 1-based line of the bad JSON document.
        line: usize,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// A form parsed but is not an operation (or ledger entry).
    #[error("entry {position}: {message}")]
    Shape {
        /// 0-based position of the entry in the file.
        position: usize,
        /// What was missing or wrong.
        message: String,
    },
}
