//! The reconciler's Prometheus metrics: what it settled, what it left alone and why, how
//! often it lost a race, and how the downstream answers.
//!
//! A growing `left_alone{reason="unknown"}` or `check_errors` is the alert: records that
//! need a person. `conflicts` is normal in small numbers (a worker finished, or a second
//! reconciler won the race); it is what running two reconcilers at once costs.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry, TextEncoder,
};

/// The reconciler's counters and check-latency histogram, in their own registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    scanned: IntCounter,
    settled: IntCounterVec,
    planned: IntCounterVec,
    left_alone: IntCounterVec,
    conflicts: IntCounter,
    check_errors: IntCounter,
    settle_errors: IntCounter,
    passes: IntCounter,
    check_seconds: Histogram,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn counter_vec(registry: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Fresh metrics in a new registry.
    pub fn new() -> Self {
        let registry = Registry::new();
        let check_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "idem_reconciler_check_seconds",
                "Time of one downstream check, answered or not.",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
        )
        .expect("valid metric");
        registry
            .register(Box::new(check_seconds.clone()))
            .expect("registered once");
        Metrics {
            scanned: counter(
                &registry,
                "idem_reconciler_scanned_total",
                "Records examined.",
            ),
            settled: counter_vec(
                &registry,
                "idem_reconciler_settled_total",
                "Records reconciled, by the state they were moved to.",
                "outcome",
            ),
            planned: counter_vec(
                &registry,
                "idem_reconciler_dry_run_total",
                "Records a dry run would have reconciled, by target state.",
                "outcome",
            ),
            left_alone: counter_vec(
                &registry,
                "idem_reconciler_left_alone_total",
                "Records left as they were: the downstream could not tell (unknown) or \
                 contradicted the record (contradiction).",
                "reason",
            ),
            conflicts: counter(
                &registry,
                "idem_reconciler_conflicts_total",
                "Reconciles refused because the record changed meanwhile (VERSION_MISMATCH, \
                 ALREADY_TERMINAL): a worker or another reconciler got there first.",
            ),
            check_errors: counter(
                &registry,
                "idem_reconciler_check_errors_total",
                "Downstream checks that failed (unreachable, timeout, unexpected answer).",
            ),
            settle_errors: counter(
                &registry,
                "idem_reconciler_settle_errors_total",
                "Reconcile calls that failed for another reason (e.g. unavailable).",
            ),
            passes: counter(
                &registry,
                "idem_reconciler_passes_total",
                "Completed passes.",
            ),
            check_seconds,
            registry,
        }
    }

    pub(crate) fn scanned(&self) {
        self.scanned.inc();
    }

    pub(crate) fn settled(&self, outcome: &str, dry_run: bool) {
        let family = if dry_run {
            &self.planned
        } else {
            &self.settled
        };
        family.with_label_values(&[outcome]).inc();
    }

    pub(crate) fn left_alone(&self, reason: &str) {
        self.left_alone.with_label_values(&[reason]).inc();
    }

    pub(crate) fn conflict(&self) {
        self.conflicts.inc();
    }

    pub(crate) fn check_error(&self) {
        self.check_errors.inc();
    }

    pub(crate) fn settle_error(&self) {
        self.settle_errors.inc();
    }

    pub(crate) fn pass(&self) {
        self.passes.inc();
    }

    pub(crate) fn check_took(&self, seconds: f64) {
        self.check_seconds.observe(seconds);
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding to memory");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let metrics = Metrics::new();
        metrics.settled("completed", false);
        metrics.settled("completed", true);
        metrics.left_alone("unknown");
        metrics.conflict();
        metrics.check_error();
        metrics.check_took(0.02);
        let text = metrics.render();
        for line in [
            "idem_reconciler_settled_total{outcome=\"completed\"} 1",
            "idem_reconciler_dry_run_total{outcome=\"completed\"} 1",
            "idem_reconciler_left_alone_total{reason=\"unknown\"} 1",
            "idem_reconciler_conflicts_total 1",
            "idem_reconciler_check_errors_total 1",
            "idem_reconciler_check_seconds_count 1",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
