//! idem-client: the async Rust SDK of idem.
//!
//! A service calls idem before a side effect, and the answer decides whether it runs. That
//! makes the client part of the correctness story, not a thin wrapper:
//!
//! - **Same request on every retry.** A claim or worker command whose answer was lost (a
//!   reset connection, a timeout, `UNAVAILABLE_OUTCOME_UNKNOWN`) is re-sent unchanged: same
//!   key, same holder, same fence, same fingerprint. The server's commands are idempotent
//!   for the same holder and fence, so the retry gets the first attempt's answer (a claim
//!   gets its ownership back with `redelivered = true`) instead of a second effect. Definite
//!   answers (`STALE_FENCE`, `INVALID_*`, any claim outcome) are never retried. See
//!   [`RetryPolicy`].
//! - **Routing.** Writes go to the Raft leader. The client remembers the leader a follower
//!   named in `NOT_LEADER` and starts there next time; it moves round-robin through the
//!   configured endpoints when a node cannot be reached.
//! - **Typed answers.** A [`Claim`] carries a [`ClaimOutcome`] with exactly the fields of its
//!   outcome (a fence only when the caller owns the record). Records are idem-core's own
//!   [`Record`] (the conversion from the wire is lossless, see [`convert`]). Every failure
//!   is one [`ClientError`] with a machine-readable [`ClientError::reason`].
//! - **Fingerprints computed here**, by idem-core's `jcs-sha256/v1`, the same code the
//!   server uses ([`ClaimRequest::for_request`]); or sent as the canonical request for the
//!   server to hash ([`ClaimRequest::server_hashed`]).
//!
//! ```no_run
//! use idem_client::{Client, ClientOptions, ClaimOutcome, ClaimRequest};
//! use idem_core::fingerprint::CanonicalRequest;
//! use idem_core::{IdempotencyKey, RecordKey, Scope, StoredResult};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(vec!["127.0.0.1:7400".into()], ClientOptions::default())?;
//! let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges")?;
//! let target = RecordKey::new(scope, IdempotencyKey::new("order-7f3a")?);
//! let request = CanonicalRequest::new("POST", "/v1/charges")?
//!     .with_json_body(r#"{"amount": 100, "currency": "EUR"}"#);
//! let claim = client.claim(ClaimRequest::for_request(target.clone(), &request, 1)?).await?;
//! match claim.outcome {
//!     ClaimOutcome::Acquired { fence, .. } | ClaimOutcome::TakenOver { fence, .. } => {
//!         // ... charge the card, passing claim.operation_id as the downstream's key ...
//!         let result = StoredResult { status_code: 201, resource_id: "ch_1".into(), ..Default::default() };
//!         client.complete(&target, fence, &result).await?;
//!     }
//!     ClaimOutcome::Completed { result } => { /* replay result */ }
//!     other => { /* 409, 422, ... */ }
//! }
//! # Ok(()) }
//! ```

pub mod claim;
mod client;
pub mod convert;
pub mod error;
pub mod holder;
pub mod membership;
pub mod options;
mod transport;
pub mod types;

pub use claim::{Claim, ClaimOutcome, ClaimRequest, Target};
pub use client::{Client, MAX_WAIT};
pub use error::ClientError;
pub use membership::{MemberProgress, Membership};
pub use options::{ClientOptions, RetryPolicy};
pub use types::{
    FailureKind, ListQuery, Lookup, Member, NodeStatus, Page, ReconcileTarget, Reconciliation,
};

/// Re-exported so that callers name the same types as the SDK without a direct dependency.
pub use idem_core;
/// The gRPC status code carried by [`ClientError::Rejected`].
pub use tonic::Code;
