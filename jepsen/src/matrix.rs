//! The summary of a test matrix (`make jepsen-matrix`, `jepsen/matrix.sh`).
//!
//! The script runs `idem-jepsen test` once per cell — nemesis combination × workload × node
//! count × seed — into `<dir>/runs/`, and appends one tab-separated line per run to
//! `<dir>/runs.tsv`: nemesis, workload, nodes, seed, exit status, seconds, run directory
//! (relative to `<dir>/runs`). [`Matrix::read`] joins those lines with each run's
//! `results.json`; [`Matrix::write`] writes `summary.json`, `summary.md` (the table
//! jepsen/README.md quotes) and `matrix.png` (one cell per run: green valid, red invalid,
//! grey could not run). Every run directory keeps its own history, plots and node logs, and
//! a failing cell reruns with the `idem-jepsen test` command in its row.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use plotters::prelude::*;
use serde::Serialize;

/// One run of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// The nemesis combination (`partition,kill`).
    pub nemesis: String,
    /// The workload.
    pub workload: String,
    /// Number of nodes.
    pub nodes: u64,
    /// The seed.
    pub seed: u64,
    /// `idem-jepsen test`'s exit status (0 valid, 1 invalid, 2 could not run, 124 timed out).
    pub status: i64,
    /// Wall time of the run, in seconds.
    pub seconds: u64,
    /// The run directory, relative to `<dir>/runs`.
    pub run: String,
    /// Client operations in the history (from `results.json`, when written).
    pub operations: Option<u64>,
    /// Operations with unknown outcome.
    pub unknown: Option<u64>,
    /// Faults injected.
    pub faults: Option<u64>,
    /// The checkers that found anomalies.
    pub failed_checkers: Vec<String>,
}

impl Cell {
    /// `valid`, `INVALID`, or what kept the run from a verdict.
    pub fn verdict(&self) -> &'static str {
        match self.status {
            0 => "valid",
            1 => "INVALID",
            124 => "timed out",
            130 => "interrupted",
            _ => "could not run",
        }
    }

    /// The command that reruns this cell.
    pub fn rerun(&self) -> String {
        format!(
            "sudo idem-jepsen test --nodes {} --nemesis {} --workload {} --seed {}",
            self.nodes, self.nemesis, self.workload, self.seed
        )
    }

    fn parse(line: &str) -> anyhow::Result<Cell> {
        let fields: Vec<&str> = line.split('\t').collect();
        let [nemesis, workload, nodes, seed, status, seconds, run] = fields[..] else {
            anyhow::bail!("expected 7 tab-separated fields, got {}", fields.len());
        };
        Ok(Cell {
            nemesis: nemesis.into(),
            workload: workload.into(),
            nodes: nodes.parse().context("nodes")?,
            seed: seed.parse().context("seed")?,
            status: status.parse().context("status")?,
            seconds: seconds.parse().context("seconds")?,
            run: run.into(),
            operations: None,
            unknown: None,
            faults: None,
            failed_checkers: Vec::new(),
        })
    }

    /// Fills the counts and failing checkers from a run's `results.json`.
    fn add_results(&mut self, results: &serde_json::Value) {
        let count = |name: &str| results["counts"][name].as_u64();
        self.operations = count("operations");
        self.unknown = count("unknown-outcomes");
        self.faults = count("faults");
        if let Some(checkers) = results["checkers"].as_object() {
            self.failed_checkers = checkers
                .iter()
                .filter(|(_, r)| r["valid"] == serde_json::Value::Bool(false))
                .map(|(name, _)| name.clone())
                .collect();
        }
    }
}

/// Every run of one matrix.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Matrix {
    /// The runs, in the order they ran.
    pub cells: Vec<Cell>,
}

impl Matrix {
    /// Reads `<dir>/runs.tsv` and each run's `results.json`.
    pub fn read(dir: &Path) -> anyhow::Result<Matrix> {
        let index = dir.join("runs.tsv");
        let text = std::fs::read_to_string(&index)
            .with_context(|| format!("reading {}", index.display()))?;
        let mut cells = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let mut cell =
                Cell::parse(line).with_context(|| format!("{} line {}", index.display(), n + 1))?;
            let results = dir.join("runs").join(&cell.run).join("results.json");
            if let Ok(text) = std::fs::read_to_string(&results) {
                if let Ok(json) = serde_json::from_str(&text) {
                    cell.add_results(&json);
                }
            }
            cells.push(cell);
        }
        Ok(Matrix { cells })
    }

    /// Runs ending valid, invalid, and without a verdict.
    pub fn tally(&self) -> (usize, usize, usize) {
        let valid = self.cells.iter().filter(|c| c.status == 0).count();
        let invalid = self.cells.iter().filter(|c| c.status == 1).count();
        (valid, invalid, self.cells.len() - valid - invalid)
    }

    /// The markdown table: one row per run.
    pub fn markdown(&self) -> String {
        let (valid, invalid, other) = self.tally();
        let mut out = format!(
            "{} runs: {valid} valid, {invalid} invalid, {other} without a verdict\n\n",
            self.cells.len()
        );
        out.push_str(
            "| nemesis | workload | nodes | seed | verdict | operations | unknown | faults | s | failing checkers |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
        let opt = |v: Option<u64>| v.map_or("–".to_string(), |v| v.to_string());
        for c in &self.cells {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.nemesis,
                c.workload,
                c.nodes,
                c.seed,
                c.verdict(),
                opt(c.operations),
                opt(c.unknown),
                opt(c.faults),
                c.seconds,
                c.failed_checkers.join(", ")
            );
        }
        let failing: Vec<&Cell> = self.cells.iter().filter(|c| c.status != 0).collect();
        if !failing.is_empty() {
            out.push_str("\nRerun a failing cell:\n\n");
            for c in failing {
                let _ = writeln!(out, "- `{}` (runs/{})", c.rerun(), c.run);
            }
        }
        out
    }

    /// Writes `summary.json`, `summary.md` and `matrix.png` into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let json = dir.join("summary.json");
        std::fs::write(&json, serde_json::to_string_pretty(self)?)?;
        let md = dir.join("summary.md");
        std::fs::write(&md, self.markdown())?;
        let png = dir.join("matrix.png");
        self.plot(&png)?;
        Ok(vec![json, md, png])
    }

    /// A grid: a row per nemesis, a column per workload × nodes, one square per seed.
    fn plot(&self, path: &Path) -> anyhow::Result<()> {
        let rows = distinct(self.cells.iter().map(|c| c.nemesis.clone()));
        let cols = distinct(
            self.cells
                .iter()
                .map(|c| format!("{} ×{}", c.workload, c.nodes)),
        );
        let seeds = distinct(self.cells.iter().map(|c| c.seed));
        let (cell_w, cell_h, left, top) = (150i32, 28i32, 440i32, 40i32);
        let width = (left + cell_w * cols.len().max(1) as i32 + 20) as u32;
        let height = (top + cell_h * rows.len().max(1) as i32 + 20) as u32;
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let text = crate::plot::text_available();
        let font = ("sans-serif", 14).into_font();
        for (j, col) in cols.iter().enumerate() {
            if text {
                root.draw_text(col, &font.color(&BLACK), (left + j as i32 * cell_w + 4, 12))?;
            }
        }
        let square = (cell_w - 8) / seeds.len().max(1) as i32;
        for (i, row) in rows.iter().enumerate() {
            let y = top + i as i32 * cell_h;
            if text {
                root.draw_text(row, &font.color(&BLACK), (4, y + 6))?;
            }
            for c in self.cells.iter().filter(|c| &c.nemesis == row) {
                let col = format!("{} ×{}", c.workload, c.nodes);
                let j = cols.iter().position(|x| *x == col).unwrap_or(0) as i32;
                let k = seeds.iter().position(|s| *s == c.seed).unwrap_or(0) as i32;
                let x = left + j * cell_w + 4 + k * square;
                let colour = match c.status {
                    0 => RGBColor(0x4D, 0xAF, 0x4A),
                    1 => RGBColor(0xE4, 0x1A, 0x1C),
                    _ => RGBColor(0x99, 0x99, 0x99),
                };
                root.draw(&Rectangle::new(
                    [(x, y + 2), (x + square - 2, y + cell_h - 2)],
                    colour.filled(),
                ))?;
            }
        }
        root.present()?;
        Ok(())
    }
}

/// The distinct values of `items`, in first-seen order.
fn distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_the_index_with_each_runs_results() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        std::fs::create_dir_all(runs.join("a")).unwrap();
        std::fs::write(
            runs.join("a/results.json"),
            r#"{"valid": false, "counts": {"operations": 120, "unknown-outcomes": 3, "faults": 4},
                "checkers": {"linearizable": {"valid": false}, "fencing": {"valid": true}}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("runs.tsv"),
            "bitflip\thigh-risk\t3\t7\t1\t41\ta\npartition,kill\tregister\t5\t1\t2\t9\tmissing\n",
        )
        .unwrap();
        let matrix = Matrix::read(dir.path()).unwrap();
        assert_eq!(matrix.tally(), (0, 1, 1));
        let first = &matrix.cells[0];
        assert_eq!(first.operations, Some(120));
        assert_eq!(first.failed_checkers, ["linearizable"]);
        assert_eq!(first.verdict(), "INVALID");
        assert_eq!(
            first.rerun(),
            "sudo idem-jepsen test --nodes 3 --nemesis bitflip --workload high-risk --seed 7"
        );
        assert_eq!(matrix.cells[1].operations, None);
        let md = matrix.markdown();
        assert!(
            md.starts_with("2 runs: 0 valid, 1 invalid, 1 without a verdict"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `bitflip` | high-risk | 3 | 7 | INVALID | 120 | 3 | 4 | 41 | linearizable |"
            ),
            "{md}"
        );
        assert!(md.contains("| could not run | – |"), "{md}");
        let written = matrix.write(dir.path()).unwrap();
        assert!(written.iter().all(|p| p.is_file()));
    }

    #[test]
    fn refuses_a_malformed_index() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("runs.tsv"), "kill\tregister\n").unwrap();
        assert!(Matrix::read(dir.path()).is_err());
        assert!(Matrix::read(&dir.path().join("absent")).is_err());
    }
}
