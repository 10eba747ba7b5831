//! The reconciler: a way out of "outcome unknown" that does not wait for a person.
//!
//! A worker that dies between calling its downstream and storing the result leaves a record
//! whose outcome nobody knows: NEEDS_RECONCILIATION for HIGH risk, or a record stuck at stage
//! CALLING. Because the downstream was given the `operation_id` as its idempotency key, it
//! can be asked. The [`Reconciler`] lists those records (`Admin.ListOperations`, per tenant
//! and endpoint, paginated), asks the downstream through a [`RemoteCheck`] ([`HttpCheck`],
//! [`CommandCheck`] or the service's own), and settles each definite answer with the
//! version-checked, audited `Admin.Reconcile`:
//!
//! | downstream | record becomes |
//! |---|---|
//! | found, reference R | COMPLETED, result `resource_id` = R: retries replay it |
//! | definitely absent | RETRYABLE_FAILURE, CANCELLED or TERMINAL_FAILURE ([`AbsentPolicy`]) |
//! | unknown, or the check failed | unchanged, counted |
//!
//! Safe to run twice at once (see [`Reconciler`]), rate-limited ([`TokenBucket`]), with a dry
//! run that writes nothing and Prometheus [`Metrics`]. `idemctl reconcile run` is its command
//! line; docs/reconciliation.md is the operator's guide.
//!
//! ```no_run
//! use std::sync::Arc;
//! use idem_client::reconcile::{HttpCheck, HttpCheckConfig, Metrics, Reconciler, ReconcilerOptions};
//! use idem_client::{Client, ClientOptions};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(vec!["127.0.0.1:7400".into()], ClientOptions::default())?;
//! let check = HttpCheck::new(HttpCheckConfig::new(
//!     "https://provider.example/charges/{operation_id}",
//!     "/id",
//! ))?;
//! let options = ReconcilerOptions { tenant: Some("acme".into()), ..Default::default() };
//! let reconciler = Reconciler::new(client, Arc::new(check), options, Metrics::new())?;
//! let report = reconciler.run_pass().await?;
//! println!("settled {}, left alone {}", report.counts.settled(), report.counts.left_alone());
//! # Ok(()) }
//! ```

mod check;
mod command_check;
mod decision;
mod error;
mod http_check;
mod metrics;
mod metrics_server;
mod options;
mod rate;
mod reconciler;
mod report;

pub use check::{CheckFuture, Remote, RemoteCheck};
pub use command_check::{CommandCheck, ABSENT_EXIT, DEFAULT_MAX_OUTPUT, UNKNOWN_EXIT};
pub use decision::{decide, AbsentPolicy, Decision, Leave, ABSENT_CODE};
pub use error::{CheckError, ConfigError};
pub use http_check::{
    json_pointer, HttpCheck, HttpCheckConfig, DEFAULT_MAX_BODY, OPERATION_ID, SYSTEM_CA_FILE,
};
pub use metrics::Metrics;
pub use metrics_server::serve_metrics;
pub use options::{ReconcilerOptions, DEFAULT_RATE, DEFAULT_STUCK_AFTER};
pub use rate::TokenBucket;
pub use reconciler::Reconciler;
pub use report::{Action, Counts, Item, PassReport, MAX_ITEMS};
