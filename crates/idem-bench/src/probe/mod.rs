//! Probes of the floor under a single-client claim: a claim cannot be faster than one durable
//! write on the node's disk plus the round trips of the request and of replication.
//!
//! `fsync-probe` measures the disk (write + `fdatasync`, RocksDB's WAL pattern), `rtt-probe`
//! a loopback TCP round trip. The target "single-client claim p50 <= 2 x (fsync + RTT)" is
//! judged against these, measured on the same machine just before the comparison.

mod fsync;
mod rtt;

pub use fsync::fsync_probe;
pub use rtt::rtt_probe;

use serde::{Deserialize, Serialize};

use crate::stats::Latency;

/// The result of a probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// `fsync` or `rtt`.
    pub name: String,
    /// What was measured, in words.
    pub what: String,
    /// Percentiles of one iteration.
    pub latency: Latency,
}

impl Probe {
    /// One line: `fsync p50=0.512ms p99=1.204ms mean=0.601ms (...)`.
    pub fn line(&self) -> String {
        let l = &self.latency;
        format!(
            "{} p50={:.3}ms p99={:.3}ms mean={:.3}ms n={} ({})",
            self.name, l.p50_ms, l.p99_ms, l.mean_ms, l.count, self.what
        )
    }
}
