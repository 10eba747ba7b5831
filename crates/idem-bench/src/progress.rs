//! The one-line progress display on stderr.
//!
//! A sweep runs for minutes; a line that says which run is going, how far it is and the rate
//! so far tells whether to wait or to stop it. indicatif hides itself when stderr is not a
//! terminal, so scripts and CI logs stay clean.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Runs shorter than this get no progress line.
const MIN_SHOWN: Duration = Duration::from_secs(3);

/// A progress line, cleared when dropped.
pub struct Progress {
    bar: ProgressBar,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// A line for a run of `total` time, showing the operations counted in `ops`.
    pub fn timed(label: String, total: Duration, ops: Arc<AtomicU64>) -> Progress {
        if total < MIN_SHOWN {
            return Progress::hidden();
        }
        let bar = ProgressBar::new(total.as_millis() as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {elapsed}/{duration} {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label);
        let line = bar.clone();
        let ticker = tokio::spawn(async move {
            let start = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let elapsed = start.elapsed();
                let done = ops.load(Ordering::Relaxed);
                line.set_position(elapsed.as_millis() as u64);
                line.set_message(format!(
                    "{done} ops, {:.0} ops/s",
                    done as f64 / elapsed.as_secs_f64()
                ));
            }
        });
        Progress {
            bar,
            ticker: Some(ticker),
        }
    }

    /// A line for `total` items, advanced with [`Progress::inc`].
    pub fn counted(label: String, total: u64) -> Progress {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        bar.set_prefix(label);
        Progress { bar, ticker: None }
    }

    fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
            ticker: None,
        }
    }

    /// Advances a counted line by `n`.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        self.bar.finish_and_clear();
    }
}
