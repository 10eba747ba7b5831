//! Latency samples summarised as the figures the report shows.
//!
//! Medians compare the paths (one round trip more or less is a shift of the whole
//! distribution); p90 and p99 show whether a path has a tail (an election, a slow fsync).
//! Percentiles are nearest-rank, so every figure is a latency that was actually measured.

use std::time::Duration;

use serde::Serialize;

/// Order statistics of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: usize,
    /// Smallest.
    pub min_ms: f64,
    /// Median (nearest rank).
    pub median_ms: f64,
    /// 90th percentile (nearest rank).
    pub p90_ms: f64,
    /// 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Summary {
    /// The summary of `samples` (all zero when there are none).
    pub fn of(samples: &[Duration]) -> Summary {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let Some((&min, &max)) = ms.first().zip(ms.last()) else {
            return Summary::default();
        };
        let rank = |p: f64| {
            let r = (p / 100.0 * ms.len() as f64).ceil() as usize;
            round(ms[r.clamp(1, ms.len()) - 1])
        };
        Summary {
            samples: ms.len(),
            min_ms: round(min),
            median_ms: rank(50.0),
            p90_ms: rank(90.0),
            p99_ms: rank(99.0),
            max_ms: round(max),
        }
    }

    /// `other` minus `self` at each percentile: what a faster `self` saves against `other`.
    pub fn saving_against(&self, other: &Summary) -> Saving {
        Saving {
            median_ms: round(other.median_ms - self.median_ms),
            p90_ms: round(other.p90_ms - self.p90_ms),
            p99_ms: round(other.p99_ms - self.p99_ms),
            median_ratio: if self.median_ms > 0.0 {
                round(other.median_ms / self.median_ms)
            } else {
                0.0
            },
        }
    }
}

/// How much faster one path is than another, per percentile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Saving {
    /// Difference of the medians, in ms.
    pub median_ms: f64,
    /// Difference of the 90th percentiles, in ms.
    pub p90_ms: f64,
    /// Difference of the 99th percentiles, in ms.
    pub p99_ms: f64,
    /// The slower median divided by the faster one.
    pub median_ratio: f64,
}

/// `ms` to a hundredth of a millisecond (10 µs), which is finer than anything measured here.
pub fn round(ms: f64) -> f64 {
    (ms * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = Summary::of(&ms(&(1..=100).rev().collect::<Vec<_>>()));
        assert_eq!(s.samples, 100);
        assert_eq!((s.min_ms, s.median_ms, s.p90_ms), (1.0, 50.0, 90.0));
        assert_eq!((s.p99_ms, s.max_ms), (99.0, 100.0));
        let one = Summary::of(&ms(&[7]));
        assert_eq!((one.median_ms, one.p99_ms), (7.0, 7.0));
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn savings_compare_percentiles() {
        let fast = Summary::of(&ms(&[20, 21, 22]));
        let slow = Summary::of(&ms(&[60, 61, 70]));
        let saving = fast.saving_against(&slow);
        assert_eq!(saving.median_ms, 40.0);
        assert_eq!(saving.p99_ms, 48.0);
        assert_eq!(saving.median_ratio, 2.9);
    }
}
