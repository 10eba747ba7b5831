//! The pluggable question the reconciler asks the downstream: "did you execute this
//! operation?".
//!
//! A service passes the idem `operation_id` to its downstream as the downstream's own
//! idempotency key (docs/semantics.md, the external-call ledger), so the downstream can be
//! asked about exactly that operation. How to ask differs per provider, hence a trait; two
//! implementations come with the SDK ([`super::HttpCheck`], [`super::CommandCheck`]).
//!
//! The answer has three values on purpose. Only a *definite* answer may settle a record:
//! treating "I could not tell" as "absent" would let the next claim call the downstream a
//! second time.

use std::future::Future;
use std::pin::Pin;

use idem_core::OperationId;

use super::error::CheckError;

/// What the downstream says about one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remote {
    /// It executed the operation; the reference is its id for the effect (e.g. `psp_1`),
    /// stored as the record's result `resource_id`.
    Found {
        /// The downstream's reference.
        reference: String,
    },
    /// It definitely has no trace of the operation.
    Absent,
    /// It answered, but not definitely (e.g. a status the mapping does not name).
    Unknown {
        /// Why the answer is not definite (no body fragments).
        why: String,
    },
}

/// The future of [`RemoteCheck::check`].
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Result<Remote, CheckError>> + Send + 'a>>;

/// Asks a downstream whether it executed an operation, by the operation id it was given as
/// its idempotency key.
///
/// An error is counted as a check error and leaves the record alone, exactly like
/// [`Remote::Unknown`]; the distinction only feeds the metrics.
pub trait RemoteCheck: Send + Sync {
    /// Asks about `operation_id`.
    fn check<'a>(&'a self, operation_id: &'a OperationId) -> CheckFuture<'a>;

    /// A short name for reports and logs, e.g. `http` or `command`.
    fn kind(&self) -> &'static str;
}
