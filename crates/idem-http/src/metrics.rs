//! Prometheus counters of what the layer decided, one series per outcome.
//!
//! The interesting operational questions are ratios — how many requests were replays, how
//! many duplicates arrived in flight, how often the store was unavailable (each of those a
//! request that did *not* run its handler) — so one counter with an `outcome` label answers
//! them all.

use prometheus::{IntCounterVec, Opts, Registry};

/// The layer's metrics.
#[derive(Clone, Debug)]
pub struct Metrics {
    requests: IntCounterVec,
}

impl Metrics {
    /// Creates `idem_http_requests_total{outcome}` and registers it in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "idem_http_requests_total",
                "Requests seen by the idempotency layer, by outcome.",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        Ok(Metrics { requests })
    }

    /// Counts one request with `outcome`.
    pub fn record(&self, outcome: &str) {
        self.requests.with_label_values(&[outcome]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome() {
        let registry = Registry::new();
        let metrics = Metrics::register(&registry).unwrap();
        metrics.record("replayed");
        metrics.record("replayed");
        let families = registry.gather();
        assert_eq!(families[0].name(), "idem_http_requests_total");
        assert_eq!(families[0].get_metric()[0].get_counter().get_value(), 2.0);
        assert!(Metrics::register(&registry).is_err(), "registered twice");
    }
}
