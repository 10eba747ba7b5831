//! idem-core: the pure, deterministic semantics of the idem idempotency-key store.
//!
//! Everything else (the RocksDB store, the Raft node, the gRPC API, the SDK, the jepsen
//! checkers) builds on this crate, so it has no I/O, no async runtime and no storage
//! engine: validated identity types ([`Scope`], [`IdempotencyKey`], [`OperationId`],
//! [`fingerprint::Fingerprint`]), the [`Record`] and its state machine, [`Command`]s and
//! the deterministic [`apply()`] over a [`StateStore`].
//!
//! The state machine is documented for users in `docs/semantics.md`.

pub mod apply;
pub mod audit;
pub mod command;
pub mod error;
pub mod fingerprint;
pub mod key;
pub mod log_hash;
pub mod operation_id;
pub mod outcome;
pub mod placement;
pub mod policy;
pub mod record;
pub mod scope;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;

pub use apply::apply;
pub use audit::{AuditAction, AuditEntry};
pub use command::Command;
pub use error::{Field, StoreError, ValidationError};
pub use key::IdempotencyKey;
pub use operation_id::OperationId;
pub use outcome::{ClaimKind, ClaimOutcome, Outcome, Rejection};
pub use placement::Placement;
pub use policy::{Policy, Risk};
pub use record::{
    ErrorSummary, Holder, Lease, Record, RecordKey, Stage, State, StoredBody, StoredResult,
};
pub use scope::Scope;
pub use store::{MemoryStore, StateStore};
pub use time::Timestamp;
