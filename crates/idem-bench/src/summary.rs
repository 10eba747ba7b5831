//! `summarize`: idem side by side with etcd and with a single-node PostgreSQL, the issues'
//! targets, and the ratio line.
//!
//! The comparison script ends with this, so its last line is machine-readable:
//! `ratio idem/etcd: claim_throughput=… p50=… p99=… retry_throughput=… contention_throughput=…
//! postgres_throughput=… postgres_single=…` where throughputs and p99 are at the largest
//! concurrency measured and p50 at a single client; the two Postgres fields are idem's claim
//! throughput over Postgres's at the largest concurrency and at one client (appended after
//! the etcd fields, so that readers of the older line still find theirs).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::aggregate::{aggregate, Point, PointKey};
use crate::probe::Probe;
use crate::results::Report;
use crate::workload::Workload;

/// The comparison of the backends' reports.
pub struct Summary {
    points: BTreeMap<PointKey, Point>,
    probes: Vec<Probe>,
}

const IDEM: &str = "idem";
const ETCD: &str = "etcd";
const POSTGRES: &str = "postgres";

/// A baseline's name in the table's headers (9 columns wide at most).
fn short(backend: &str) -> &str {
    match backend {
        POSTGRES => "pg",
        other => other,
    }
}

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

/// One line of a table: idem's point `i` against the baseline's `e`, and their errors.
fn row(workload: Workload, clients: usize, i: Option<&Point>, e: Option<&Point>) -> String {
    let f = |p: Option<&Point>, get: fn(&Point) -> f64| p.map_or(f64::NAN, get);
    let reps = i.or(e).map_or(0, |p| p.reps);
    let (ti, te) = (f(i, |p| p.throughput), f(e, |p| p.throughput));
    let (p50i, p50e) = (f(i, |p| p.p50_ms), f(e, |p| p.p50_ms));
    let (p99i, p99e) = (f(i, |p| p.p99_ms), f(e, |p| p.p99_ms));
    let mut out = format!(
        "{:<10} {:>7} {:>4} | {:>9} {:>9} {:>6} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>9} {:>9} | {:>8} {:>8}\n",
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
    out
}

impl Summary {
    /// Aggregates `reports` (any number of repetitions of any backend) with the probes.
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

    fn has(&self, backend: &str) -> bool {
        self.points.keys().any(|k| k.0 == backend)
    }

    /// The side-by-side tables, the targets and, last, the ratio line.
    pub fn render(&self) -> String {
        let mut out = self.table(ETCD);
        if self.has(POSTGRES) {
            out.push_str(
                "idem vs single-node PostgreSQL (one connection per client; pg cpu and rss: its whole process tree, rss as summed PSS):\n",
            );
            out.push_str(&self.table(POSTGRES));
        }
        let _ = writeln!(
            out,
            "(latency: claim of a new key / replay of a completed key / contended claim, ms; cpu: µs of node CPU per operation, all nodes; rss: largest node, MiB)"
        );
        for backend in [IDEM, ETCD, POSTGRES] {
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
        out.push_str(&self.postgres());
        let _ = writeln!(
            out,
            "(ratios: medians; throughputs and p99 at the largest concurrency, p50 and postgres_single at 1 client; < 1 means idem is lower)"
        );
        out.push_str(&self.ratio_line());
        out.push('\n');
        out
    }

    fn workloads(&self) -> Vec<Workload> {
        let mut w: Vec<Workload> = self.points.keys().map(|k| k.1).collect();
        w.sort();
        w.dedup();
        w
    }

    /// idem against `baseline`, one line per workload and concurrency either measured.
    fn table(&self, baseline: &str) -> String {
        let b = short(baseline);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<10} {:>7} {:>4} | {:>9} {:>9} {:>6} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>9} {:>9} | {:>8} {:>8}",
            "workload", "clients", "reps", "idem op/s", format!("{b} op/s"), "ratio", "idem p50",
            format!("{b} p50"), "ratio", "idem p99", format!("{b} p99"), "ratio", "idem cpu",
            format!("{b} cpu"), "idem rss", format!("{b} rss")
        );
        for workload in self.workloads() {
            for clients in self.clients(workload) {
                let (i, e) = (
                    self.point(IDEM, workload, clients),
                    self.point(baseline, workload, clients),
                );
                if i.is_none() && e.is_none() {
                    continue;
                }
                out.push_str(&row(workload, clients, i, e));
            }
        }
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

    /// idem against the single-node Postgres baseline (issue #21): claim throughput at the
    /// largest concurrency and at one client, and the server's CPU per claim.
    fn postgres(&self) -> String {
        if !self.has(POSTGRES) {
            return String::new();
        }
        let mut out = String::from(
            "baseline (issue #21): single-node PostgreSQL, durable (fsync, synchronous_commit on):\n",
        );
        let mut points: Vec<usize> = self.top(Workload::Claim).into_iter().collect();
        points.insert(0, 1);
        points.dedup();
        for c in points {
            if let (Some(i), Some(p)) = (
                self.point(IDEM, Workload::Claim, c),
                self.point(POSTGRES, Workload::Claim, c),
            ) {
                let clients = if c == 1 {
                    "1 client".to_owned()
                } else {
                    format!("{c} clients")
                };
                let _ = writeln!(
                    out,
                    "  claim throughput at {clients}: {:.2}x postgres ({:.0} vs {:.0} ops/s), p50 {:.2} vs {:.2} ms",
                    ratio(i.throughput, p.throughput),
                    i.throughput,
                    p.throughput,
                    i.p50_ms,
                    p.p50_ms,
                );
            }
        }
        if let Some(c) = self.top(Workload::Claim) {
            if let Some(p) = self
                .point(POSTGRES, Workload::Claim, c)
                .filter(|p| !p.cpu_us_per_op.is_nan())
            {
                let _ = writeln!(
                    out,
                    "  postgres CPU per claim+complete at {c} clients: {:.0} µs over the whole server (postmaster, backends, WAL writer, ...), {:.1} context switches; load generator {:.0} µs",
                    p.cpu_us_per_op, p.switches_per_op, p.load_generator_us_per_op,
                );
            }
        }
        out
    }

    /// `idem / baseline` of `f` at the point (`w`, `c`); NaN when either is missing.
    fn versus(&self, baseline: &str, w: Workload, c: Option<usize>, f: fn(&Point) -> f64) -> f64 {
        c.and_then(|c| {
            Some(ratio(
                f(self.point(IDEM, w, c)?),
                f(self.point(baseline, w, c)?),
            ))
        })
        .unwrap_or(f64::NAN)
    }

    fn ratio_line(&self) -> String {
        let top = self.top(Workload::Claim);
        let etcd = |w, c, f| self.versus(ETCD, w, c, f);
        let postgres = |c| self.versus(POSTGRES, Workload::Claim, c, |p| p.throughput);
        format!(
            "ratio idem/etcd: claim_throughput={:.2} p50={:.2} p99={:.2} retry_throughput={:.2} contention_throughput={:.2} postgres_throughput={:.2} postgres_single={:.2}",
            etcd(Workload::Claim, top, |p| p.throughput),
            etcd(Workload::Claim, Some(1), |p| p.p50_ms),
            etcd(Workload::Claim, top, |p| p.p99_ms),
            etcd(Workload::Retry, self.top(Workload::Retry), |p| p.throughput),
            etcd(Workload::Contention, self.top(Workload::Contention), |p| p.throughput),
            postgres(top),
            postgres(Some(1)),
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
            connection_per_client: false,
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
            "ratio idem/etcd: claim_throughput=2.00 p50=2.00 p99=0.20 retry_throughput=5.00 contention_throughput=NaN postgres_throughput=NaN postgres_single=NaN"
        );
        assert!(!text.contains("PostgreSQL"));
        assert!(
            text.contains("idem retries of completed keys >= 5x new claims at 64 clients: 5.00x")
        );
        assert!(text.contains(
            "claim p99 at 64 clients <= etcd/5: 20.00 vs 100.00 ms (0.20x, needs <= 0.20x): met"
        ));
    }

    fn with_server(mut run: RunResult, cpu_ms: f64) -> RunResult {
        run.nodes = vec![crate::node::NodeUsage {
            name: "pg".into(),
            pid: 1,
            cpu_ms,
            cpu_us_per_op: cpu_ms * 1000.0 / run.ops as f64,
            rss_mib: 300.0,
            rss_peak_mib: 300.0,
            ctx_switches: 0,
            ctx_switches_per_op: 4.0,
        }];
        run
    }

    #[test]
    fn compares_idem_with_postgres_after_the_etcd_fields() {
        let idem = report(
            "idem",
            vec![
                run(Workload::Claim, 1, 300.0, 3.0, 5.0),
                run(Workload::Claim, 64, 3000.0, 20.0, 40.0),
            ],
        );
        let etcd = report(
            "etcd",
            vec![
                run(Workload::Claim, 1, 400.0, 2.0, 4.0),
                run(Workload::Claim, 64, 1500.0, 40.0, 80.0),
            ],
        );
        let postgres = |throughput_1: f64, throughput_64: f64| {
            report(
                "postgres",
                vec![
                    with_server(run(Workload::Claim, 1, throughput_1, 0.6, 1.0), 600.0),
                    with_server(run(Workload::Claim, 64, throughput_64, 10.0, 20.0), 3000.0),
                ],
            )
        };
        // Three repetitions of Postgres: the medians are 1200 and 6000 ops/s.
        let reports = [
            idem,
            etcd,
            postgres(1000.0, 6000.0),
            postgres(1200.0, 5000.0),
            postgres(1500.0, 7000.0),
        ];
        let text = Summary::new(&reports, Vec::new()).render();
        assert_eq!(
            text.lines().last().unwrap(),
            "ratio idem/etcd: claim_throughput=2.00 p50=1.50 p99=0.50 retry_throughput=NaN contention_throughput=NaN postgres_throughput=0.50 postgres_single=0.25"
        );
        let pg_table = text.split("single-node PostgreSQL").nth(1).unwrap();
        assert!(pg_table.contains("pg op/s"));
        assert!(pg_table.contains(
            "claim           64    1 |      3000      6000   0.50 |    20.00    10.00   2.00"
        ));
        assert!(text.contains(
            "claim throughput at 1 client: 0.25x postgres (300 vs 1200 ops/s), p50 3.00 vs 0.60 ms"
        ));
        // 3000 ms of server CPU over 6000 operations.
        assert!(text.contains("postgres CPU per claim+complete at 64 clients: 500 µs"));
        // The etcd table is unchanged by the third store.
        let etcd_table = text.split("single-node PostgreSQL").next().unwrap();
        assert!(etcd_table.starts_with("workload   clients reps | idem op/s etcd op/s  ratio |"));
        assert!(!etcd_table.contains("6000"));
    }
}
