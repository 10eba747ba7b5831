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
//! - **Routing.** Writes are cheapest at the leader of the Raft group that decides them; in
//!   region-affinity mode that is the group of the tenant's home region, so leaders differ
//!   from tenant to tenant. The client keeps a *route per tenant*: the leader a follower named
//!   (`leader-addr` on a forwarded answer, or the hint of `NOT_LEADER`) or the node that
//!   served the tenant's call itself. Every call that names a scope (claim, worker commands,
//!   `get`, `wait`, `purge_subject`) starts at its tenant's route, so after one forwarded call
//!   a tenant's calls go straight to the leader of its home group. Other calls, and tenants
//!   without a route, use the default route (the last leader learned). A node that cannot be
//!   reached is skipped round-robin, and the tenant's route is forgotten.
//! - **Region preference.** With [`ClientOptions::region`] set (the region the service runs
//!   in), a tenant's first call while its leader is unknown starts at an endpoint of that
//!   region instead of the default route, so a tenant homed there is decided without leaving
//!   the region even on its first call. The endpoints' regions are learned once, from the
//!   first endpoint that answers `Admin.Status` (its region and its membership; members of
//!   the client's region that were not configured are added). An endpoint of the region that
//!   could not be reached is skipped for a while; with no endpoint known in the region, the
//!   default route is used. It is only a starting point: correctness never depends on it.
//! - **Region failover.** While a tenant's group is in region failover, HIGH-risk claims and
//!   takeovers are refused with `REGION_FAILOVER`: a definite answer, nothing changed, and
//!   never retried by the SDK (the first attempt may still be running in the cut-off home
//!   region). It is a [`ClientError::Rejected`] with the server's
//!   [`retry_after`](ClientError::retry_after); see [`ClientError::is_region_failover`].
//!   `WRONG_GROUP` (the tenant's home is moving; nothing was written) is retried after a
//!   backoff with the same request.
//! - **Coalescing.** Claims and worker commands that many tasks send through one client at
//!   the same time are coalesced into `Idempotency.Batch` requests, one per endpoint while
//!   earlier requests are still under way ([`Coalescing`]). The server answers each call
//!   exactly as it would alone, so answers, errors and retries do not change; a lone call is
//!   sent at once as the plain rpc. Share one client across a service's tasks to get it.
//! - **Typed answers.** A [`Claim`] carries a [`ClaimOutcome`] with exactly the fields of its
//!   outcome (a fence only when the caller owns the record). Records are idem-core's own
//!   [`Record`](idem_core::Record) (the conversion from the wire is lossless, see [`convert`]). Every failure
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

pub mod audit;
pub mod claim;
mod client;
mod coalescer;
pub mod convert;
mod credentials;
pub mod error;
pub mod holder;
pub mod key_warning;
pub mod keys;
pub mod membership;
pub mod options;
pub mod placement;
pub mod reconcile;
mod tls;
pub mod tokens;
pub mod top;
mod transport;
pub mod types;

pub use claim::{Claim, ClaimOutcome, ClaimRequest, Target};
pub use client::{Client, SnapshotStream, MAX_WAIT};
pub use credentials::BearerToken;
pub use error::ClientError;
pub use key_warning::KeyWarning;
pub use keys::{new_key, new_key_v4};
pub use membership::{MemberProgress, Membership};
pub use options::{ClientOptions, Coalescing, RetryPolicy};
pub use placement::{GroupFailover, GroupStatus, Groups};
pub use tls::TlsOptions;
pub use top::{HotKey, TenantActivity, Top};
pub use types::{
    FailureKind, ListQuery, Lookup, Member, NodeStatus, Page, ReconcileTarget, Reconciliation,
};

/// Re-exported so that callers name the same types as the SDK without a direct dependency.
pub use idem_core;
/// The gRPC status code carried by [`ClientError::Rejected`].
pub use tonic::Code;
