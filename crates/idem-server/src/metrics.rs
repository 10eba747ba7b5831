//! Prometheus metrics of a node, served at `/metrics`.
//!
//! One [`Registry`] per node (not the process-global one), so several nodes in one test
//! process never share counters. Labels are small closed sets (outcome, state, method, gRPC
//! code, reason): never a key, an actor or an operation id, which would both leak data and
//! explode the series count. Tenant and endpoint appear only on the series that exist to
//! find a misbehaving tenant or endpoint, and each of those caps its label sets (the
//! heaviest [`MAX_TENANT_SERIES`] keep their own series, the rest are summed under
//! [`OTHER_LABEL`]).
//!
//! Counters are updated where the event happens (the claim handler, the sweep, the Raft
//! proposer); gauges that describe state (records by state, Raft indexes) are refreshed when
//! scraped, from a bounded scan cached for a few seconds (see [`crate::stats`]).

use prometheus::{
    exponential_buckets, Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use idem_core::ClaimKind;

use crate::backend::RaftStatus;
use crate::signals::{KeyWarning, Signal};
use crate::stats::RecordStats;
use crate::usage::Usage;

/// Most label sets a tenant- or endpoint-labelled series keeps; the rest are summed under
/// [`OTHER_LABEL`].
pub const MAX_TENANT_SERIES: usize = 100;
/// The label of the series that sums what did not fit under [`MAX_TENANT_SERIES`].
pub const OTHER_LABEL: &str = "_other";

/// Every metric of a node.
pub struct Metrics {
    registry: Registry,
    /// `idem_claims_total{outcome}`: claims answered, by outcome (`ACQUIRED`, `TAKEN_OVER`, …).
    pub claims: IntCounterVec,
    /// `idem_stale_fences_total`: worker commands refused with `STALE_FENCE`.
    pub stale_fences: IntCounter,
    /// `idem_takeovers_total{previous_stage}`: claims that took over a record.
    pub takeovers: IntCounterVec,
    /// `idem_lease_expiries_total{result}`: expired leases found by a claim, by what
    /// followed (`taken_over`, `needs_reconciliation`).
    pub lease_expiries: IntCounterVec,
    /// `idem_rejections_total{command,reason}`: commands refused by the state machine.
    pub rejections: IntCounterVec,
    /// `idem_records{state}`: records by state (bounded scan, see `idem_records_scan_truncated`).
    pub records: IntGaugeVec,
    /// `idem_records_scan_truncated`: 1 when the record scan hit its bound.
    pub records_scan_truncated: IntGauge,
    /// `idem_oldest_active_age_seconds`: age of the oldest PENDING or IN_PROGRESS record.
    pub oldest_active_age: Gauge,
    /// `idem_sweep_deleted_total`: expired records deleted by the sweep.
    pub sweep_deleted: IntCounter,
    /// `idem_sweep_batches_total`: expiry batches proposed.
    pub sweep_batches: IntCounter,
    /// `idem_sweep_failures_total`: expiry batches that failed or timed out.
    pub sweep_failures: IntCounter,
    /// `idem_stuck_records{tenant,endpoint}`: PENDING or IN_PROGRESS records unchanged for
    /// longer than their endpoint's `stuck_after`, as of the leader's last complete scan
    /// pass (at most [`MAX_TENANT_SERIES`] label sets, see [`Metrics::set_stuck`]).
    pub stuck_records: IntGaugeVec,
    /// `idem_abandoned_total`: abandoned claims deleted (`abandon_after`).
    pub abandoned: IntCounter,
    /// `idem_stuck_scan_failures_total`: scan ticks that failed.
    pub stuck_scan_failures: IntCounter,
    /// `idem_tenant_claims_total{tenant,signal}`: claims answered by this node, by tenant
    /// and what they reveal about the caller (see [`Metrics::count_tenant_claim`]).
    pub tenant_claims: IntCounterVec,
    /// `idem_key_warnings_total{tenant,warning}`: claims whose key looks weak, by tenant and
    /// warning (see [`Metrics::count_key_warnings`]).
    pub key_warnings: IntCounterVec,
    /// The tenants with their own `idem_tenant_claims_total` series (at most
    /// [`MAX_TENANT_SERIES`] - 1, first come first served; later tenants count under
    /// [`OTHER_LABEL`]).
    signal_tenants: Mutex<BTreeSet<String>>,
    /// `idem_rpc_duration_seconds{service,method,code}`: gRPC handling time.
    pub rpc_duration: HistogramVec,
    /// `idem_rpc_errors_total{method,reason}`: failed gRPC calls by reason.
    pub rpc_errors: IntCounterVec,
    /// `idem_raft_write_duration_seconds{command}`: propose-to-applied time.
    pub raft_write_duration: HistogramVec,
    /// `idem_raft_timeouts_total{op}`: Raft writes (`write`) and read barriers (`read`) that
    /// timed out and were answered `UNAVAILABLE_OUTCOME_UNKNOWN`.
    pub raft_timeouts: IntCounterVec,
    /// `idem_forwarded_total{kind}`: requests this follower forwarded to the leader
    /// (`propose`, `read_index`, `membership`), counted when the leader answered.
    pub forwarded: IntCounterVec,
    /// `idem_cross_region_hops_total{kind}`: forwarded requests whose leader is in
    /// another region than this node (what region affinity avoids).
    pub cross_region_hops: IntCounterVec,
    /// `idem_local_replays_total`: claims of terminal records answered from this node's
    /// replica without a Raft round trip.
    pub local_replays: IntCounter,
    /// `idem_limit_refusals_total{reason,kind}`: requests refused by a limit before
    /// anything was proposed (`RATE_LIMITED`, `QUOTA_EXCEEDED`, `OVERLOADED`, deadline
    /// answers), by what was limited (`claim`, `replay`, `mutation`, `request`, `deadline`).
    pub limit_refusals: IntCounterVec,
    /// `idem_group_failover{group}`: 1 while the region group is in failover.
    pub group_failover: IntGaugeVec,
    /// `idem_group_failover_seconds{group}`: how long the current failover has lasted.
    pub group_failover_seconds: GaugeVec,
    /// `idem_group_leader_home{group}`: 1 when the region group's leader is in its home.
    pub group_leader_home: IntGaugeVec,
    /// `idem_group_term{group}`: the region group's current Raft term.
    pub group_term: IntGaugeVec,
    /// `idem_group_has_leader{group}`: 1 when this node knows the region group's leader.
    pub group_has_leader: IntGaugeVec,
    /// `idem_group_is_leader{group}`: 1 when this node leads the region group.
    pub group_is_leader: IntGaugeVec,
    /// `idem_data_dir_bytes`: bytes of every file under the data directory.
    pub data_dir_bytes: IntGauge,
    /// `idem_snapshot_bytes`: bytes of the current Raft snapshots (every group's).
    pub snapshot_bytes: IntGauge,
    /// `idem_disk_free_bytes`: bytes free on the data directory's filesystem (the disk
    /// guard's last sample).
    pub disk_free_bytes: IntGauge,
    /// `idem_disk_reserve_bytes`: `limits.disk_reserve`.
    pub disk_reserve_bytes: IntGauge,
    /// `idem_disk_full`: 1 while the free space is below the reserve (writes refused).
    pub disk_full: IntGauge,
    /// `idem_process_resident_memory_bytes`: the process's resident set size.
    pub resident_memory_bytes: IntGauge,
    /// `idem_raft_term`.
    pub raft_term: IntGauge,
    /// `idem_raft_is_leader`: 1 on the leader.
    pub raft_is_leader: IntGauge,
    /// `idem_raft_has_leader`: 1 when a leader is known.
    pub raft_has_leader: IntGauge,
    /// `idem_raft_last_log_index`.
    pub raft_last_log_index: IntGauge,
    /// `idem_raft_commit_index`.
    pub raft_commit_index: IntGauge,
    /// `idem_raft_applied_index`.
    pub raft_applied_index: IntGauge,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let metric = IntCounter::new(name, help).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(registry, metric.clone());
    metric
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(registry, metric.clone());
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let metric = IntGauge::new(name, help).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(registry, metric.clone());
    metric
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(registry, metric.clone());
    metric
}

fn float_gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let metric = GaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(registry, metric.clone());
    metric
}

fn histogram_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    // 0.5 ms .. ~16 s: a local RocksDB write up to a write timeout.
    let buckets = exponential_buckets(0.0005, 2.0, 16).unwrap_or_default();
    let metric = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(registry, metric.clone());
    metric
}

fn register(registry: &Registry, collector: impl prometheus::core::Collector + 'static) {
    // Names are literals and unique in this file: a failure is a programming error.
    registry
        .register(Box::new(collector))
        .unwrap_or_else(|e| panic!("registering a metric: {e}"));
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let r = Registry::new();
        let oldest_active_age = Gauge::new(
            "idem_oldest_active_age_seconds",
            "Age (now minus created_at) of the oldest PENDING or IN_PROGRESS record; 0 when none.",
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        register(&r, oldest_active_age.clone());
        let records = IntGaugeVec::new(
            Opts::new(
                "idem_records",
                "Records by state, as applied on this node (bounded scan).",
            ),
            &["state"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        register(&r, records.clone());
        Metrics {
            claims: counter_vec(&r, "idem_claims_total", "Claims answered, by outcome.", &["outcome"]),
            stale_fences: counter(&r, "idem_stale_fences_total", "Worker commands refused with STALE_FENCE (a late worker whose lease was taken over)."),
            takeovers: counter_vec(&r, "idem_takeovers_total", "Claims that took over a record, by the stage the previous attempt had reached.", &["previous_stage"]),
            lease_expiries: counter_vec(&r, "idem_lease_expiries_total", "Expired leases found by a claim, by what followed (taken_over, needs_reconciliation).", &["result"]),
            rejections: counter_vec(&r, "idem_rejections_total", "Commands refused by the state machine, by command and reason.", &["command", "reason"]),
            records,
            records_scan_truncated: gauge(&r, "idem_records_scan_truncated", "1 when idem_records and idem_oldest_active_age_seconds come from a truncated scan."),
            oldest_active_age,
            sweep_deleted: counter(&r, "idem_sweep_deleted_total", "Terminal records deleted by the expiry sweep after their retention."),
            sweep_batches: counter(&r, "idem_sweep_batches_total", "Expiry batches proposed by this node as leader."),
            sweep_failures: counter(&r, "idem_sweep_failures_total", "Expiry batches that failed or timed out."),
            stuck_records: gauge_vec(&r, "idem_stuck_records", "PENDING or IN_PROGRESS records unchanged for longer than their endpoint's stuck_after, by tenant and endpoint, as of the leader's last complete scan pass (at most 100 label sets; the rest under _other).", &["tenant", "endpoint"]),
            abandoned: counter(&r, "idem_abandoned_total", "Abandoned claims (stage NOT_CALLED, no live lease) deleted after their endpoint's abandon_after."),
            stuck_scan_failures: counter(&r, "idem_stuck_scan_failures_total", "Stuck-record scan ticks that failed (retried at the next tick)."),
            tenant_claims: counter_vec(&r, "idem_tenant_claims_total", "Claims answered by this node, by tenant and signal: claim (every claim), replay (answered from a stored result), mismatch (same key, different request), in_flight (collided with a live lease). At most 100 tenants; later ones under _other.", &["tenant", "signal"]),
            key_warnings: counter_vec(&r, "idem_key_warnings_total", "Claims whose key looks weak (key_warnings), by tenant and warning: sequential (digits: a counter or row id), timestamp, short (under 16 characters), low_entropy (repeated characters). Never refused. The same tenants as idem_tenant_claims_total; the rest under _other.", &["tenant", "warning"]),
            signal_tenants: Mutex::new(BTreeSet::new()),
            rpc_duration: histogram_vec(&r, "idem_rpc_duration_seconds", "gRPC request handling time, by service, method and status code.", &["service", "method", "code"]),
            rpc_errors: counter_vec(&r, "idem_rpc_errors_total", "Failed gRPC requests, by method and machine-readable reason.", &["method", "reason"]),
            raft_write_duration: histogram_vec(&r, "idem_raft_write_duration_seconds", "Time from proposing a command to its applied outcome, by command.", &["command"]),
            raft_timeouts: counter_vec(&r, "idem_raft_timeouts_total", "Raft writes and read barriers that timed out (answered UNAVAILABLE_OUTCOME_UNKNOWN).", &["op"]),
            forwarded: counter_vec(&r, "idem_forwarded_total", "Requests forwarded by this follower to the leader and answered, by kind (propose, read_index, membership).", &["kind"]),
            cross_region_hops: counter_vec(&r, "idem_cross_region_hops_total", "Forwarded requests whose leader is in another region than this node, by kind.", &["kind"]),
            limit_refusals: counter_vec(&r, "idem_limit_refusals_total", "Requests refused by a limit before anything was proposed, by reason and by what was limited.", &["reason", "kind"]),
            local_replays: counter(&r, "idem_local_replays_total", "Claims of terminal records answered from this node's replica without a Raft round trip."),
            group_failover: gauge_vec(&r, "idem_group_failover", "1 while the region group is in failover (its leader outside its home region).", &["group"]),
            group_failover_seconds: float_gauge_vec(&r, "idem_group_failover_seconds", "How long the region group's current failover has lasted; 0 when none.", &["group"]),
            group_leader_home: gauge_vec(&r, "idem_group_leader_home", "1 when the region group's leader is in its home region.", &["group"]),
            group_term: gauge_vec(&r, "idem_group_term", "Current Raft term of the region group.", &["group"]),
            group_has_leader: gauge_vec(&r, "idem_group_has_leader", "1 when this node knows the region group's leader.", &["group"]),
            group_is_leader: gauge_vec(&r, "idem_group_is_leader", "1 when this node is the region group's leader.", &["group"]),
            data_dir_bytes: gauge(&r, "idem_data_dir_bytes", "Bytes of every file under the node's data directory (RocksDB, Raft logs, snapshots), measured when scraped."),
            snapshot_bytes: gauge(&r, "idem_snapshot_bytes", "Bytes of the node's current Raft snapshot files, every group's, measured when scraped."),
            disk_free_bytes: gauge(&r, "idem_disk_free_bytes", "Bytes free on the data directory's filesystem, as the disk guard last sampled them (statvfs)."),
            disk_reserve_bytes: gauge(&r, "idem_disk_reserve_bytes", "Bytes the disk guard keeps free (limits.disk_reserve); below it, writes are refused with DISK_FULL."),
            disk_full: gauge(&r, "idem_disk_full", "1 while the data directory's free space is below limits.disk_reserve: claims and worker mutations are refused (DISK_FULL), reads and replays go on."),
            resident_memory_bytes: gauge(&r, "idem_process_resident_memory_bytes", "Resident set size of the idemd process, read when scraped."),
            raft_term: gauge(&r, "idem_raft_term", "Current Raft term."),
            raft_is_leader: gauge(&r, "idem_raft_is_leader", "1 when this node is the Raft leader."),
            raft_has_leader: gauge(&r, "idem_raft_has_leader", "1 when this node knows a Raft leader."),
            raft_last_log_index: gauge(&r, "idem_raft_last_log_index", "Highest index in this node's Raft log."),
            raft_commit_index: gauge(&r, "idem_raft_commit_index", "Highest committed Raft log index."),
            raft_applied_index: gauge(&r, "idem_raft_applied_index", "Highest Raft log index applied to the state machine."),
            registry: r,
        }
    }

    /// Refreshes the Raft gauges from the node's view of its group.
    pub fn set_raft(&self, status: &RaftStatus) {
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.raft_term.set(int(status.term));
        self.raft_is_leader.set(i64::from(status.is_leader()));
        self.raft_has_leader
            .set(i64::from(status.leader_id.is_some()));
        self.raft_last_log_index.set(int(status.last_log_index));
        self.raft_commit_index.set(int(status.commit_index));
        self.raft_applied_index.set(int(status.applied_index));
    }

    /// Refreshes the record gauges from a scan.
    pub fn set_records(&self, stats: &RecordStats, now_ms: u64) {
        for state in idem_core::State::ALL {
            let count = stats.by_state.get(&state).copied().unwrap_or(0);
            self.records
                .with_label_values(&[state.name()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        self.records_scan_truncated.set(i64::from(stats.truncated));
        let age_ms = stats.oldest_active_age_ms(now_ms);
        self.oldest_active_age.set(age_ms as f64 / 1000.0);
    }

    /// Replaces `idem_stuck_records` with `counts`: the [`MAX_TENANT_SERIES`]` - 1` largest
    /// keep their own label set, the rest are summed under `(_other, _other)`.
    pub fn set_stuck(&self, counts: &BTreeMap<(String, String), u64>) {
        self.stuck_records.reset();
        let mut largest: Vec<_> = counts.iter().collect();
        largest.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let own = if largest.len() > MAX_TENANT_SERIES {
            MAX_TENANT_SERIES - 1
        } else {
            largest.len()
        };
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for ((tenant, endpoint), count) in &largest[..own] {
            self.stuck_records
                .with_label_values(&[tenant, endpoint])
                .set(int(**count));
        }
        let rest: u64 = largest[own..].iter().map(|(_, count)| **count).sum();
        if own < largest.len() {
            self.stuck_records
                .with_label_values(&[OTHER_LABEL, OTHER_LABEL])
                .set(int(rest));
        }
    }

    /// Counts a claim answer of `tenant` in `idem_tenant_claims_total`: `claim` always, and
    /// the misuse [`Signal`] its kind is (`replay`, `mismatch` or `in_flight`).
    pub fn count_tenant_claim(&self, tenant: &str, kind: ClaimKind) {
        let tenant = self.signal_tenant(tenant);
        let signal = Signal::of(kind).map(Signal::label);
        for signal in std::iter::once("claim").chain(signal) {
            self.tenant_claims
                .with_label_values(&[tenant.as_str(), signal])
                .inc();
        }
    }

    /// Counts a claim of `tenant` in `idem_key_warnings_total` once per warning of its key
    /// (none for a key that looks random: the tenant gets no series).
    pub fn count_key_warnings(&self, tenant: &str, warnings: &[KeyWarning]) {
        if warnings.is_empty() {
            return;
        }
        let tenant = self.signal_tenant(tenant);
        for warning in warnings {
            self.key_warnings
                .with_label_values(&[tenant.as_str(), warning.label()])
                .inc();
        }
    }

    /// `tenant` if it has (or may get) its own series, else [`OTHER_LABEL`].
    fn signal_tenant(&self, tenant: &str) -> String {
        let mut tenants = self
            .signal_tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if tenants.contains(tenant) {
            return tenant.to_owned();
        }
        if tenants.len() < MAX_TENANT_SERIES - 1 {
            tenants.insert(tenant.to_owned());
            return tenant.to_owned();
        }
        OTHER_LABEL.to_owned()
    }

    /// Refreshes the disk and memory gauges from a sample.
    pub fn set_usage(&self, usage: &Usage) {
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.data_dir_bytes.set(int(usage.data_dir_bytes));
        self.snapshot_bytes.set(int(usage.snapshot_bytes));
        if let Some(rss) = usage.resident_bytes {
            self.resident_memory_bytes.set(int(rss));
        }
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# error encoding metrics: {e}\n");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_metric_is_exposed() {
        let metrics = Metrics::new();
        metrics.claims.with_label_values(&["ACQUIRED"]).inc();
        metrics.takeovers.with_label_values(&["CALLING"]).inc();
        metrics
            .lease_expiries
            .with_label_values(&["taken_over"])
            .inc();
        metrics
            .rejections
            .with_label_values(&["start", "STALE_FENCE"])
            .inc();
        metrics
            .rpc_duration
            .with_label_values(&["idempotency", "claim", "Ok"])
            .observe(0.001);
        metrics
            .rpc_errors
            .with_label_values(&["claim", "INVALID_KEY"])
            .inc();
        metrics
            .raft_write_duration
            .with_label_values(&["claim"])
            .observe(0.002);
        metrics.raft_timeouts.with_label_values(&["write"]).inc();
        metrics
            .cross_region_hops
            .with_label_values(&["propose"])
            .inc();
        metrics.group_failover.with_label_values(&["1"]).set(1);
        metrics
            .group_failover_seconds
            .with_label_values(&["1"])
            .set(2.5);
        metrics.group_leader_home.with_label_values(&["1"]).set(0);
        metrics.group_term.with_label_values(&["1"]).set(3);
        metrics.group_has_leader.with_label_values(&["1"]).set(1);
        metrics.group_is_leader.with_label_values(&["1"]).set(0);
        metrics.set_records(&RecordStats::default(), 0);
        metrics.set_usage(&Usage {
            data_dir_bytes: 10,
            snapshot_bytes: 4,
            resident_bytes: Some(2048),
        });
        let text = metrics.render();
        for name in [
            "idem_claims_total",
            "idem_stale_fences_total",
            "idem_takeovers_total",
            "idem_lease_expiries_total",
            "idem_rejections_total",
            "idem_records",
            "idem_records_scan_truncated",
            "idem_oldest_active_age_seconds",
            "idem_sweep_deleted_total",
            "idem_sweep_batches_total",
            "idem_sweep_failures_total",
            "idem_abandoned_total",
            "idem_stuck_scan_failures_total",
            "idem_rpc_duration_seconds_bucket",
            "idem_rpc_errors_total",
            "idem_raft_write_duration_seconds_bucket",
            "idem_raft_timeouts_total",
            "idem_cross_region_hops_total",
            "idem_local_replays_total",
            "idem_group_failover",
            "idem_group_failover_seconds",
            "idem_group_leader_home",
            "idem_group_term",
            "idem_group_has_leader",
            "idem_group_is_leader",
            "idem_data_dir_bytes",
            "idem_snapshot_bytes",
            "idem_process_resident_memory_bytes",
            "idem_raft_term",
            "idem_raft_is_leader",
            "idem_raft_has_leader",
            "idem_raft_last_log_index",
            "idem_raft_commit_index",
            "idem_raft_applied_index",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} missing from\n{text}"
            );
        }
        assert!(text.contains("idem_records{state=\"NEEDS_RECONCILIATION\"} 0"));
        assert!(text.contains("idem_group_term{group=\"1\"} 3"));
        assert!(text.contains("idem_data_dir_bytes 10"));
        assert!(text.contains("idem_snapshot_bytes 4"));
        assert!(text.contains("idem_process_resident_memory_bytes 2048"));
    }

    #[test]
    fn tenant_claim_signals_are_counted_with_a_capped_tenant_set() {
        let metrics = Metrics::new();
        for kind in [
            ClaimKind::Acquired,
            ClaimKind::Completed,
            ClaimKind::Failed,
            ClaimKind::FingerprintMismatch,
            ClaimKind::InProgress,
            ClaimKind::InProgress,
        ] {
            metrics.count_tenant_claim("acme", kind);
        }
        for i in 0..MAX_TENANT_SERIES + 3 {
            metrics.count_tenant_claim(&format!("t{i}"), ClaimKind::Acquired);
        }
        let text = metrics.render();
        let line = |tenant: &str, signal: &str, n: u64| {
            format!("idem_tenant_claims_total{{signal=\"{signal}\",tenant=\"{tenant}\"}} {n}")
        };
        for (signal, n) in [
            ("claim", 6),
            ("replay", 2),
            ("mismatch", 1),
            ("in_flight", 2),
        ] {
            assert!(
                text.contains(&line("acme", signal, n)),
                "{signal} in\n{text}"
            );
        }
        // acme and t0..t97 have their own series; t98..t102 share _other.
        assert!(text.contains(&line("t97", "claim", 1)));
        assert!(!text.contains("tenant=\"t98\""));
        assert!(text.contains(&line(OTHER_LABEL, "claim", 5)));
    }

    #[test]
    fn stuck_series_are_capped_with_the_rest_under_other() {
        let metrics = Metrics::new();
        let mut counts = BTreeMap::new();
        for i in 0..(MAX_TENANT_SERIES + 5) {
            counts.insert((format!("t{i:03}"), "POST /x".to_owned()), 1000 - i as u64);
        }
        metrics.set_stuck(&counts);
        let text = metrics.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("idem_stuck_records{"))
            .count();
        assert_eq!(series, MAX_TENANT_SERIES);
        assert!(text.contains(r#"idem_stuck_records{endpoint="POST /x",tenant="t000"} 1000"#));
        // t099..t104 (6 sets: 901 + 900 + ... + 896) did not fit.
        assert!(text.contains(r#"idem_stuck_records{endpoint="_other",tenant="_other"} 5391"#));

        // A later pass replaces the earlier one: nothing stuck, no series.
        metrics.set_stuck(&BTreeMap::new());
        assert!(!metrics.render().contains("idem_stuck_records{"));
    }
}
