//! The integration tests of the black-box suite (real idemd processes), in one test binary.
//!
//! Each module is the tests of one part, in the file of the same name. One binary instead
//! of one per file: each test binary is compiled and linked on its own, and in the
//! release profile the tests build with, that was most of a cold build's time.
//! Run one part with `cargo test --release --workspace --test black_box MODULE::`.
//!
//! `upgrade.rs` stays a binary of its own: it drives the previous release's idemd
//! (`IDEM_PREVIOUS_IDEMD`; scripts/upgrade-test.sh, `make release-check`) and runs alone.

mod bad_input;
mod cluster;
mod crash_points;
mod idemctl_session;
mod kill_under_load;
mod regions;
mod single_node;
