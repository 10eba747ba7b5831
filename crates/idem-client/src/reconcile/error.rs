//! The errors of the reconciler: a check that could not be answered, and a configuration
//! that cannot work.

use std::time::Duration;

/// Why a downstream check gave no answer. The record is left alone and the error counted.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The downstream could not be reached or the exchange broke off.
    #[error("the downstream could not be reached: {0}")]
    Connect(String),
    /// TLS to the downstream failed.
    #[error("TLS to the downstream failed: {0}")]
    Tls(String),
    /// No answer within the check's time limit.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The answer is larger than the check accepts.
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// The answer is not what the check's mapping expects (bad JSON, an HTTP status it does
    /// not map).
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// The external command could not run or was killed.
    #[error("the check command failed: {0}")]
    Command(String),
}

/// A reconciler or check configured in a way that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The HTTP template is not a usable URL or lacks `{operation_id}`.
    #[error("bad HTTP template: {0}")]
    Template(String),
    /// The JSON pointer is not one (RFC 6901: empty or starting with `/`).
    #[error("bad JSON pointer {0:?}: it must be empty or start with '/'")]
    Pointer(String),
    /// The external command is empty or lacks `{operation_id}`.
    #[error("bad check command: {0}")]
    Command(String),
    /// The CA file for HTTPS could not be read or holds no usable certificate.
    #[error("CA file {path}: {why}")]
    Ca {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// A numeric option is out of its range.
    #[error("{0}")]
    Range(String),
}
