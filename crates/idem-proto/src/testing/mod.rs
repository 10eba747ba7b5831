//! Test fixtures for crates that talk to idem over `idem.v1` (feature `testing`).
//!
//! The SDK's and idemctl's tests both need an `Admin` endpoint that answers like a node of a
//! two-region cluster without starting one. Written once here, the two test suites cannot
//! drift apart on what a node answers, and a change to `admin.proto` is made to one fake:
//!
//! - [`admin`]: [`FakeAdmin`], an in-memory `Admin` service with the placement rules of a
//!   real node (versions, unknown regions, conflicts, failover confirmation), that records
//!   every request it receives;
//! - [`sample`]: the wire messages it starts from (the groups a node reports, a member);
//! - [`requests`]: the `Idempotency` requests the server's tests send (scope, claims,
//!   complete).

pub mod admin;
pub mod requests;
pub mod sample;

pub use admin::{service, AdminFake, FakeAdmin};
