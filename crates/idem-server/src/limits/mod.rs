//! Limits that keep one tenant, one client or one peer from taking a node down.
//!
//! - [`TenantLimits`]: per-tenant token buckets for claims and owner mutations
//!   (`RATE_LIMITED`, with `retry-after-ms`) and a cap on a tenant's non-terminal records
//!   (`QUOTA_EXCEEDED`), asked by the Idempotency handlers before they propose.
//! - [`AdmissionLayer`]: at most `max_in_flight` requests on the API port, the rest shed at
//!   once (`OVERLOADED`), and the caller's `grpc-timeout` bounding each handler.
//! - [`DiskGuard`]: writes refused (`DISK_FULL`) while the data directory's filesystem has
//!   less free space than `disk_reserve`; reads and replays go on.
//! - [`LimitsConfig`]: the operator's values (`[limits]`), also HTTP/2 stream and keepalive
//!   settings of both ports and the largest snapshot a peer may announce.
//!
//! Every refusal is `RESOURCE_EXHAUSTED` (or the deadline answers), happens before anything
//! is proposed, and is counted in `idem_limit_refusals_total{reason,kind}`. docs/limits.md
//! is the operator's page.

mod admission;
mod bucket;
mod disk;
mod quota;
mod rate;
mod settings;
mod tenant;

pub use admission::{grpc_timeout, Admission, AdmissionLayer, SHED_RETRY_AFTER};
pub use disk::DiskGuard;
pub use quota::{Slot, RESCAN_AFTER, SCAN_LIMIT};
pub use rate::CallKind;
pub use settings::{LimitsConfig, Rate, TenantOverride, DEFAULT_DISK_RESERVE};
pub use tenant::TenantLimits;
