//! Which key a worker works on next.
//!
//! Keys are used by several workers at once (through different nodes) for a while, then
//! retired, as in Jepsen's independent-key tests: a sliding window of `active` keys moves one
//! key forward every `attempts_per_key` attempts across all workers. So every key sees
//! concurrent claims, retries and takeovers, and the per-key checkers get many small
//! histories instead of one huge one.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use idem_testkit::Rng;

/// The shared key window of a test.
#[derive(Debug)]
pub struct KeyPool {
    active: u64,
    attempts_per_key: u64,
    attempts: AtomicU64,
    used: Mutex<BTreeSet<u64>>,
}

impl KeyPool {
    /// A window of `active` keys, moving every `attempts_per_key` attempts.
    pub fn new(active: u64, attempts_per_key: u64) -> KeyPool {
        KeyPool {
            active: active.max(1),
            attempts_per_key: attempts_per_key.max(1),
            attempts: AtomicU64::new(0),
            used: Mutex::new(BTreeSet::new()),
        }
    }

    /// The key name of index `i`.
    pub fn name(i: u64) -> String {
        format!("k{i}")
    }

    /// The key for the next attempt.
    pub fn next(&self, rng: &mut Rng) -> String {
        let n = self.attempts.fetch_add(1, Ordering::Relaxed);
        let base = n / self.attempts_per_key;
        let i = base + rng.below(self.active);
        self.used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(i);
        KeyPool::name(i)
    }

    /// Every key handed out so far, in order.
    pub fn used(&self) -> Vec<String> {
        self.used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|&i| KeyPool::name(i))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_slides_and_remembers_keys() {
        let pool = KeyPool::new(2, 3);
        let mut rng = Rng::new(1);
        let keys: Vec<String> = (0..9).map(|_| pool.next(&mut rng)).collect();
        for (n, k) in keys.iter().enumerate() {
            let i: u64 = k[1..].parse().unwrap();
            let base = n as u64 / 3;
            assert!((base..base + 2).contains(&i), "{n}: {k}");
        }
        let used = pool.used();
        assert!(used.len() >= 3);
        assert!(used.iter().all(|k| keys.contains(k)));
    }
}
