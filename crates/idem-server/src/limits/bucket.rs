//! One token bucket, in thousandths of a token so fractional costs (a replay) stay exact.
//!
//! Integer arithmetic on purpose: the tests promise exact counts ("a burst of N+1 claims
//! gives exactly one refusal"), which floating-point refills would blur.

use std::time::{Duration, Instant};

/// Thousandths of a token per token.
pub const MILLI: u64 = 1000;

/// A token bucket: up to `burst` tokens, refilled at `rate` tokens per second.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Refill rate, in thousandths of a token per second.
    rate: u64,
    /// Capacity, in thousandths of a token.
    capacity: u64,
    /// Tokens now, in thousandths.
    level: u64,
    /// When `level` was last brought up to date.
    at: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `rate` tokens per second (`rate` ≥ 1).
    pub fn new(rate: u64, burst: u64, now: Instant) -> Self {
        let capacity = burst.max(1).saturating_mul(MILLI);
        TokenBucket {
            rate: rate.max(1).saturating_mul(MILLI),
            capacity,
            level: capacity,
            at: now,
        }
    }

    /// Takes `cost` thousandths of a token, or answers how long until they are there.
    ///
    /// A cost above the capacity is clamped to the capacity, so a request is never
    /// refused forever.
    pub fn take(&mut self, cost: u64, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        let cost = cost.min(self.capacity);
        if self.level >= cost {
            self.level -= cost;
            return Ok(());
        }
        let missing = cost - self.level;
        // Rounded up, so a retry at the hint finds the tokens there.
        let micros = (missing.saturating_mul(1_000_000)).div_ceil(self.rate);
        Err(Duration::from_micros(micros.max(1_000)))
    }

    /// Gives back `amount` thousandths of a token (a claim that turned out to be a replay).
    pub fn refund(&mut self, amount: u64, now: Instant) {
        self.refill(now);
        self.level = self.level.saturating_add(amount).min(self.capacity);
    }

    /// True when the bucket is full at `now` (an idle tenant: its bucket can be dropped).
    pub fn is_full(&self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at);
        self.refilled(elapsed) >= self.capacity
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at);
        let level = self.refilled(elapsed);
        if level != self.level {
            // Only move the clock by the time that produced whole thousandths, so slow
            // refills are not lost to rounding.
            let produced = level - self.level;
            let used = Duration::from_micros(produced.saturating_mul(1_000_000) / self.rate);
            self.at = if level == self.capacity {
                now
            } else {
                self.at + used
            };
            self.level = level;
        }
    }

    fn refilled(&self, elapsed: Duration) -> u64 {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let gained = u128::from(micros) * u128::from(self.rate) / 1_000_000;
        let gained = u64::try_from(gained).unwrap_or(u64::MAX);
        self.level.saturating_add(gained).min(self.capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_served_then_refused_with_the_time_to_the_next_token() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10, 5, start);
        for _ in 0..5 {
            bucket.take(MILLI, start).unwrap();
        }
        let wait = bucket.take(MILLI, start).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        // 100 ms later exactly one token is back.
        let later = start + Duration::from_millis(100);
        bucket.take(MILLI, later).unwrap();
        assert!(bucket.take(MILLI, later).is_err());
    }

    #[test]
    fn fractional_costs_and_refunds_are_exact() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(1, 1, start);
        for _ in 0..10 {
            bucket.take(100, start).unwrap();
        }
        assert!(bucket.take(100, start).is_err());
        bucket.refund(900, start);
        for _ in 0..9 {
            bucket.take(100, start).unwrap();
        }
        assert!(bucket.take(1, start).is_err());
    }

    #[test]
    fn slow_refills_are_not_lost_to_rounding_and_a_full_bucket_is_capped() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(3, 1, start);
        bucket.take(MILLI, start).unwrap();
        let mut now = start;
        // Refilled in 1 ms steps: the clock only moves by the time that produced tokens.
        for _ in 0..334 {
            now += Duration::from_millis(1);
            let _ = bucket.take(0, now);
        }
        bucket.take(MILLI, now).unwrap();
        assert!(!bucket.is_full(now));
        let much_later = now + Duration::from_secs(3600);
        assert!(bucket.is_full(much_later));
        bucket.take(MILLI, much_later).unwrap();
        assert!(
            bucket.take(MILLI, much_later).is_err(),
            "capacity is 1 token"
        );
    }
}
