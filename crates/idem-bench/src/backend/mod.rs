//! The stores under test, behind one trait so that every workload runs unchanged on all.
//!
//! Every backend implements the same two-step protocol that a payment service would run:
//! `claim(key)` decides whether the caller owns a new record (and hands it a token: idem's
//! fence, etcd's mod revision, the Postgres row's fence), replays a completed one, or reports
//! someone else's pending claim; `complete(key, token)` stores the result, guarded by the
//! token. What a claim costs on each store (one Raft entry on idem, one Txn on etcd, one
//! committed INSERT on Postgres) is exactly what the numbers compare.

mod error;
mod etcd;
mod idem;
mod postgres;

use std::future::Future;

pub use error::CallError;
pub use etcd::EtcdBackend;
pub use idem::IdemBackend;
pub use postgres::PostgresBackend;

/// Where the etcd and Postgres records live: the scope of the idem backend, flattened into
/// a prefix of the key, so that every store keeps the scope with each key as idem does.
const PREFIX: &str = "/idem/bench/bench/bench-actor/POST /v1/charges/";
/// The fingerprint every etcd and Postgres claim carries (the same request body as the idem
/// backend's).
const FINGERPRINT: &str =
    "jcs-sha256/v1:1:4f1ef3a0b4d8a48b25c2a1c8b2a5d0e63c0a4a2c7b11b2a3a4c5d6e7f8091a2b";
/// The lease a claim takes, as idem's default endpoint policy.
const LEASE_MS: u64 = 30_000;

use crate::cli::TargetArgs;
use crate::error::BenchError;

/// What a claim decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimResult {
    /// The caller owns a new (or taken-over) record; `complete` with this token.
    Acquired(u64),
    /// The record is completed: its result was replayed.
    Replayed,
    /// Someone else holds the record.
    InProgress,
    /// Any other decision (mismatch, failed record, ...): counted, never expected here.
    Other,
}

/// A store under test. One value is one connection (or one SDK client); the runner opens
/// `--connections` of them and spreads the clients over them.
pub trait Backend: Send + Sync + Sized + 'static {
    /// `idem`, `etcd` or `postgres`.
    const NAME: &'static str;

    /// Opens a connection to the store `target` names; `index` says which of the runner's
    /// connections this is (a backend without its own routing uses it to pick an endpoint).
    fn connect(
        target: &TargetArgs,
        index: usize,
    ) -> impl Future<Output = Result<Self, BenchError>> + Send;

    /// Claims `key`.
    fn claim(&self, key: &str) -> impl Future<Output = Result<ClaimResult, CallError>> + Send;

    /// Completes `key`, owned with `token` from its claim.
    fn complete(&self, key: &str, token: u64)
        -> impl Future<Output = Result<(), CallError>> + Send;
}
