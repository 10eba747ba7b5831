//! idem-server: one idem node, and the `idemd` binary that runs it.
//!
//! A node owns a data directory (the RocksDB store of `idem-store`), runs an openraft group
//! over it, and serves the public gRPC API (`idem.v1.Idempotency`, `idem.v1.Admin`, gRPC
//! health and reflection) plus an HTTP port with `/metrics` and `/healthz`.
//!
//! Every write, even on a single node, is a Raft proposal stamped with the leader's clock
//! ([`replica::Replica`]): the path that runs in a one-voter group today is exactly the
//! one that runs replicated later. Reads that decide anything first pass a read-index
//! barrier. Both are bounded by timeouts, and a timeout is reported as
//! `UNAVAILABLE_OUTCOME_UNKNOWN`, never as a definite failure.
//!
//! Entry points:
//!
//! - [`Config`]: the effective configuration (file < `IDEM_*` environment < flags).
//! - [`Node::start`] → [`NodeHandle`]: start a node (tests and `idemd` alike), learn its
//!   bound addresses, shut it down.
//! - [`backend::Backend`]: what the gRPC services need from the replicated store; the
//!   services ([`api::IdempotencyService`], [`api::AdminService`]) depend on nothing else.

pub mod api;
pub mod auth;
pub mod backend;
pub mod config;
pub mod failpoint;
pub mod groups;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod node;
pub mod policy;
pub mod replica;
pub mod shutdown;
pub mod signals;
pub mod stats;
pub mod stuck;
pub mod sweep;
pub mod telemetry;
pub mod tls;
pub mod usage;

pub use config::cluster::{ClusterConfig, InitialMember};
pub use config::{Config, ConfigError, LogFormat};
pub use node::{Node, NodeError, NodeHandle};
pub use policy::Policies;

/// The version of this node (`CARGO_PKG_VERSION`), reported by `Admin.Status`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
