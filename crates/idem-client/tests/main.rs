//! The integration tests of the Rust SDK, in one test binary.
//!
//! Each module is the tests of one part, in the file of the same name. One binary instead
//! of one per file: each test binary is compiled and linked on its own, and in the
//! release profile the tests build with, that was most of a cold build's time.
//! Run one part with `cargo test --release --workspace --test client MODULE::`.

mod support;

mod coalescing;
mod regions;
mod retry;
