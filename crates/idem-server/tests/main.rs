//! The integration tests of idem-server, in one test binary.
//!
//! Each module is the tests of one part, in the file of the same name (`cluster.rs`,
//! `tls.rs`, ...). One binary instead of one per file: every test binary compiles and
//! links the whole node (RocksDB, openraft, tonic) again, and in a cold build the sixteen
//! binaries of this crate took 957 s of compiler time, more than the rest of the
//! workspace's test binaries together (docs/architecture.md, "Testing layers"). Run one
//! part with `cargo test --release --workspace --test server cluster::`.
//!
//! `otlp.rs` stays a binary of its own: it installs the process-wide tracing subscriber.

mod support;

mod audit;
mod backup;
mod backup_limits;
mod backup_regions;
mod cluster;
mod data_format;
mod disk_faults;
mod forward_auth;
mod fuzz_decode;
mod idemd;
mod limits;
mod node;
mod permissions;
mod tls;
mod tokens;
