//! The JSON results file (`--out`): one report per invocation, one entry per measured run.
//!
//! Every figure the summary table, the plots and `summarize` show is in this file, so a run
//! can be re-plotted, re-compared or checked later without rerunning it; `summarize` and
//! `plot` read nothing else.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::node::{MachineUsage, NodeUsage};
use crate::stats::{Counts, Latency};
use crate::workload::Workload;

/// The results of one `run`, `sweep` or `preload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `idem`, `etcd` or `postgres`.
    pub backend: String,
    /// The endpoints given.
    pub endpoints: Vec<String>,
    /// Connections (SDK clients, gRPC channels, Postgres connections) the load was spread
    /// over, unless `connection_per_client`.
    pub connections: usize,
    /// Every client had a connection of its own, opened for its run (`--connection-per-client`).
    #[serde(default)]
    pub connection_per_client: bool,
    /// Free text from `--label` (e.g. the repetition of a comparison).
    pub label: Option<String>,
    /// Start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// Cores of the machine (the load generator shares them with the nodes on loopback).
    pub nproc: usize,
    /// The measured runs.
    pub runs: Vec<RunResult>,
}

/// One measured run: a workload at a concurrency (closed loop) or a rate (open loop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The workload.
    pub workload: Workload,
    /// `closed` (N clients back to back) or `open` (a target rate).
    pub mode: String,
    /// Clients (closed loop) or the most operations in flight (open loop).
    pub clients: usize,
    /// Target operations per second of an open-loop run.
    pub target_rate: Option<f64>,
    /// Share of retries (retry workload).
    pub dup_share: f64,
    /// Hot keys (contention workload).
    pub hot_keys: usize,
    /// Length of the measurement window, seconds (after the warm-up).
    pub duration_s: f64,
    /// Operations completed without error that started in the window.
    pub ops: u64,
    /// `ops / duration_s`.
    pub throughput: f64,
    /// Operations of an open-loop run never sent because the store fell behind.
    pub unsent: u64,
    /// Outcome counters.
    pub counts: Counts,
    /// Percentiles per sample kind: `op` (whole operation), `claim` (new key), `complete`,
    /// `replay` (claim of a completed key), `contended` (claim of a hot key).
    pub latency: BTreeMap<String, Latency>,
    /// CPU and memory of the watched nodes (`--node-pid`).
    pub nodes: Vec<NodeUsage>,
    /// Where the machine's CPU went during the window (other processes included).
    #[serde(default)]
    pub machine: MachineUsage,
    /// The first error message, if any call failed.
    pub first_error: Option<String>,
}

impl RunResult {
    /// Percentiles of one sample kind.
    pub fn latency(&self, kind: &str) -> Option<&Latency> {
        self.latency.get(kind)
    }

    /// CPU microseconds per operation summed over the nodes.
    pub fn cpu_us_per_op(&self) -> f64 {
        self.nodes.iter().map(|n| n.cpu_us_per_op).sum()
    }

    /// Context switches per operation summed over the nodes.
    pub fn ctx_switches_per_op(&self) -> f64 {
        self.nodes.iter().map(|n| n.ctx_switches_per_op).sum()
    }

    /// CPU microseconds of the load generator (the client library and the workload loop)
    /// per operation.
    pub fn load_generator_us_per_op(&self) -> f64 {
        if self.ops == 0 {
            return 0.0;
        }
        self.machine.load_generator * self.duration_s * 1e6 / self.ops as f64
    }
}

impl Report {
    /// Reads a results file.
    pub fn read(path: &Path) -> Result<Report, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
        serde_json::from_str(&text).map_err(|source| BenchError::Results {
            path: path.to_owned(),
            source,
        })
    }

    /// Writes the report as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<(), BenchError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
        }
        let text = serde_json::to_string_pretty(self).expect("a report always serializes");
        std::fs::write(path, text + "\n").map_err(|e| BenchError::io(path, e))
    }
}
