//! Medians over repetitions: the figures the comparison, its ratios and the plots use.
//!
//! A comparison runs each (backend, workload, concurrency) point several times, alternating
//! backends so that slow drifts of the machine (page cache, compactions, another tenant) hit
//! both; the median of the repetitions is reported, which one noisy repetition cannot move.

use std::collections::BTreeMap;

use crate::results::{Report, RunResult};
use crate::workload::Workload;

/// Where a point sits: backend, workload, clients.
pub type PointKey = (String, Workload, usize);

/// The median figures of one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Repetitions measured.
    pub reps: usize,
    /// Operations per second.
    pub throughput: f64,
    /// Median latency of the workload's claim (see [`headline`]), ms.
    pub p50_ms: f64,
    /// 99th percentile of it, ms.
    pub p99_ms: f64,
    /// CPU per operation summed over the nodes, µs (NaN when no node was watched).
    pub cpu_us_per_op: f64,
    /// Context switches per operation summed over the nodes (NaN when no node was watched).
    pub switches_per_op: f64,
    /// CPU of the load generator (client library included) per operation, µs.
    pub load_generator_us_per_op: f64,
    /// Largest resident set of any node at the end of a run, MiB (NaN when none was watched).
    pub rss_mib: f64,
    /// Failed calls over all repetitions.
    pub errors: u64,
    /// CPU of other processes on the machine during the windows, cores (median).
    pub other_cores: f64,
}

/// The claim a workload is about, whose latency the table, the ratios and the plots show:
/// a new key's claim (`claim`), a completed key's (`replay`, the retry workload), a hot key's
/// (`contended`); the whole operation for `mixed`.
pub fn headline(workload: Workload) -> &'static str {
    match workload {
        Workload::Claim => "claim",
        Workload::Retry => "replay",
        Workload::Contention => "contended",
        Workload::Mixed => "op",
    }
}

/// The median of `values` (0 for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Median figures of every point found in `reports` (closed-loop runs only: open-loop runs
/// are at a given rate, not a concurrency).
pub fn aggregate(reports: &[Report]) -> BTreeMap<PointKey, Point> {
    let mut groups: BTreeMap<PointKey, Vec<&RunResult>> = BTreeMap::new();
    for report in reports {
        for run in report.runs.iter().filter(|r| r.mode == "closed") {
            groups
                .entry((report.backend.clone(), run.workload, run.clients))
                .or_default()
                .push(run);
        }
    }
    groups
        .into_iter()
        .map(|(key, runs)| {
            let kind = headline(key.1);
            let watched = runs.iter().any(|r| !r.nodes.is_empty());
            let lat = |f: fn(&crate::stats::Latency) -> f64| {
                median(runs.iter().filter_map(|r| r.latency(kind)).map(f).collect())
            };
            let point = Point {
                reps: runs.len(),
                throughput: median(runs.iter().map(|r| r.throughput).collect()),
                p50_ms: lat(|l| l.p50_ms),
                p99_ms: lat(|l| l.p99_ms),
                cpu_us_per_op: if watched {
                    median(runs.iter().map(|r| r.cpu_us_per_op()).collect())
                } else {
                    f64::NAN
                },
                switches_per_op: if watched {
                    median(runs.iter().map(|r| r.ctx_switches_per_op()).collect())
                } else {
                    f64::NAN
                },
                load_generator_us_per_op: median(
                    runs.iter().map(|r| r.load_generator_us_per_op()).collect(),
                ),
                rss_mib: if watched {
                    runs.iter()
                        .flat_map(|r| r.nodes.iter().map(|n| n.rss_mib))
                        .fold(0.0, f64::max)
                } else {
                    f64::NAN
                },
                errors: runs.iter().map(|r| r.counts.errors).sum(),
                other_cores: median(runs.iter().map(|r| r.machine.other).collect()),
            };
            (key, point)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
