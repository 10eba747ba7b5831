//! idem-http: an `Idempotency-Key` middleware for HTTP services, over the idem SDK.
//!
//! Services do not call idem by hand before each side effect: they wrap their routes with
//! [`IdempotencyLayer`] (tower; `axum::Router::layer` or a plain hyper/tower stack), which
//! follows draft-ietf-httpapi-idempotency-key-header and is stricter than the usual
//! middlewares on the three points where they lose correctness:
//!
//! - **Races.** The first claim is decided by the idem cluster, so two concurrent first
//!   requests run the handler once; the other gets `409` with `Retry-After`, or is held
//!   with `Wait` and answered as the first was ([`InFlight`]).
//! - **Payload checks.** A key reused for another request (method, route, path parameters,
//!   query, JSON body, selected headers: [`FingerprintSpec`]) gets `422`, never the first
//!   request's answer.
//! - **Crashes.** The handler runs only as the owner of a record with a lease (renewed while
//!   it runs) and a fence; a crash, panic or timeout lets the next request take over, told
//!   whether an external call began ([`Ledger`]); an unavailable store is a `503`, never an
//!   unprotected run.
//!
//! Answers the layer makes itself are RFC 9457 problem objects ([`problem`]); replays carry
//! the stored status, the route's allow-listed headers and `Idempotent-Replayed: true`, with
//! a body the service re-renders from the stored resource reference ([`replay`]), or on
//! routes that opt in (`RoutePolicy::store_body`) the first answer's body stored verbatim.
//!
//! Keys and bodies are never logged: spans carry the key's hash.

pub mod config;
pub mod fingerprint;
mod flow;
pub mod key;
mod layer;
pub mod ledger;
pub mod metrics;
pub mod outcome;
mod owner;
pub mod problem;
pub mod replay;
pub mod route;

pub use config::{Config, FingerprintSpec, InFlight, Principal, RoutePolicy, ScopeSource};
pub use flow::IDEMPOTENCY_KEY;
pub use layer::{Idempotency, IdempotencyLayer};
pub use ledger::{Ledger, LedgerError};
pub use metrics::Metrics;
pub use problem::{Problem, ProblemKind};
pub use replay::{
    Failure, JsonRender, Render, RenderFuture, Replay, ReplayedFailure, Resource,
    IDEMPOTENT_REPLAYED,
};

/// Re-exported so that services name the same SDK and body types as the layer.
pub use axum::body::Body;
pub use idem_client;
