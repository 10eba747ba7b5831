//! The summary table printed on stdout after a run or sweep: one line per measured run.
//!
//! `cs/op` is the nodes' context switches per operation (hand-offs between threads that
//! slept); `gen µs` the load generator's own CPU per operation, client library included.
//! `other` is the CPU (in cores) used during the window by everything but the nodes, the load
//! generator and interrupts: other processes and kernel threads (file-system journal,
//! writeback), and the nodes themselves unless they are watched with `--node-pid` or
//! `--node-tree`. Above a few tenths, something else on the machine competed with the run.
//! A `--node-tree` server's `cpu µs/op` and `cs/op` are its whole process tree's, its `rss`
//! the tree's summed PSS.

use crate::aggregate::headline;
use crate::results::Report;

/// The table of `report`'s runs, header included.
pub fn render(report: &Report) -> String {
    let mut out =
        format!(
        "{:<8} {:<10} {:<6} {:>7} {:>10} {:<9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>6} {:>7} {:>8} {:>6}\n",
        "store", "workload", "mode", "clients", "ops/s", "latency", "p50 ms", "p90 ms", "p99 ms",
        "p99.9 ms", "max ms", "errors", "cpu µs/op", "cs/op", "gen µs", "rss MiB", "other"
    );
    for run in &report.runs {
        let kind = headline(run.workload);
        let lat = run.latency(kind).cloned().unwrap_or_default();
        // Without --node-pid there is nothing to show.
        let (cpu, switches, rss) = if run.nodes.is_empty() {
            ("-".to_owned(), "-".to_owned(), "-".to_owned())
        } else {
            let rss = run.nodes.iter().map(|n| n.rss_mib).fold(0.0, f64::max);
            (
                format!("{:.0}", run.cpu_us_per_op()),
                format!("{:.1}", run.ctx_switches_per_op()),
                format!("{rss:.0}"),
            )
        };
        out.push_str(&format!(
            "{:<8} {:<10} {:<6} {:>7} {:>10.0} {:<9} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>9} {:>6} {:>7.0} {:>8} {:>6.2}\n",
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
            cpu,
            switches,
            run.load_generator_us_per_op(),
            rss,
            run.machine.other,
        ));
        if let Some(error) = &run.first_error {
            out.push_str(&format!("      first error: {error}\n"));
        }
    }
    out
}
