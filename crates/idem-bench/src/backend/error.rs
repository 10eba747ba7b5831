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
    /// An etcd record that is not the JSON this tool writes, or a Txn answer without it.
    #[error("etcd record: {0}")]
    Record(String),
    /// The etcd record changed since the claim (the complete's compare failed).
    #[error("stale token: the record changed since the claim")]
    StaleToken,
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
