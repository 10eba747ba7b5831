//! The workloads: which key each operation claims, and what it does with the answer.
//!
//! Each models a traffic pattern an idempotency store sees in production:
//!
//! - `claim`: every request is new (claim a fresh key, then complete it): the write path.
//! - `retry`: a share (`--dup-share`) of requests are retries of already completed requests
//!   (claim a key of a pool completed before the measurement: the answer is a replay); the
//!   rest are new. Retries storms after an outage look like this.
//! - `contention`: every client races for a few hot keys (`--hot-keys`); one claim per key
//!   generation wins and completes, the others see "in progress" or the replay, and the key
//!   moves to its next generation. Double-clicks and concurrent redeliveries look like this.
//! - `mixed`: 50 % new, 40 % retries, 10 % contended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, ClaimResult};
use crate::stats::{Recorder, Sample};
use idem_testkit::Rng;

/// A traffic pattern.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Claim + complete of new keys.
    Claim,
    /// A share of claims are retries of completed keys (`--dup-share`).
    Retry,
    /// Many clients on few keys (`--hot-keys`).
    Contention,
    /// 50 % new, 40 % retries, 10 % contended.
    Mixed,
}

/// The knobs shared by the workloads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// Share of retries of completed keys (retry: as given; mixed: 0.4).
    pub dup_share: f64,
    /// Number of hot keys of contended claims.
    pub hot_keys: usize,
    /// Number of completed keys retries pick from.
    pub pool: usize,
}

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Claim a new key and complete it.
    New,
    /// Claim a completed key of the pool.
    Duplicate,
    /// Claim a hot key; complete it if the claim won.
    Contend,
}

impl Workload {
    /// The name used in results and file names.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Claim => "claim",
            Workload::Retry => "retry",
            Workload::Contention => "contention",
            Workload::Mixed => "mixed",
        }
    }

    /// Whether the run needs a pool of completed keys before it starts.
    pub fn needs_pool(self, shape: &Shape) -> bool {
        match self {
            Workload::Retry => shape.dup_share > 0.0,
            Workload::Mixed => true,
            Workload::Claim | Workload::Contention => false,
        }
    }

    /// The next operation.
    pub fn pick(self, shape: &Shape, rng: &mut Rng) -> Step {
        match self {
            Workload::Claim => Step::New,
            Workload::Contention => Step::Contend,
            Workload::Retry if rng.chance(shape.dup_share) => Step::Duplicate,
            Workload::Retry => Step::New,
            Workload::Mixed => match rng.below(10) {
                0..=4 => Step::New,
                5..=8 => Step::Duplicate,
                _ => Step::Contend,
            },
        }
    }
}

/// The keys of one run: fresh keys, the pool of completed keys, the hot keys' generations.
#[derive(Debug)]
pub struct KeySpace {
    prefix: String,
    next: AtomicU64,
    pool: Vec<String>,
    hot: Vec<AtomicU64>,
}

impl KeySpace {
    /// Keys named `<prefix>-...`; `prefix` must be unique per run (keys are never reused).
    pub fn new(prefix: String, pool: Vec<String>, hot_keys: usize) -> KeySpace {
        KeySpace {
            prefix,
            next: AtomicU64::new(0),
            pool,
            hot: (0..hot_keys.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The name of pool key `i` of runs with `prefix` (used to fill the pool).
    pub fn pool_key(prefix: &str, i: u64) -> String {
        format!("{prefix}-p{i}")
    }

    fn fresh(&self) -> String {
        format!(
            "{}-n{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn completed(&self, rng: &mut Rng) -> Option<&str> {
        (!self.pool.is_empty())
            .then(|| self.pool[rng.below(self.pool.len() as u64) as usize].as_str())
    }

    fn hot(&self, rng: &mut Rng) -> (usize, u64, String) {
        let slot = rng.below(self.hot.len() as u64) as usize;
        let generation = self.hot[slot].load(Ordering::Acquire);
        (
            slot,
            generation,
            format!("{}-h{slot}-g{generation}", self.prefix),
        )
    }

    /// Moves a hot key to its next generation, once per generation.
    fn advance(&self, slot: usize, generation: u64) {
        let _ = self.hot[slot].compare_exchange(
            generation,
            generation + 1,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// Runs one operation; with `record`, adds its latencies to the recorder, the whole
/// operation's measured from `started` (its intended start in an open-loop run).
pub async fn execute<B: Backend>(
    backend: &B,
    keys: &KeySpace,
    step: Step,
    rng: &mut Rng,
    started: Instant,
    record: Option<&std::sync::Mutex<Recorder>>,
) {
    let mut samples: Vec<(Sample, Duration)> = Vec::with_capacity(2);
    let mut results = Vec::with_capacity(1);
    let mut error = None;
    match step {
        Step::New => {
            let key = keys.fresh();
            let t = Instant::now();
            match backend.claim(&key).await {
                Ok(ClaimResult::Acquired(token)) => {
                    samples.push((Sample::Claim, t.elapsed()));
                    results.push(ClaimResult::Acquired(token));
                    let t = Instant::now();
                    match backend.complete(&key, token).await {
                        Ok(()) => samples.push((Sample::Complete, t.elapsed())),
                        Err(e) => error = Some(e.to_string()),
                    }
                }
                Ok(other) => {
                    samples.push((Sample::Claim, t.elapsed()));
                    results.push(other);
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
        Step::Duplicate => {
            // Without a pool (a retry share of 0), a duplicate degrades to a new claim.
            let key = keys
                .completed(rng)
                .map(str::to_owned)
                .unwrap_or_else(|| keys.fresh());
            let t = Instant::now();
            match backend.claim(&key).await {
                Ok(result) => {
                    samples.push((Sample::Replay, t.elapsed()));
                    results.push(result);
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
        Step::Contend => {
            let (slot, generation, key) = keys.hot(rng);
            let t = Instant::now();
            match backend.claim(&key).await {
                Ok(ClaimResult::Acquired(token)) => {
                    samples.push((Sample::Contended, t.elapsed()));
                    results.push(ClaimResult::Acquired(token));
                    let t = Instant::now();
                    match backend.complete(&key, token).await {
                        Ok(()) => samples.push((Sample::Complete, t.elapsed())),
                        Err(e) => error = Some(e.to_string()),
                    }
                    keys.advance(slot, generation);
                }
                Ok(result) => {
                    samples.push((Sample::Contended, t.elapsed()));
                    results.push(result);
                    if result == ClaimResult::Replayed {
                        keys.advance(slot, generation);
                    }
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
    }
    let end = Instant::now();
    if let Some(recorder) = record {
        let mut r = recorder.lock().unwrap_or_else(|p| p.into_inner());
        if error.is_none() {
            r.record(Sample::Op, end - started);
        }
        for (sample, latency) in samples {
            r.record(sample, latency);
        }
        for result in results {
            r.count(result);
        }
        if let Some(e) = error {
            r.error(&e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_and_retry_pick_their_shares() {
        let shape = Shape {
            dup_share: 0.9,
            hot_keys: 4,
            pool: 10,
        };
        let mut rng = Rng::new(7);
        let n = 10_000;
        let dups = (0..n)
            .filter(|_| Workload::Retry.pick(&shape, &mut rng) == Step::Duplicate)
            .count();
        assert!((8_800..9_200).contains(&dups), "{dups}");
        let contended = (0..n)
            .filter(|_| Workload::Mixed.pick(&shape, &mut rng) == Step::Contend)
            .count();
        assert!((800..1_200).contains(&contended), "{contended}");
        assert_eq!(Workload::Claim.pick(&shape, &mut rng), Step::New);
    }

    #[test]
    fn hot_keys_advance_once_per_generation() {
        let keys = KeySpace::new("r".into(), Vec::new(), 1);
        let mut rng = Rng::new(1);
        let (slot, generation, key) = keys.hot(&mut rng);
        assert_eq!(key, "r-h0-g0");
        keys.advance(slot, generation);
        keys.advance(slot, generation);
        assert_eq!(keys.hot(&mut rng).2, "r-h0-g1");
        assert_eq!(keys.fresh(), "r-n0");
        assert_eq!(keys.fresh(), "r-n1");
    }
}
