//! Workloads: what the clients do while the nemesis works.
//!
//! All four run the same worker protocol ([`worker`]) — claim, record `CALLING` with the
//! fence, ask the ledger first when taking over from a `CALLING` holder, execute on the
//! ledger, complete with the fence — and differ in what they stress:
//!
//! - [`register`]: per key, retries of the same request from several clients through several
//!   nodes; the first claim must win everywhere, one execution per key;
//! - [`conflict`]: the same key with different request bodies; a mismatch must be refused,
//!   never accepted, and never start a second execution;
//! - [`takeover`]: workers stall past their (short) lease and come back late; the next
//!   claimant takes over with a higher fence, and the late worker's writes must be refused as
//!   stale;
//! - [`high_risk`]: HIGH-risk claims with long leases whose owners die after `CALLING`; the
//!   record must wait in `NEEDS_RECONCILIATION` until a reconcile, never be retried silently.

pub mod conflict;
pub mod high_risk;
pub mod keys;
pub mod register;
pub mod store;
pub mod takeover;
pub mod worker;

use std::time::Duration;

use anyhow::bail;
use idem_core::Risk;

use idem_testkit::Rng;

pub use keys::KeyPool;
pub use store::{Completion, Store};
pub use worker::{Shared, Worker};

/// The workload named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Retries of the same request.
    Register,
    /// Different requests under one key.
    Conflict,
    /// Stalled workers and takeovers.
    Takeover,
    /// HIGH-risk claims, owners dying mid-call, reconciliation.
    HighRisk,
}

impl Kind {
    /// Every workload.
    pub const ALL: [Kind; 4] = [
        Kind::Register,
        Kind::Conflict,
        Kind::Takeover,
        Kind::HighRisk,
    ];

    /// Parses `register`, `conflict`, `takeover` or `high-risk`.
    pub fn parse(text: &str) -> anyhow::Result<Kind> {
        match Kind::ALL.iter().find(|k| k.name() == text) {
            Some(kind) => Ok(*kind),
            None => bail!(
                "unknown workload {text:?}; expected register, conflict, takeover or high-risk"
            ),
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Register => "register",
            Kind::Conflict => "conflict",
            Kind::Takeover => "takeover",
            Kind::HighRisk => "high-risk",
        }
    }

    /// How workers behave in this workload.
    pub fn behaviour(self) -> Behaviour {
        match self {
            Kind::Register => register::behaviour(),
            Kind::Conflict => conflict::behaviour(),
            Kind::Takeover => takeover::behaviour(),
            Kind::HighRisk => high_risk::behaviour(),
        }
    }
}

/// Where an owning worker may stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallPoint {
    /// After the claim, before recording `CALLING`.
    BeforeCall,
    /// After executing, before completing.
    BeforeComplete,
}

/// The knobs that distinguish the workloads.
#[derive(Debug, Clone, PartialEq)]
pub struct Behaviour {
    /// Lease asked for on claims.
    pub lease: Duration,
    /// Number of distinct request bodies per key (1: every retry is the same request).
    pub bodies: u64,
    /// Chance that an owning worker stalls.
    pub stall_chance: f64,
    /// Chance of a read after a claim that did not grant ownership.
    pub read_chance: f64,
    /// Risk of every claim.
    pub risk: Risk,
    /// Chance that an owner dies right after recording `CALLING` (executing on the ledger
    /// first half of the time) and never completes.
    pub die_after_call_chance: f64,
}

impl Behaviour {
    /// The body of the next claim.
    pub fn body(&self, rng: &mut Rng) -> String {
        format!("b{}", rng.below(self.bodies.max(1)) + 1)
    }

    /// Whether and where to stall, and for how long (past the lease).
    pub fn stall(&self, rng: &mut Rng) -> Option<(StallPoint, Duration)> {
        if !rng.chance(self.stall_chance) {
            return None;
        }
        let point = if rng.chance(0.5) {
            StallPoint::BeforeCall
        } else {
            StallPoint::BeforeComplete
        };
        let lease = self.lease.as_millis() as u64;
        let ms = rng.between(lease + 200, 2 * lease + 500);
        Some((point, Duration::from_millis(ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviours_differ_as_documented() {
        let mut rng = Rng::new(2);
        let register = Kind::Register.behaviour();
        assert!((0..20).all(|_| register.body(&mut rng) == "b1"));
        assert!((0..20).all(|_| register.stall(&mut rng).is_none()));
        let conflict = Kind::Conflict.behaviour();
        let bodies: std::collections::BTreeSet<String> =
            (0..50).map(|_| conflict.body(&mut rng)).collect();
        assert!(bodies.len() >= 2);
        let takeover = Kind::Takeover.behaviour();
        let stalls: Vec<_> = (0..50).filter_map(|_| takeover.stall(&mut rng)).collect();
        assert!(!stalls.is_empty());
        assert!(stalls.iter().all(|(_, d)| *d > takeover.lease));
        assert_eq!(Kind::parse("takeover").unwrap(), Kind::Takeover);
        assert_eq!(Kind::parse("high-risk").unwrap(), Kind::HighRisk);
        let high = Kind::HighRisk.behaviour();
        assert_eq!(high.risk, Risk::High);
        assert!(high.lease > takeover.lease && high.die_after_call_chance > 0.0);
        assert!(Kind::parse("bank").is_err());
    }
}
