//! What a claim's answer reveals about its caller, beside the claim itself.

use idem_core::ClaimKind;

/// A misuse signal of a claim (`idem_tenant_claims_total{signal}`, `Admin.TopTenants`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Answered from a stored result (COMPLETED or FAILED): a retry of finished work. A high
    /// rate is normal on flaky networks; a rate near 1 means callers retry what succeeded.
    Replay,
    /// FINGERPRINT_MISMATCH: one key reused for a different request.
    Mismatch,
    /// IN_PROGRESS: a retry while the first attempt still runs (e.g. a client timeout
    /// shorter than the work).
    InFlight,
}

impl Signal {
    /// Every signal, in the order of their index (`signal as usize`).
    pub const ALL: [Signal; SIGNALS] = [Signal::Replay, Signal::Mismatch, Signal::InFlight];

    /// The signal a claim answered with `kind` gives, if any.
    pub fn of(kind: ClaimKind) -> Option<Signal> {
        match kind {
            ClaimKind::Completed | ClaimKind::Failed => Some(Signal::Replay),
            ClaimKind::FingerprintMismatch => Some(Signal::Mismatch),
            ClaimKind::InProgress => Some(Signal::InFlight),
            ClaimKind::Acquired
            | ClaimKind::TakenOver
            | ClaimKind::FingerprintUnverifiable
            | ClaimKind::NeedsReconciliation => None,
        }
    }

    /// The metric label, e.g. `in_flight`.
    pub fn label(self) -> &'static str {
        match self {
            Signal::Replay => "replay",
            Signal::Mismatch => "mismatch",
            Signal::InFlight => "in_flight",
        }
    }
}

/// How many signals there are.
pub const SIGNALS: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_all() {
        for (i, signal) in Signal::ALL.iter().enumerate() {
            assert_eq!(*signal as usize, i);
        }
    }
}
