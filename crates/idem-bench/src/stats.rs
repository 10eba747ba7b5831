//! Latency histograms and outcome counts of one measured run.
//!
//! Latencies go into HDR histograms (microsecond resolution, 3 significant digits, up to a
//! minute) rather than averages or samples: tail percentiles are what the targets are about,
//! and HDR histograms keep them exact to 0.1 % at any count with fixed memory.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::backend::ClaimResult;

/// Longest latency a histogram holds (longer ones are clamped), in microseconds.
const MAX_US: u64 = 60_000_000;

/// What a latency sample measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// A whole workload operation (for open-loop runs: from its intended start).
    Op,
    /// A claim of a new key.
    Claim,
    /// The complete after an acquired claim.
    Complete,
    /// A claim of a completed key (a replayed retry).
    Replay,
    /// A claim of a contended hot key (any outcome).
    Contended,
}

/// The histograms and counters of one run.
#[derive(Debug, Clone)]
pub struct Recorder {
    op: Histogram<u64>,
    claim: Histogram<u64>,
    complete: Histogram<u64>,
    replay: Histogram<u64>,
    contended: Histogram<u64>,
    counts: Counts,
    first_error: Option<String>,
}

/// Outcome counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Claims that acquired a record.
    pub acquired: u64,
    /// Claims answered with a replayed result.
    pub replayed: u64,
    /// Claims answered "someone else holds it".
    pub in_progress: u64,
    /// Claims with any other answer (mismatch, failed record): should stay 0.
    pub other: u64,
    /// Calls that failed (after the SDK's own retries).
    pub errors: u64,
}

/// Percentiles of one histogram, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("static histogram bounds are valid")
}

fn summarize(h: &Histogram<u64>) -> Latency {
    let ms = |us: u64| us as f64 / 1000.0;
    Latency {
        count: h.len(),
        mean_ms: h.mean() / 1000.0,
        p50_ms: ms(h.value_at_quantile(0.50)),
        p90_ms: ms(h.value_at_quantile(0.90)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        p999_ms: ms(h.value_at_quantile(0.999)),
        max_ms: ms(h.max()),
    }
}

/// Percentiles of a series of samples (the probes' measurements).
pub fn latency_of(samples: impl IntoIterator<Item = Duration>) -> Latency {
    let mut h = histogram();
    for sample in samples {
        h.saturating_record((sample.as_micros() as u64).clamp(1, MAX_US));
    }
    summarize(&h)
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            op: histogram(),
            claim: histogram(),
            complete: histogram(),
            replay: histogram(),
            contended: histogram(),
            counts: Counts::default(),
            first_error: None,
        }
    }
}

impl Recorder {
    /// Adds one latency sample.
    pub fn record(&mut self, sample: Sample, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, MAX_US);
        let h = match sample {
            Sample::Op => &mut self.op,
            Sample::Claim => &mut self.claim,
            Sample::Complete => &mut self.complete,
            Sample::Replay => &mut self.replay,
            Sample::Contended => &mut self.contended,
        };
        h.saturating_record(us);
    }

    /// Counts a claim's answer.
    pub fn count(&mut self, result: ClaimResult) {
        let c = &mut self.counts;
        match result {
            ClaimResult::Acquired(_) => c.acquired += 1,
            ClaimResult::Replayed => c.replayed += 1,
            ClaimResult::InProgress => c.in_progress += 1,
            ClaimResult::Other => c.other += 1,
        }
    }

    /// Counts a failed call, keeping the first message for the report.
    pub fn error(&mut self, message: &str) {
        self.counts.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(message.to_owned());
        }
    }

    /// Completed operations.
    pub fn ops(&self) -> u64 {
        self.op.len()
    }

    /// The counters.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The first error seen, if any.
    pub fn first_error(&self) -> Option<&str> {
        self.first_error.as_deref()
    }

    /// Percentiles per sample kind, named as in the JSON (`op`, `claim`, ...); kinds without
    /// samples are left out.
    pub fn latencies(&self) -> Vec<(String, Latency)> {
        [
            ("op", &self.op),
            ("claim", &self.claim),
            ("complete", &self.complete),
            ("replay", &self.replay),
            ("contended", &self.contended),
        ]
        .into_iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(name, h)| (name.to_owned(), summarize(h)))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_in_milliseconds() {
        let mut r = Recorder::default();
        for ms in 1..=100u64 {
            r.record(Sample::Claim, Duration::from_millis(ms));
            r.record(Sample::Op, Duration::from_millis(ms));
        }
        r.count(ClaimResult::Acquired(1));
        r.error("boom");
        r.error("second");
        let lat = r.latencies();
        assert_eq!(lat.len(), 2);
        let claim = &lat.iter().find(|(n, _)| n == "claim").unwrap().1;
        assert_eq!(claim.count, 100);
        assert!((claim.p50_ms - 50.0).abs() < 0.1, "{claim:?}");
        assert!((claim.p99_ms - 99.0).abs() < 0.1, "{claim:?}");
        assert_eq!(r.ops(), 100);
        assert_eq!(r.counts().acquired, 1);
        assert_eq!(r.counts().errors, 2);
        assert_eq!(r.first_error(), Some("boom"));
    }
}
