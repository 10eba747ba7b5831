//! `compare-builds`: several builds of idem, side by side (`scripts/bench/builds.sh`).
//!
//! The question a change to the write path has to answer is "did it make idem cheaper?", on a
//! machine whose speed drifts by more than most changes move (another tenant, the page cache,
//! the CPU's clock). So builds are measured in rounds: every round runs each build once, in a
//! rotated order, and a build's figure is divided by the base build's figure *of the same
//! round*. Whatever drifted between rounds cancels; what drifted within one shows as the
//! spread. The table gives, per point, each build's medians and, for every build but the base,
//! the median of its per-round ratios with their range.
//!
//! A results file belongs to a build and a round through its label, `<build>-r<round>` (the
//! script passes `--label`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::aggregate::{headline, median};
use crate::error::BenchError;
use crate::results::{Report, RunResult};
use crate::workload::Workload;

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    throughput: f64,
    cpu_us_per_op: f64,
    switches_per_op: f64,
    p50_ms: f64,
    p99_ms: f64,
}

impl Figures {
    fn of(run: &RunResult) -> Figures {
        let latency = run.latency(headline(run.workload));
        Figures {
            throughput: run.throughput,
            cpu_us_per_op: run.cpu_us_per_op(),
            switches_per_op: run.ctx_switches_per_op(),
            p50_ms: latency.map_or(f64::NAN, |l| l.p50_ms),
            p99_ms: latency.map_or(f64::NAN, |l| l.p99_ms),
        }
    }

    /// The figures compared between builds, each with its name.
    fn compared(&self) -> [(&'static str, f64); 4] {
        [
            ("throughput", self.throughput),
            ("cpu/op", self.cpu_us_per_op),
            ("p50", self.p50_ms),
            ("p99", self.p99_ms),
        ]
    }
}

/// Figures by build, then by round.
type Rounds = BTreeMap<String, BTreeMap<u32, Figures>>;

/// The runs of every build, by point (workload, clients).
pub struct BuildComparison {
    base: String,
    points: BTreeMap<(Workload, usize), Rounds>,
}

impl BuildComparison {
    /// Sorts the closed-loop runs of `reports` by point, build and round; `base` must be one
    /// of the builds.
    pub fn new(reports: &[Report], base: &str) -> Result<BuildComparison, BenchError> {
        let mut points: BTreeMap<(Workload, usize), Rounds> = BTreeMap::new();
        for report in reports {
            let (build, round) = build_and_round(report.label.as_deref())?;
            for run in report.runs.iter().filter(|r| r.mode == "closed") {
                points
                    .entry((run.workload, run.clients))
                    .or_default()
                    .entry(build.to_owned())
                    .or_default()
                    .insert(round, Figures::of(run));
            }
        }
        if !points.values().any(|builds| builds.contains_key(base)) {
            return Err(BenchError::Argument(format!(
                "no results of the base build {base:?} (labels are <build>-r<round>)"
            )));
        }
        Ok(BuildComparison {
            base: base.to_owned(),
            points,
        })
    }

    /// The table: a block per point, a line per build.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for ((workload, clients), builds) in &self.points {
            let _ = writeln!(out, "{} x {clients} clients", workload.name());
            let base = builds.get(&self.base);
            // The base first, then the others by name.
            let others = builds.iter().filter(|(b, _)| **b != self.base);
            for (build, rounds) in base.map(|r| (&self.base, r)).into_iter().chain(others) {
                let _ = write!(out, "  {build:<10} {}", medians(rounds));
                if let Some(base) = base.filter(|_| build != &self.base) {
                    let _ = write!(out, " | vs {}: {}", self.base, ratios(rounds, base));
                }
                out.push('\n');
            }
        }
        out
    }
}

/// `<build>-r<round>` split, or why the label is not one.
fn build_and_round(label: Option<&str>) -> Result<(&str, u32), BenchError> {
    let bad = || {
        BenchError::Argument(format!(
            "results label {label:?} is not <build>-r<round> (scripts/bench/builds.sh sets it)"
        ))
    };
    let (build, round) = label.and_then(|l| l.rsplit_once("-r")).ok_or_else(bad)?;
    let round = round.parse().map_err(|_| bad())?;
    if build.is_empty() {
        return Err(bad());
    }
    Ok((build, round))
}

/// The build's medians over its rounds.
fn medians(rounds: &BTreeMap<u32, Figures>) -> String {
    let of = |f: fn(&Figures) -> f64| median(rounds.values().map(f).collect());
    format!(
        "{} rounds: {:.0}/s, {:.1} µs and {:.2} switches per op (nodes), p50 {:.2} ms, p99 {:.2} ms",
        rounds.len(),
        of(|f| f.throughput),
        of(|f| f.cpu_us_per_op),
        of(|f| f.switches_per_op),
        of(|f| f.p50_ms),
        of(|f| f.p99_ms),
    )
}

/// Per figure, the median of `rounds / base` over the rounds both ran, and the range.
fn ratios(rounds: &BTreeMap<u32, Figures>, base: &BTreeMap<u32, Figures>) -> String {
    let mut per_figure: Vec<(&str, Vec<f64>)> = Vec::new();
    for (round, figures) in rounds {
        let Some(base) = base.get(round) else {
            continue;
        };
        for (i, ((name, v), (_, b))) in figures
            .compared()
            .into_iter()
            .zip(base.compared())
            .enumerate()
        {
            if per_figure.len() == i {
                per_figure.push((name, Vec::new()));
            }
            if b > 0.0 && v.is_finite() {
                per_figure[i].1.push(v / b);
            }
        }
    }
    per_figure
        .into_iter()
        .filter(|(_, per_round)| !per_round.is_empty())
        .map(|(name, per_round)| {
            let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{name} {:.2}x [{lo:.2}-{hi:.2}]", median(per_round))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_a_build_and_a_round() {
        assert_eq!(build_and_round(Some("arc-r3")).unwrap(), ("arc", 3));
        assert_eq!(
            build_and_round(Some("my-build-r12")).unwrap(),
            ("my-build", 12)
        );
        for bad in [None, Some("arc"), Some("arc-rx"), Some("-r1")] {
            assert!(build_and_round(bad).is_err(), "{bad:?}");
        }
    }

    fn figures(throughput: f64, cpu: f64) -> Figures {
        Figures {
            throughput,
            cpu_us_per_op: cpu,
            switches_per_op: 1.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
        }
    }

    #[test]
    fn ratios_are_taken_round_by_round() {
        // The machine was twice as fast in round 2: per-round ratios see 1.5x both times,
        // a ratio of medians would not.
        let base = BTreeMap::from([(1, figures(100.0, 400.0)), (2, figures(200.0, 200.0))]);
        let new = BTreeMap::from([(1, figures(150.0, 300.0)), (2, figures(300.0, 150.0))]);
        let line = ratios(&new, &base);
        assert!(
            line.starts_with("throughput 1.50x [1.50-1.50], cpu/op 0.75x [0.75-0.75]"),
            "{line}"
        );
    }

    #[test]
    fn a_round_the_base_did_not_run_is_left_out() {
        let base = BTreeMap::from([(1, figures(100.0, 400.0))]);
        let new = BTreeMap::from([(1, figures(110.0, 400.0)), (2, figures(999.0, 1.0))]);
        assert!(ratios(&new, &base).starts_with("throughput 1.10x [1.10-1.10]"));
    }
}
