//! `summarize`: idem and etcd side by side, the targets, and the ratio line.
//!
//! The comparison script ends with this, so its last line is machine-readable:
//! `ratio idem/etcd: claim_throughput=… p50=… p99=… retry_throughput=…` where throughputs
//! and p99 are at the largest concurrency measured and p50 at a single client.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::aggregate::{aggregate, Point, PointKey};
use crate::probe::Probe;
use crate::results::Report;
use crate::workload::Workload;

/// The comparison of two backends' reports.
pub struct Summary {
    points: BTreeMap<PointKey, Point>,
    probes: Vec<Probe>,
}

const IDEM: &str = "idem";
const ETCD: &str = "etcd";

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// `value` with `decimals`, or `-` when it is unknown (NaN: a point or a probe is missing).
fn num(value: f64, decimals: usize) -> String {
    if value.is_nan() {
        "-".to_owned()
    } else {
        format!("{value:.decimals$}")
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

impl Summary {
    /// Aggregates `reports` (any number of repetitions of either backend) with the probes.
    pub fn new(reports: &[Report], probes: Vec<Probe>) -> Summary {
        Summary {
            points: aggregate(reports),
            probes,
        }
    }

    fn point(&self, backend: &str, workload: Workload, clients: usize) -> Option<&Point> {
        self.points.get(&(backend.to_owned(), workload, clients))
    }

    fn clients(&self, workload: Workload) -> Vec<usize> {
        let mut c: Vec<usize> = self
            .points
            .keys()
            .filter(|k| k.1 == workload)
            .map(|k| k.2)
            .collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    /// The median p50 of every probe named `name` (the comparison probes the disk several
    /// times, since a shared disk's sync latency moves by an order of magnitude in minutes).
    fn floor_ms(&self, name: &str) -> Option<f64> {
        let p50s: Vec<f64> = self
            .probes
            .iter()
            .filter(|p| p.name == name)
            .map(|p| p.latency.p50_ms)
            .collect();
        (!p50s.is_empty()).then(|| crate::aggregate::median(p50s))
    }

    /// The side-by-side table, the targets and, last, the ratio line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<10} {:>7} {:>4} | {:>9} {:>9} {:>6} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>9} {:>9} | {:>8} {:>8}",
            "workload", "clients", "reps", "idem op/s", "etcd op/s", "ratio", "idem p50", "etcd p50",
            "ratio", "idem p99", "etcd p99", "ratio", "idem cpu", "etcd cpu", "idem rss", "etcd rss"
        );
        let workloads: Vec<Workload> = {
            let mut w: Vec<Workload> = self.points.keys().map(|k| k.1).collect();
            w.dedup();
            w.sort();
            w.dedup();
            w
        };
        for &workload in &workloads {
            for clients in self.clients(workload) {
                let (i, e) = (
                    self.point(IDEM, workload, clients),
                    self.point(ETCD, workload, clients),
                );
                let f = |p: Option<&Point>, get: fn(&Point) -> f64| p.map_or(f64::NAN, get);
                let reps = i.or(e).map_or(0, |p| p.reps);
                let (ti, te) = (f(i, |p| p.throughput), f(e, |p| p.throughput));
                let (p50i, p50e) = (f(i, |p| p.p50_ms), f(e, |p| p.p50_ms));
                let (p99i, p99e) = (f(i, |p| p.p99_ms), f(e, |p| p.p99_ms));
                let _ = writeln!(
                    out,
                    "{:<10} {:>7} {:>4} | {:>9} {:>9} {:>6} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>9} {:>9} | {:>8} {:>8}",
                    workload.name(),
                    clients,
                    reps,
                    num(ti, 0),
                    num(te, 0),
                    num(ratio(ti, te), 2),
                    num(p50i, 2),
                    num(p50e, 2),
                    num(ratio(p50i, p50e), 2),
                    num(p99i, 2),
                    num(p99e, 2),
                    num(ratio(p99i, p99e), 2),
                    num(f(i, |p| p.cpu_us_per_op), 0),
                    num(f(e, |p| p.cpu_us_per_op), 0),
                    num(f(i, |p| p.rss_mib), 0),
                    num(f(e, |p| p.rss_mib), 0),
                );
                let errors = i.map_or(0, |p| p.errors) + e.map_or(0, |p| p.errors);
                if errors > 0 {
                    let _ = writeln!(out, "  ({errors} failed calls in these runs)");
                }
            }
        }
        let _ = writeln!(
            out,
            "(latency: claim of a new key / replay of a completed key / contended claim, ms; cpu: µs of node CPU per operation, all nodes; rss: largest node, MiB)"
        );
        for backend in [IDEM, ETCD] {
            let other: Vec<f64> = self
                .points
                .iter()
                .filter(|(k, _)| k.0 == backend)
                .map(|(_, p)| p.other_cores)
                .collect();
            if !other.is_empty() {
                let max = other.iter().copied().fold(0.0, f64::max);
                let mean = other.iter().sum::<f64>() / other.len() as f64;
                let _ = writeln!(
                    out,
                    "machine: other processes and kernel threads used {mean:.2} cores on average (max {max:.2}) during the {backend} runs"
                );
            }
        }
        for name in ["fsync", "rtt"] {
            let probes: Vec<&Probe> = self.probes.iter().filter(|p| p.name == name).collect();
            if let (Some(first), Some(median)) = (probes.first(), self.floor_ms(name)) {
                let p50s = probes.iter().map(|p| p.latency.p50_ms);
                let (lo, hi) = p50s.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
                let _ = writeln!(
                    out,
                    "floor: {name} p50 {median:.3} ms (median of {} probes, {lo:.3} to {hi:.3}; {})",
                    probes.len(),
                    first.what
                );
            }
        }
        out.push_str(&self.targets());
        let _ = writeln!(
            out,
            "(ratios: medians; throughputs and p99 at the largest concurrency, p50 at 1 client; < 1 means idem is lower)"
        );
        out.push_str(&self.ratio_line());
        out.push('\n');
        out
    }

    fn top(&self, workload: Workload) -> Option<usize> {
        self.clients(workload).last().copied()
    }

    fn targets(&self) -> String {
        let mut out = String::from("targets (issue #7):\n");
        let claim_top = self.top(Workload::Claim);
        if let Some(c) = claim_top {
            if let (Some(i), Some(e)) = (
                self.point(IDEM, Workload::Claim, c),
                self.point(ETCD, Workload::Claim, c),
            ) {
                let r = ratio(i.throughput, e.throughput);
                let _ = writeln!(
                    out,
                    "  claim throughput at {c} clients >= 10x etcd: {r:.2}x ({:.0} vs {:.0} ops/s): {}",
                    i.throughput,
                    e.throughput,
                    verdict(r >= 10.0)
                );
                let r = ratio(i.p99_ms, e.p99_ms);
                let _ = writeln!(
                    out,
                    "  claim p99 at {c} clients <= etcd/5: {:.2} vs {:.2} ms ({r:.2}x, needs <= 0.20x): {}",
                    i.p99_ms,
                    e.p99_ms,
                    verdict(r <= 0.2)
                );
            }
        }
        if let (Some(i), Some(f), Some(t)) = (
            self.point(IDEM, Workload::Claim, 1),
            self.floor_ms("fsync"),
            self.floor_ms("rtt"),
        ) {
            let floor = f + t;
            let _ = writeln!(
                out,
                "  single-client claim p50 <= 2 x (fsync + RTT) = 2 x ({f:.3} + {t:.3}) = {:.3} ms (median p50s of the probes): {:.3} ms ({:.1}x the floor): {}",
                2.0 * floor,
                i.p50_ms,
                ratio(i.p50_ms, floor),
                verdict(i.p50_ms <= 2.0 * floor)
            );
        }
        if let Some(c) = self.top(Workload::Retry).filter(|c| Some(*c) == claim_top) {
            if let (Some(r), Some(n)) = (
                self.point(IDEM, Workload::Retry, c),
                self.point(IDEM, Workload::Claim, c),
            ) {
                let x = ratio(r.throughput, n.throughput);
                let _ = writeln!(
                    out,
                    "  idem retries of completed keys >= 5x new claims at {c} clients: {x:.2}x ({:.0} vs {:.0} ops/s): {}",
                    r.throughput,
                    n.throughput,
                    verdict(x >= 5.0)
                );
            }
        }
        if let Some(c) = claim_top {
            for backend in [IDEM, ETCD] {
                if let Some(p) = self
                    .point(backend, Workload::Claim, c)
                    .filter(|p| !p.cpu_us_per_op.is_nan())
                {
                    let _ = writeln!(
                        out,
                        "  {backend} CPU per claim+complete at {c} clients: {:.0} µs over all nodes ({:.0} µs per node), {:.1} context switches over all nodes; load generator {:.0} µs",
                        p.cpu_us_per_op,
                        p.cpu_us_per_op / 3.0,
                        p.switches_per_op,
                        p.load_generator_us_per_op,
                    );
                }
            }
        }
        out
    }

    fn ratio_line(&self) -> String {
        let get = |w: Workload, c: Option<usize>, f: fn(&Point) -> f64| -> f64 {
            c.and_then(|c| {
                Some(ratio(
                    f(self.point(IDEM, w, c)?),
                    f(self.point(ETCD, w, c)?),
                ))
            })
            .unwrap_or(f64::NAN)
        };
        let top = self.top(Workload::Claim);
        format!(
            "ratio idem/etcd: claim_throughput={:.2} p50={:.2} p99={:.2} retry_throughput={:.2} contention_throughput={:.2}",
            get(Workload::Claim, top, |p| p.throughput),
            get(Workload::Claim, Some(1), |p| p.p50_ms),
            get(Workload::Claim, top, |p| p.p99_ms),
            get(Workload::Retry, self.top(Workload::Retry), |p| p.throughput),
            get(Workload::Contention, self.top(Workload::Contention), |p| p.throughput),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::RunResult;
    use crate::stats::{Counts, Latency};

    fn run(workload: Workload, clients: usize, throughput: f64, p50: f64, p99: f64) -> RunResult {
        let latency = Latency {
            count: 100,
            p50_ms: p50,
            p99_ms: p99,
            ..Latency::default()
        };
        RunResult {
            workload,
            mode: "closed".into(),
            clients,
            target_rate: None,
            dup_share: 1.0,
            hot_keys: 4,
            duration_s: 1.0,
            ops: throughput as u64,
            throughput,
            unsent: 0,
            counts: Counts::default(),
            latency: [(crate::aggregate::headline(workload).to_owned(), latency)].into(),
            nodes: Vec::new(),
            machine: Default::default(),
            first_error: None,
        }
    }

    fn report(backend: &str, runs: Vec<RunResult>) -> Report {
        Report {
            backend: backend.into(),
            endpoints: Vec::new(),
            connections: 1,
            label: None,
            started_unix_s: 0,
            nproc: 2,
            runs,
        }
    }

    #[test]
    fn ends_with_the_ratio_line() {
        let idem = report(
            "idem",
            vec![
                run(Workload::Claim, 1, 100.0, 2.0, 4.0),
                run(Workload::Claim, 64, 2000.0, 10.0, 20.0),
                run(Workload::Retry, 64, 10000.0, 5.0, 10.0),
            ],
        );
        let etcd = report(
            "etcd",
            vec![
                run(Workload::Claim, 1, 200.0, 1.0, 8.0),
                run(Workload::Claim, 64, 1000.0, 20.0, 100.0),
                run(Workload::Retry, 64, 2000.0, 20.0, 40.0),
            ],
        );
        let text = Summary::new(&[idem, etcd], Vec::new()).render();
        let last = text.lines().last().unwrap();
        assert_eq!(
            last,
            "ratio idem/etcd: claim_throughput=2.00 p50=2.00 p99=0.20 retry_throughput=5.00 contention_throughput=NaN"
        );
        assert!(
            text.contains("idem retries of completed keys >= 5x new claims at 64 clients: 5.00x")
        );
        assert!(text.contains(
            "claim p99 at 64 clients <= etcd/5: 20.00 vs 100.00 ms (0.20x, needs <= 0.20x): met"
        ));
    }
}
