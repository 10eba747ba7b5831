//! Per-endpoint policies: how long a lease lasts, how long a finished key is remembered,
//! how dangerous a repeated side effect is, and how much result may be stored.
//!
//! The proposer resolves the effective policy (request overrides, endpoint policy, cluster
//! default) and puts it in the claim, so apply never consults configuration. The policy is
//! fixed on the record at first claim: a retry cannot lower a key's risk.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Field, ValidationError};

/// Shortest lease accepted.
pub const MIN_LEASE: Duration = Duration::from_millis(100);
/// Longest lease accepted (longer work renews).
pub const MAX_LEASE: Duration = Duration::from_secs(3600);
/// Shortest retention accepted.
pub const MIN_RETENTION: Duration = Duration::from_secs(1);
/// Longest retention accepted (400 days).
pub const MAX_RETENTION: Duration = Duration::from_secs(400 * 24 * 3600);
/// Shortest `abandon_after` accepted: an endpoint's abandoned claims are deleted no
/// sooner than this after their last change (see [`validate_abandon_after`]).
pub const MIN_ABANDON_AFTER: Duration = Duration::from_secs(60);
/// Longest `abandon_after` accepted (the longest retention).
pub const MAX_ABANDON_AFTER: Duration = MAX_RETENTION;
/// Smallest result limit accepted.
pub const MIN_RESULT_BYTES: u32 = 64;
/// Largest result limit accepted (1 MiB).
pub const MAX_RESULT_BYTES: u32 = 1 << 20;

/// How dangerous a second execution of the side effect would be.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum Risk {
    /// Repeating is harmless (e.g. an export).
    Low,
    /// The default.
    #[default]
    Normal,
    /// Repeating loses money or trust (payments): an unknown outcome is never taken over
    /// automatically, and writes are refused during a region failover.
    High,
}

impl Risk {
    /// The API name, e.g. `HIGH` (as in `idem.v1.Risk` without its prefix, and in idemd's
    /// policy configuration).
    pub fn name(self) -> &'static str {
        match self {
            Risk::Low => "LOW",
            Risk::Normal => "NORMAL",
            Risk::High => "HIGH",
        }
    }
}

/// The policy stored with a record.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Policy {
    /// How long a claim owns the key without renewing (default 30 s).
    pub lease: Duration,
    /// How long a terminal record is kept, counted from reaching its terminal state
    /// (default 24 h).
    pub retention: Duration,
    /// Risk class (default NORMAL).
    pub risk: Risk,
    /// Largest stored result or error summary, in encoded bytes (default 16 KiB).
    pub max_result_bytes: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            lease: Duration::from_secs(30),
            retention: Duration::from_secs(24 * 3600),
            risk: Risk::Normal,
            max_result_bytes: 16 * 1024,
        }
    }
}

impl Policy {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_lease(self.lease)?;
        check_duration(
            Field::Retention,
            self.retention,
            MIN_RETENTION,
            MAX_RETENTION,
        )?;
        let bytes = u64::from(self.max_result_bytes);
        if !(u64::from(MIN_RESULT_BYTES)..=u64::from(MAX_RESULT_BYTES)).contains(&bytes) {
            return Err(ValidationError::Range {
                field: Field::MaxResultBytes,
                value: bytes,
                min: MIN_RESULT_BYTES.into(),
                max: MAX_RESULT_BYTES.into(),
            });
        }
        Ok(())
    }
}

/// Checks a lease duration.
pub fn validate_lease(lease: Duration) -> Result<(), ValidationError> {
    check_duration(Field::Lease, lease, MIN_LEASE, MAX_LEASE)
}

/// Checks an endpoint's `abandon_after`: how long a PENDING or IN_PROGRESS record that never
/// began anything irreversible (stage NOT_CALLED) and holds no live lease may sit unchanged
/// before the leader's sweep deletes it. It is not part of the stored [`Policy`]: the
/// proposer reads it from configuration and carries it in each `Abandon` command, so
/// records written before it existed need no new encoding.
pub fn validate_abandon_after(after: Duration) -> Result<(), ValidationError> {
    check_duration(
        Field::AbandonAfter,
        after,
        MIN_ABANDON_AFTER,
        MAX_ABANDON_AFTER,
    )
}

fn check_duration(
    field: Field,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), ValidationError> {
    if value < min || value > max {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        return Err(ValidationError::Range {
            field,
            value: millis(value),
            min: millis(min),
            max: millis(max),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risk_names_are_the_api_names() {
        let names = [Risk::Low, Risk::Normal, Risk::High].map(Risk::name);
        assert_eq!(names, ["LOW", "NORMAL", "HIGH"]);
    }
}
