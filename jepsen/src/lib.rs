//! idem-jepsen: the fault-injection harness for idem, in Jepsen's style.
//!
//! The analysis half, and the base the test runner builds on:
//! - [`history`]: the history model (Jepsen's invoke/ok/fail/info entries), a thread-safe
//!   [`history::Recorder`], and EDN/JSON reading and writing;
//! - [`ledger`]: the side-effect ledger that counts executions per operation id;
//! - [`checker`]: the checkers and [`checker::check_all`];
//! - [`results`]: the verdicts and counts written as `results.json`;
//! - [`plot`]: `latency.png` and `rate.png` with fault windows shaded.
//!
//! The running half (the `test`, `cluster` and `regions` subcommands):
//! - [`cluster`]: idemd nodes in network namespaces, region delays, cleanup;
//! - [`nemesis`]: partitions, kills, pauses, clock skew, membership changes, power losses,
//!   bit flips, on a seeded schedule;
//! - [`workload`]: the register, conflict, takeover and high-risk workloads and their worker
//!   protocol;
//! - [`ledger_service`]: the side-effect downstream the workers call;
//! - [`runner`]: one complete test run;
//! - [`matrix`]: the summary of many runs (`make jepsen-matrix`);
//! - [`region_scenario`]: the scripted multi-region scenario (`regions` subcommand): latency
//!   in global and affinity mode, local replays, concurrent claims, a home region cut off.
//!
//! See `jepsen/README.md` for the history schema, what each checker guarantees, and how to
//! run tests.

pub mod checker;
pub mod cluster;
pub mod history;
pub mod http;
pub mod ledger;
pub mod ledger_service;
pub mod matrix;
pub mod nemesis;
pub mod plot;
pub mod region_scenario;
pub mod results;
pub mod runner;
pub mod workload;

pub use checker::{check_all, check_all_with, Options};
pub use history::{History, Op, OpType, Operation, Process, Recorder, Value, F};
pub use ledger::{Ledger, LedgerEntry};
pub use results::Results;
