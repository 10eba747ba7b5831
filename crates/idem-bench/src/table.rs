//! The summary table printed on stdout after a run or sweep: one line per measured run.

use crate::aggregate::headline;
use crate::results::Report;

/// The table of `report`'s runs, header included.
pub fn render(report: &Report) -> String {
    let mut out =
        format!(
        "{:<5} {:<10} {:<6} {:>7} {:>10} {:<9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>8}\n",
        "store", "workload", "mode", "clients", "ops/s", "latency", "p50 ms", "p90 ms", "p99 ms",
        "p99.9 ms", "max ms", "errors", "cpu µs/op", "rss MiB"
    );
    for run in &report.runs {
        let kind = headline(run.workload);
        let lat = run.latency(kind).cloned().unwrap_or_default();
        let rss = run.nodes.iter().map(|n| n.rss_mib).fold(0.0, f64::max);
        out.push_str(&format!(
            "{:<5} {:<10} {:<6} {:>7} {:>10.0} {:<9} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>9.0} {:>8.0}\n",
            report.backend,
            run.workload.name(),
            run.mode,
            run.clients,
            run.throughput,
            kind,
            lat.p50_ms,
            lat.p90_ms,
            lat.p99_ms,
            lat.p999_ms,
            lat.max_ms,
            run.counts.errors,
            run.cpu_us_per_op(),
            rss,
        ));
        if let Some(error) = &run.first_error {
            out.push_str(&format!("      first error: {error}\n"));
        }
    }
    out
}
