//! Replicated time.
//!
//! The leader stamps each command with its wall clock; apply uses
//! `max(stamp, last applied stamp)` so that replicated time never runs backwards and every
//! replica decides lease expiry identically, whatever its own clock says.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, as decided by the log.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The zero instant.
    pub const ZERO: Timestamp = Timestamp(0);

    /// Milliseconds since the Unix epoch.
    pub fn millis(self) -> u64 {
        self.0
    }

    /// This instant plus `duration`, saturating.
    pub fn plus(self, duration: Duration) -> Timestamp {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }

    /// The time from `self` until `later`, zero if `later` is not later.
    pub fn until(self, later: Timestamp) -> Duration {
        Duration::from_millis(later.0.saturating_sub(self.0))
    }

    /// The local wall clock. Only proposers call it; apply never does.
    pub fn now() -> Timestamp {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
    }
}
