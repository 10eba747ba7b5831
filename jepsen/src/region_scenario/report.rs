//! The scenario's report: every figure and every check, as `DIR/regions.json` and as a
//! table on stdout.
//!
//! The JSON holds everything (a step that did not run is `null`); the table is what a
//! person reads first: the latency figures side by side with what they should be compared
//! with (the RTTs), then every check with what was observed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::check::Check;
use super::emulation::Emulation;
use super::error::ScenarioError;
use super::isolation::IsolationFigures;
use super::latency::LatencyFigures;
use super::race::RaceFigures;
use super::replay::ReplayFigures;
use super::roles::Roles;
use super::summary::{Saving, Summary};
use super::verdict::HistoryVerdict;

/// The report's file name in the run directory.
pub const FILE: &str = "regions.json";

/// Everything the scenario measured and checked.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// True when every check passed (and there were checks).
    pub passed: bool,
    /// Wall-clock time of the run, in s.
    pub elapsed_s: f64,
    /// The run directory.
    pub dir: PathBuf,
    /// The emulated cluster.
    pub emulation: Emulation,
    /// Samples per series.
    pub samples: usize,
    /// Who played which part.
    pub roles: Option<Roles>,
    /// Step 1.
    pub latency: Option<LatencyFigures>,
    /// Step 2.
    pub replay: Option<ReplayFigures>,
    /// Step 3, per tenant.
    pub race: Vec<RaceFigures>,
    /// Step 4.
    pub isolation: Option<IsolationFigures>,
    /// The history, judged.
    pub history: Option<HistoryVerdict>,
    /// Every check, in the order made.
    pub checks: Vec<Check>,
}

impl Report {
    /// An empty report of a run in `dir` over `emulation`.
    pub fn new(dir: &Path, emulation: Emulation, samples: usize) -> Report {
        Report {
            passed: false,
            elapsed_s: 0.0,
            dir: dir.to_path_buf(),
            emulation,
            samples,
            roles: None,
            latency: None,
            replay: None,
            race: Vec::new(),
            isolation: None,
            history: None,
            checks: Vec::new(),
        }
    }

    /// Adds a check.
    pub fn check(
        &mut self,
        step: &str,
        name: impl Into<String>,
        passed: bool,
        detail: impl Into<String>,
    ) {
        let check = Check {
            step: step.to_owned(),
            name: name.into(),
            passed,
            detail: detail.into(),
        };
        eprintln!(
            "{}: {}: {}",
            if passed { "ok" } else { "FAILED" },
            check.name,
            check.detail
        );
        self.checks.push(check);
    }

    /// Sets the verdict and the elapsed time.
    pub fn finish(&mut self, elapsed_s: f64) {
        self.elapsed_s = (elapsed_s * 10.0).round() / 10.0;
        self.passed = !self.checks.is_empty() && self.checks.iter().all(|c| c.passed);
    }

    /// Writes `dir/regions.json`.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ScenarioError> {
        let path = dir.join(FILE);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| ScenarioError::Observation(format!("encoding the report: {e}")))?;
        std::fs::write(&path, text + "\n").map_err(|source| ScenarioError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// The human-readable summary.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "region scenario, {}", self.emulation.describe());
        if let Some(r) = &self.roles {
            let _ = writeln!(
                out,
                "client in {} through n{}; global leader n{}; tenant {} homed in {}; replica n{} ({}); {} cut off\n",
                r.home_region, r.client_node, r.global_leader, r.bound_tenant, r.home_region,
                r.replica_node, r.replica_region, r.home_region
            );
        }
        let _ = writeln!(
            out,
            "{:<52} {:>7} {:>8} {:>8} {:>8}",
            "latency (ms)", "samples", "median", "p90", "p99"
        );
        if let Some(l) = &self.latency {
            let via = format!("n{} ({})", l.node, l.region);
            row(
                &mut out,
                &format!("global claim+complete, {} via {via}", l.global.tenant),
                &l.global.claim_complete,
            );
            row(
                &mut out,
                &format!("affinity claim+complete, {} via {via}", l.affinity.tenant),
                &l.affinity.claim_complete,
            );
            saving(
                &mut out,
                "  saved by affinity",
                &l.saving,
                &format!(
                    "{} ms per round trip; RTT {}-{} {} ms",
                    l.saving_per_round_trip_ms,
                    l.region,
                    l.global_leader_region,
                    l.rtt_to_global_leader_ms
                ),
            );
            row(&mut out, "global claim", &l.global.claim);
            row(&mut out, "affinity claim", &l.affinity.claim);
            saving(&mut out, "  saved by affinity", &l.claim_saving, "");
        }
        if let Some(r) = &self.replay {
            row(
                &mut out,
                &format!(
                    "retry of a completed key via n{} ({}), local",
                    r.node, r.region
                ),
                &r.replays,
            );
            row(
                &mut out,
                &format!(
                    "first claim via n{} ({}), leader in {}",
                    r.node, r.region, r.home_region
                ),
                &r.first_claims,
            );
            saving(
                &mut out,
                "  saved by the local replay",
                &r.saving,
                &format!("RTT {}-{} {} ms", r.region, r.home_region, r.rtt_to_home_ms),
            );
        }
        for race in &self.race {
            row(
                &mut out,
                &format!(
                    "concurrent first claims, {} via {:?}",
                    race.tenant, race.nodes
                ),
                &race.claims,
            );
            let _ = writeln!(
                out,
                "  rounds with exactly one ACQUIRED: {} of {}",
                race.one_winner, race.rounds
            );
        }
        if let Some(i) = &self.isolation {
            let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v} ms"));
            let _ = writeln!(
                out,
                "isolation of {} ({:?}): failover seen after {}, leadership home {} after the heal",
                i.region,
                i.cut_off,
                ms(i.failover_detected_ms),
                ms(i.home_after_heal_ms)
            );
        }
        let _ = writeln!(out, "\nchecks");
        for c in &self.checks {
            let _ = writeln!(
                out,
                "  {:<4} {:<9} {}\n              {}",
                if c.passed { "ok" } else { "FAIL" },
                c.step,
                c.name,
                c.detail
            );
        }
        let failed = self.checks.iter().filter(|c| !c.passed).count();
        let _ = writeln!(
            out,
            "\n{}: {} of {} checks passed ({} s)",
            if self.passed { "PASSED" } else { "FAILED" },
            self.checks.len() - failed,
            self.checks.len(),
            self.elapsed_s
        );
        out
    }
}

fn row(out: &mut String, label: &str, s: &Summary) {
    let _ = writeln!(
        out,
        "{label:<52} {:>7} {:>8.2} {:>8.2} {:>8.2}",
        s.samples, s.median_ms, s.p90_ms, s.p99_ms
    );
}

fn saving(out: &mut String, label: &str, s: &Saving, note: &str) {
    let _ = writeln!(
        out,
        "{label:<52} {:>7} {:>8.2} {:>8.2} {:>8.2}  x{:.2} {note}",
        "", s.median_ms, s.p90_ms, s.p99_ms, s.median_ratio
    );
}
