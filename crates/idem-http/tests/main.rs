//! The integration tests of idem-http, in one test binary.
//!
//! Each module is the tests of one part, in the file of the same name. One binary instead
//! of one per file: each test binary is compiled and linked on its own, and in the
//! release profile the tests build with, that was most of a cold build's time.
//! Run one part with `cargo test --release --workspace --test http MODULE::`.

mod support;

mod cluster;
mod conformance;
mod overhead;
mod single_node;
mod stored_body;
