//! What one reconciler looks at and how it acts.

use std::time::Duration;

use super::decision::AbsentPolicy;
use super::error::ConfigError;

/// Default [`ReconcilerOptions::stuck_after`]: a CALLING record unchanged this long.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(300);
/// Default [`ReconcilerOptions::checks_per_second`].
pub const DEFAULT_RATE: f64 = 5.0;

/// The reconciler's settings.
#[derive(Clone, Debug)]
pub struct ReconcilerOptions {
    /// Only this tenant's records (the listing is filtered by the server).
    pub tenant: Option<String>,
    /// Only records of this scope endpoint, e.g. `POST /v1/charges`.
    pub endpoint: Option<String>,
    /// PENDING or IN_PROGRESS records at stage CALLING unchanged for this long are examined
    /// too (NEEDS_RECONCILIATION records always are). Choose it well above the longest
    /// downstream call: the reconcile revokes a worker still inside its call.
    pub stuck_after: Duration,
    /// What an operation the downstream never executed becomes.
    pub absent: AbsentPolicy,
    /// Downstream checks per second, on average.
    pub checks_per_second: f64,
    /// Checks allowed back to back before the rate applies.
    pub burst: u32,
    /// Decide and report, write nothing.
    pub dry_run: bool,
    /// Records per listing page (at most 1000).
    pub page_size: u32,
    /// Status code of the result stored when the downstream has the operation.
    pub completed_status: u16,
    /// Who decides, in the audit entries (replaced by the authenticated principal when
    /// authentication is on).
    pub operator: String,
    /// The start of each audit entry's reason; the downstream's answer is appended.
    pub reason: String,
}

impl Default for ReconcilerOptions {
    fn default() -> Self {
        ReconcilerOptions {
            tenant: None,
            endpoint: None,
            stuck_after: DEFAULT_STUCK_AFTER,
            absent: AbsentPolicy::Retry,
            checks_per_second: DEFAULT_RATE,
            burst: 1,
            dry_run: false,
            page_size: 100,
            completed_status: 200,
            operator: "reconciler".to_owned(),
            reason: "automatic reconciliation".to_owned(),
        }
    }
}

impl ReconcilerOptions {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.checks_per_second.is_finite() && self.checks_per_second > 0.0) {
            return Err(ConfigError::Range(
                "the check rate must be a positive number of checks per second".into(),
            ));
        }
        if !(1..=1000).contains(&self.page_size) {
            return Err(ConfigError::Range("the page size must be 1..=1000".into()));
        }
        if !(100..=599).contains(&self.completed_status) {
            return Err(ConfigError::Range(
                "the completed status code must be 100..=599".into(),
            ));
        }
        if self.reason.trim().is_empty() {
            return Err(ConfigError::Range(
                "the audit reason must not be empty".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert!(ReconcilerOptions::default().validate().is_ok());
        let bad = [
            ReconcilerOptions {
                checks_per_second: 0.0,
                ..Default::default()
            },
            ReconcilerOptions {
                page_size: 0,
                ..Default::default()
            },
            ReconcilerOptions {
                completed_status: 99,
                ..Default::default()
            },
            ReconcilerOptions {
                reason: " ".into(),
                ..Default::default()
            },
        ];
        assert!(bad.iter().all(|o| o.validate().is_err()));
    }
}
