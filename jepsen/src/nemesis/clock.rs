//! Clock faults: some nodes' realtime clocks moved ahead or behind.
//!
//! Three shapes, after Jepsen's clock nemesis: a **skew** gives a random subset of nodes
//! fixed offsets of up to the maximum skew; a **bump** makes one node's clock jump by one to
//! six times that (past every lease); a **strobe** flips a subset's clocks between ahead and
//! behind every second ([`Strobe`]), so stamps run backwards over and over. libfaketime
//! re-reads each node's offset file at most once a second, which sets the strobe's pace.
//!
//! Lease expiry is decided on the leader's stamps (`max(stamp, last stamp)` in apply), so a
//! leader whose clock runs ahead expires leases early and lets a second worker take over
//! while the first is still working: fences must then stop the first worker's writes. A
//! leader whose clock runs behind stalls replicated time (leases last longer), which must not
//! break anything either. Nodes must have been started under libfaketime
//! ([`crate::cluster::clock`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;

use crate::cluster::Cluster;
use idem_testkit::Rng;

/// How often a strobe flips (libfaketime's cache re-reads the offset once a second).
pub const STROBE_PERIOD: Duration = Duration::from_secs(1);

/// Draws offsets for a random non-empty subset of `nodes`, each within ±`max_ms`.
pub fn draw_skews(rng: &mut Rng, nodes: &[usize], max_ms: u64) -> Vec<(usize, i64)> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let count = rng.between(1, nodes.len() as u64) as usize;
    let mut chosen = rng.shuffled(nodes)[..count].to_vec();
    chosen.sort();
    chosen
        .into_iter()
        .map(|n| {
            let magnitude = rng.between(max_ms / 4, max_ms) as i64;
            let sign = if rng.chance(0.5) { 1 } else { -1 };
            (n, sign * magnitude)
        })
        .collect()
}

/// A bump: one node of `nodes` and a jump of one to six times `max_ms`, ahead or behind.
pub fn draw_bump(rng: &mut Rng, nodes: &[usize], max_ms: u64) -> Vec<(usize, i64)> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let node = nodes[rng.index(nodes.len())];
    let magnitude = rng.between(max_ms, max_ms.saturating_mul(6)) as i64;
    let sign = if rng.chance(0.5) { 1 } else { -1 };
    vec![(node, sign * magnitude)]
}

/// Applies `skews` (node, offset in ms).
pub fn skew(cluster: &Cluster, skews: &[(usize, i64)]) -> anyhow::Result<()> {
    for &(id, ms) in skews {
        let node = cluster.node(id);
        let clock = node
            .clock()
            .context("clock nemesis: node was not started under libfaketime")?;
        clock.set_offset_ms(ms)?;
    }
    Ok(())
}

/// Puts the clocks of `nodes` back to the true time.
pub fn reset(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<()> {
    for &id in nodes {
        if let Some(clock) = cluster.node(id).clock() {
            clock.set_offset_ms(0)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skews_are_bounded_and_deterministic() {
        let a = draw_skews(&mut Rng::new(5), &[1, 2, 3], 8000);
        let b = draw_skews(&mut Rng::new(5), &[1, 2, 3], 8000);
        assert_eq!(a, b);
        assert!(!a.is_empty());
        for (n, ms) in a {
            assert!((1..=3).contains(&n));
            assert!((2000..=8000).contains(&ms.abs()));
        }
        assert!(draw_skews(&mut Rng::new(1), &[], 10).is_empty());
    }

    #[test]
    fn a_bump_moves_one_clock_past_the_maximum_skew() {
        for seed in 0..50 {
            let bump = draw_bump(&mut Rng::new(seed), &[1, 2, 3], 10_000);
            assert_eq!(bump.len(), 1);
            let (node, ms) = bump[0];
            assert!((1..=3).contains(&node));
            assert!((10_000..=60_000).contains(&ms.abs()), "{ms}");
        }
        assert!(draw_bump(&mut Rng::new(1), &[], 10).is_empty());
    }
}

/// A running strobe: a thread flipping the clocks of some nodes between `+offset` and
/// `-offset` every [`STROBE_PERIOD`] until stopped. Cloning shares the same thread.
#[derive(Debug, Clone)]
pub struct Strobe {
    /// The strobed nodes and their offsets.
    pub skews: Vec<(usize, i64)>,
    stop: Arc<AtomicBool>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Strobe {
    /// Starts strobing `skews` (node, offset in ms) on `cluster`.
    pub fn start(cluster: Arc<Cluster>, skews: Vec<(usize, i64)>) -> anyhow::Result<Strobe> {
        skew(&cluster, &skews)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, skews) = (Arc::clone(&stop), skews.clone());
            std::thread::Builder::new()
                .name("clock-strobe".into())
                .spawn(move || strobe_loop(&cluster, &skews, &stop))?
        };
        Ok(Strobe {
            skews,
            stop,
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// The strobed nodes.
    pub fn nodes(&self) -> Vec<usize> {
        self.skews.iter().map(|(n, _)| *n).collect()
    }

    /// Stops flipping and waits for the thread (idempotent); the clocks are left as they are
    /// (reset them with [`reset`]).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn strobe_loop(cluster: &Cluster, skews: &[(usize, i64)], stop: &AtomicBool) {
    let step = Duration::from_millis(50);
    let mut sign = 1;
    while !stop.load(Ordering::SeqCst) {
        let mut slept = Duration::ZERO;
        while slept < STROBE_PERIOD && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(step);
            slept += step;
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        sign = -sign;
        let flipped: Vec<(usize, i64)> = skews.iter().map(|&(n, ms)| (n, sign * ms)).collect();
        if let Err(e) = skew(cluster, &flipped) {
            eprintln!("nemesis: clock strobe: {e:#}");
        }
    }
}
