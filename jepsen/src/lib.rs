//! idem-jepsen: the fault-injection harness for idem, in Jepsen's style.
//!
//! This crate is the analysis half of the harness and the base the test runner builds on:
//! - [`history`]: the history model (Jepsen's invoke/ok/fail/info entries), a thread-safe
//!   [`history::Recorder`], and EDN/JSON reading and writing;
//! - [`ledger`]: the side-effect ledger that counts executions per operation id;
//! - [`checker`]: the checkers and [`checker::check_all`];
//! - [`results`]: the verdicts and counts written as `results.json`;
//! - [`plot`]: `latency.png` and `rate.png` with fault windows shaded.
//!
//! See `jepsen/README.md` for the history schema and what each checker guarantees.

pub mod checker;
pub mod history;
pub mod ledger;
pub mod plot;
pub mod results;

pub use checker::{check_all, check_all_with, Options};
pub use history::{History, Op, OpType, Operation, Process, Recorder, Value, F};
pub use ledger::{Ledger, LedgerEntry};
pub use results::Results;
