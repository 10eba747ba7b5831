//! A token bucket on downstream checks: a reconciler catching up on a backlog must not
//! become the provider's biggest client.

use std::time::Duration;

use tokio::time::Instant;

/// Allows `rate` checks a second on average and `burst` at once.
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `rate` a second (`rate` > 0, `burst` ≥ 1).
    pub fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Takes a token at `now` if there is one; else how long until there is.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }

    /// Waits until a token is available and takes it.
    pub async fn take(&mut self) {
        while let Err(wait) = self.try_take(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let mut bucket = TokenBucket::new(2.0, 3);
        let t0 = bucket.last;
        for _ in 0..3 {
            assert!(bucket.try_take(t0).is_ok());
        }
        let wait = bucket.try_take(t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(bucket.try_take(t0 + Duration::from_millis(499)).is_err());
        assert!(bucket.try_take(t0 + Duration::from_millis(501)).is_ok());
        // A long idle refills only up to the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(bucket.try_take(later).is_ok());
        }
        assert!(bucket.try_take(later).is_err());
    }
}
