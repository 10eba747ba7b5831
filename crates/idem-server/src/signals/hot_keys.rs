//! The heaviest keys and tenants of the recent past, in bounded memory.
//!
//! A hot key (one key claimed again and again) is a retry storm or a caller that reuses one
//! key for everything; a hot tenant is where to look first. Exact counts per key would grow
//! with the key space, so each tenant keeps a Space-Saving sketch of [`KEYS_PER_TENANT`]
//! counters (Metwally et al.): a key already counted is incremented; a new key replaces the
//! smallest counter and inherits its count, remembered as the new key's `overcount`. Every
//! key claimed more than `claims / KEYS_PER_TENANT` times is in the sketch, and each count
//! overstates the truth by at most its `overcount`.
//!
//! "Recent" is exponential decay: every count halves each [`HALF_LIFE`] without claims, so
//! a storm that ended fades out instead of holding its place forever. At most
//! [`MAX_TENANTS`] tenants are tracked; a new one past that replaces the quietest.
//!
//! Keys are identified by their keyed hash ([`idem_core::log_hash`], the same as in log
//! lines), never by the key itself: the sketch is read by operators, and keys are often
//! business identifiers. Counts are of the claims this node answered.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use idem_core::{ClaimKind, RecordKey};

use super::{Signal, SIGNALS};

/// Counters per tenant.
pub const KEYS_PER_TENANT: usize = 32;
/// Tenants tracked at once.
pub const MAX_TENANTS: usize = 1024;
/// A count halves after this long without claims.
pub const HALF_LIFE: Duration = Duration::from_secs(300);

/// A count that halves every [`HALF_LIFE`].
#[derive(Clone, Copy, Debug)]
struct Decayed {
    value: f64,
    at: Instant,
}

impl Decayed {
    fn new(value: f64, at: Instant) -> Self {
        Decayed { value, at }
    }

    /// The value as of `now` (never grows; `now` before `at` counts as `at`).
    fn at(self, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at);
        self.value * 0.5f64.powf(elapsed.as_secs_f64() / HALF_LIFE.as_secs_f64())
    }

    fn add(&mut self, amount: f64, now: Instant) {
        self.value = self.at(now) + amount;
        self.at = now.max(self.at);
    }
}

/// One counter of a tenant's sketch.
#[derive(Clone, Debug)]
struct Counter {
    endpoint: String,
    key_hash: String,
    claims: Decayed,
    overcount: Decayed,
}

/// A tenant's claims by signal and its key counters.
#[derive(Debug)]
struct TenantSketch {
    claims: Decayed,
    signals: [Decayed; SIGNALS],
    keys: Vec<Counter>,
}

impl TenantSketch {
    fn new(now: Instant) -> Self {
        TenantSketch {
            claims: Decayed::new(0.0, now),
            signals: [Decayed::new(0.0, now); SIGNALS],
            keys: Vec::with_capacity(KEYS_PER_TENANT),
        }
    }

    fn count(&mut self, endpoint: &str, key_hash: String, signal: Option<Signal>, now: Instant) {
        self.claims.add(1.0, now);
        if let Some(signal) = signal {
            self.signals[signal as usize].add(1.0, now);
        }
        let known = self
            .keys
            .iter_mut()
            .find(|c| c.key_hash == key_hash && c.endpoint == endpoint);
        if let Some(counter) = known {
            counter.claims.add(1.0, now);
            return;
        }
        let mut counter = Counter {
            endpoint: endpoint.to_owned(),
            key_hash,
            claims: Decayed::new(1.0, now),
            overcount: Decayed::new(0.0, now),
        };
        if self.keys.len() < KEYS_PER_TENANT {
            self.keys.push(counter);
            return;
        }
        let smallest = self
            .keys
            .iter_mut()
            .min_by(|a, b| a.claims.at(now).total_cmp(&b.claims.at(now)))
            .expect("a full sketch has counters");
        let inherited = smallest.claims.at(now);
        counter.claims = Decayed::new(inherited + 1.0, now);
        counter.overcount = Decayed::new(inherited, now);
        *smallest = counter;
    }
}

/// A key among the heaviest, as of one reading.
#[derive(Clone, Debug, PartialEq)]
pub struct HotKey {
    /// Its tenant.
    pub tenant: String,
    /// Its scope's endpoint.
    pub endpoint: String,
    /// The keyed hash of the key (as in log lines).
    pub key_hash: String,
    /// Decayed claims counted for it (an upper bound).
    pub claims: f64,
    /// How much of `claims` may belong to keys it replaced.
    pub overcount: f64,
}

/// A tenant's decayed claims, by signal.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantActivity {
    /// The tenant.
    pub tenant: String,
    /// Every claim.
    pub claims: f64,
    /// Claims answered from a stored result, by [`Signal`] order: replays, mismatches,
    /// in-flight collisions.
    pub signals: [f64; SIGNALS],
}

/// The node's heavy-hitter sketches, one per tenant.
#[derive(Debug, Default)]
pub struct HotKeys {
    tenants: Mutex<HashMap<String, TenantSketch>>,
}

impl HotKeys {
    /// Counts a claim of `target` answered with `kind`.
    pub fn count(&self, target: &RecordKey, kind: ClaimKind, now: Instant) {
        let key_hash = target.key.log_hash();
        let mut tenants = self.lock();
        let tenant = target.scope.tenant();
        if !tenants.contains_key(tenant) && tenants.len() >= MAX_TENANTS {
            evict_quietest(&mut tenants, now);
        }
        tenants
            .entry(tenant.to_owned())
            .or_insert_with(|| TenantSketch::new(now))
            .count(target.scope.endpoint(), key_hash, Signal::of(kind), now);
    }

    /// The `limit` heaviest keys of `tenant` (every tenant's with `None`), heaviest first.
    pub fn top_keys(&self, tenant: Option<&str>, limit: usize, now: Instant) -> Vec<HotKey> {
        let tenants = self.lock();
        let mut keys: Vec<HotKey> = tenants
            .iter()
            .filter(|(name, _)| tenant.is_none_or(|t| t == name.as_str()))
            .flat_map(|(name, sketch)| {
                sketch.keys.iter().map(move |c| HotKey {
                    tenant: name.clone(),
                    endpoint: c.endpoint.clone(),
                    key_hash: c.key_hash.clone(),
                    claims: c.claims.at(now),
                    overcount: c.overcount.at(now),
                })
            })
            .collect();
        keys.sort_by(|a, b| b.claims.total_cmp(&a.claims));
        keys.truncate(limit);
        keys
    }

    /// The `limit` tenants with the most decayed claims, heaviest first.
    pub fn top_tenants(&self, limit: usize, now: Instant) -> Vec<TenantActivity> {
        let tenants = self.lock();
        let mut all: Vec<TenantActivity> = tenants
            .iter()
            .map(|(name, sketch)| TenantActivity {
                tenant: name.clone(),
                claims: sketch.claims.at(now),
                signals: sketch.signals.map(|s| s.at(now)),
            })
            .collect();
        all.sort_by(|a, b| b.claims.total_cmp(&a.claims));
        all.truncate(limit);
        all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TenantSketch>> {
        self.tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn evict_quietest(tenants: &mut HashMap<String, TenantSketch>, now: Instant) {
    let quietest = tenants
        .iter()
        .min_by(|a, b| a.1.claims.at(now).total_cmp(&b.1.claims.at(now)))
        .map(|(name, _)| name.clone());
    if let Some(name) = quietest {
        tenants.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use idem_core::{IdempotencyKey, Scope};

    use super::*;

    fn target(tenant: &str, key: &str) -> RecordKey {
        let scope = Scope::new(tenant, "prod", "u", "POST /v1/charges").unwrap();
        RecordKey::new(scope, IdempotencyKey::new(key).unwrap())
    }

    #[test]
    fn the_heaviest_key_is_found_among_many_and_never_shown_raw() {
        let sketch = HotKeys::default();
        let now = Instant::now();
        for i in 0..5000 {
            sketch.count(&target("acme", &format!("k-{i}")), ClaimKind::Acquired, now);
            if i % 10 == 0 {
                sketch.count(&target("acme", "storm"), ClaimKind::Completed, now);
            }
        }
        let top = sketch.top_keys(Some("acme"), 3, now);
        assert_eq!(top.len(), 3);
        let storm = &top[0];
        assert_eq!(
            storm.key_hash,
            IdempotencyKey::new("storm").unwrap().log_hash()
        );
        assert!(storm.claims >= 500.0, "{storm:?}");
        assert!(storm.claims - storm.overcount <= 500.0 + 1e-6, "{storm:?}");
        assert_eq!(storm.endpoint, "POST /v1/charges");
        let activity = &sketch.top_tenants(10, now)[0];
        assert_eq!(activity.claims, 5500.0);
        assert_eq!(activity.signals[Signal::Replay as usize], 500.0);
        assert!(sketch.top_keys(Some("globex"), 3, now).is_empty());
    }

    #[test]
    fn counts_fade_with_time() {
        let sketch = HotKeys::default();
        let then = Instant::now();
        for _ in 0..100 {
            sketch.count(&target("acme", "old-storm"), ClaimKind::InProgress, then);
        }
        let later = then + HALF_LIFE * 2;
        sketch.count(&target("globex", "new-key"), ClaimKind::Acquired, later);
        let keys = sketch.top_keys(None, 10, later);
        assert!((keys[0].claims - 25.0).abs() < 1e-6, "{keys:?}");
        let tenants = sketch.top_tenants(10, later);
        assert_eq!(tenants[0].tenant, "acme");
        assert!((tenants[0].signals[Signal::InFlight as usize] - 25.0).abs() < 1e-6);
        assert_eq!(sketch.top_tenants(1, later).len(), 1);
    }

    #[test]
    fn memory_is_bounded() {
        let sketch = HotKeys::default();
        let now = Instant::now();
        for t in 0..MAX_TENANTS + 10 {
            for k in 0..KEYS_PER_TENANT + 5 {
                sketch.count(
                    &target(&format!("t{t}"), &format!("k{k}")),
                    ClaimKind::Acquired,
                    now,
                );
            }
        }
        let tenants = sketch.lock();
        assert_eq!(tenants.len(), MAX_TENANTS);
        assert!(tenants.values().all(|s| s.keys.len() == KEYS_PER_TENANT));
        assert!(
            tenants.contains_key(&format!("t{}", MAX_TENANTS + 9)),
            "the newest stays"
        );
    }
}
