//! PNG plots of a history: `latency.png` and `rate.png`, with fault windows shaded.
//!
//! Verdicts say whether something went wrong; the plots show how the system behaved under each
//! fault (latency spikes, unavailability windows, timeouts), which is what an operator or a
//! reviewer of a Jepsen run looks at first. Drawn with plotters' bitmap backend; text needs a
//! font ([`text_available`], loaded by idem-testkit's [`font`](idem_testkit::font) module), and
//! without one the plots are drawn without text rather than not at all.

mod latency;
mod rate;
mod style;

use std::path::{Path, PathBuf};

use crate::history::History;

/// Environment variable naming a TrueType font file to use instead of the default.
pub const FONT_ENV: &str = "IDEM_JEPSEN_FONT";

/// True when a font is registered and plots can carry text (loads it on first call, from
/// `$IDEM_JEPSEN_FONT` or the default locations).
pub fn text_available() -> bool {
    idem_testkit::font::text_available_from(FONT_ENV)
}

/// Width of the plots in pixels.
pub const WIDTH: u32 = 1200;
/// Height of the plots in pixels.
pub const HEIGHT: u32 = 600;

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// plotters reported an error (drawing or encoding the PNG).
    #[error("plot failed: {0}")]
    Draw(String),
}

impl PlotError {
    fn draw(e: impl std::fmt::Display) -> PlotError {
        PlotError::Draw(e.to_string())
    }
}

/// Draws `latency.png` (latency of every operation over time).
pub fn latency(history: &History, path: &Path) -> Result<(), PlotError> {
    latency::draw(history, path, text_available())
}

/// Draws `rate.png` (completions per second per `:f`).
pub fn rate(history: &History, path: &Path) -> Result<(), PlotError> {
    rate::draw(history, path, text_available())
}

/// Draws both plots into `dir`; returns the files written.
pub fn write_plots(history: &History, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let latency_png = dir.join("latency.png");
    let rate_png = dir.join("rate.png");
    latency(history, &latency_png)?;
    rate(history, &rate_png)?;
    Ok(vec![latency_png, rate_png])
}

/// The last `:time` of the history (ns), at least 0.
fn end_time(history: &History) -> i64 {
    history
        .ops()
        .iter()
        .map(|op| op.time)
        .max()
        .unwrap_or(0)
        .max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> History {
        History::parse(include_str!("../../testdata/good/history.edn")).unwrap()
    }

    fn assert_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{}", path.display());
    }

    #[test]
    fn draws_both_plots() {
        let dir = tempfile::tempdir().unwrap();
        for path in write_plots(&sample(), dir.path()).unwrap() {
            assert_png(&path);
        }
    }

    #[test]
    fn draws_without_text_when_no_font_is_available() {
        let dir = tempfile::tempdir().unwrap();
        let (l, r) = (dir.path().join("l.png"), dir.path().join("r.png"));
        latency::draw(&sample(), &l, false).unwrap();
        rate::draw(&sample(), &r, false).unwrap();
        assert_png(&l);
        assert_png(&r);
    }

    #[test]
    fn draws_an_empty_history() {
        let dir = tempfile::tempdir().unwrap();
        write_plots(&History::new(), dir.path()).unwrap();
    }
}
