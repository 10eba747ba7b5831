//! The failure of one call to a store under test.
//!
//! A failed call is counted as an error of the run and its first message shown, never retried
//! by the workload: the idem SDK retries transport failures itself (with the same request), as
//! it would in production, and an etcd client would surface the same failures to its caller.

use super::ClaimResult;

/// Why a claim or complete failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The idem SDK's error (after its own retries).
    #[error("idem: {0}")]
    Idem(#[from] idem_client::ClientError),
    /// A benchmark key that idem refuses (a bug of the workload's key naming).
    #[error("invalid key: {0}")]
    Key(#[from] idem_core::ValidationError),
    /// etcd answered with a gRPC error.
    #[error("etcd: {code:?}: {message}")]
    Etcd {
        /// The gRPC code.
        code: tonic::Code,
        /// etcd's message.
        message: String,
    },
    /// A record that is not what this tool writes: etcd JSON it cannot read, a Txn answer
    /// without it, a Postgres row gone between the claim's two statements or with a fence
    /// out of range.
    #[error("record: {0}")]
    Record(String),
    /// The record changed since the claim (etcd: the complete's compare failed; Postgres: the
    /// fenced update matched no row).
    #[error("stale token: the record changed since the claim")]
    StaleToken,
    /// Postgres answered with an error, or the connection failed.
    #[error("postgres: {0}")]
    Postgres(String),
    /// A claim answer the caller cannot continue from (e.g. a preload key someone else holds).
    #[error("unexpected claim answer {0:?}")]
    Unexpected(ClaimResult),
}

impl From<tonic::Status> for CallError {
    fn from(status: tonic::Status) -> Self {
        CallError::Etcd {
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}

impl From<tokio_postgres::Error> for CallError {
    fn from(error: tokio_postgres::Error) -> Self {
        CallError::Postgres(error.to_string())
    }
}
