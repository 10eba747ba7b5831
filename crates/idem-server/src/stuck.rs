//! The stuck-record scan: the leader reports records that stopped moving, and deletes the
//! abandoned claims of endpoints that opted in (`abandon_after`).
//!
//! A PENDING or IN_PROGRESS record unchanged for longer than its endpoint's `stuck_after`
//! is *stuck*: a worker died without a takeover, a lease is being renewed by a worker that
//! never finishes, or a caller claimed and walked away. Records carry no state index (apply
//! would have to maintain and snapshot it), so the scan walks the applied records in key
//! order with a cursor, at most [`SCAN_PER_TICK`] records per group per tick: a pass over
//! N records takes N / [`SCAN_PER_TICK`] ticks, and no tick costs more than that, however
//! large the store. At the end of each pass the counts replace the gauge
//! `idem_stuck_records{tenant,endpoint}` (see [`crate::metrics::Metrics::set_stuck`] for
//! its cardinality cap).
//!
//! For an endpoint with an `abandon_after`, a stuck record that never began anything
//! irreversible (stage NOT_CALLED) and holds no live lease is named in an `Abandon`
//! command; apply re-checks every condition at its own time and deletes it with an audit
//! entry. Deleting is safe only because nothing ran: the next claim of the key starts
//! fresh. Only the leader scans and proposes; followers keep no counts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use idem_core::apply::is_abandoned;
use idem_core::command::{Abandon, AbandonTarget, Audited, MAX_ABANDON_BATCH};
use idem_core::{Command, Outcome, Record, Timestamp};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, RequestError};
use crate::metrics::Metrics;
use crate::policy::Policies;

/// Most records one tick reads per group.
pub const SCAN_PER_TICK: usize = 10_000;
/// Records read per scan call.
const PAGE: usize = 1000;
/// The audit reason of an `Abandon` command.
pub const ABANDON_REASON: &str =
    "abandon_after elapsed: nothing irreversible began (stage NOT_CALLED), no live lease";

/// A tenant and an endpoint: the labels of the stuck gauge.
pub type Series = (String, String);

/// Scan settings.
#[derive(Clone, Debug)]
pub struct StuckConfig {
    /// Time between ticks.
    pub interval: Duration,
    /// Records read per group per tick.
    pub per_tick: usize,
    /// Endpoint thresholds (`stuck_after`, `abandon_after`).
    pub policies: Arc<Policies>,
    /// This node's id, recorded as the author of its `Abandon` commands (`node:<id>`).
    pub node_id: u64,
}

/// What one tick of one group did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Records read.
    pub scanned: usize,
    /// True when the tick finished a pass (the counts were published).
    pub pass_done: bool,
    /// Abandoned records deleted.
    pub abandoned: u64,
}

/// One group's scan position and the counts of the pass under way.
#[derive(Debug, Default)]
struct GroupScan {
    cursor: Option<Vec<u8>>,
    counting: BTreeMap<Series, u64>,
    last_pass: BTreeMap<Series, u64>,
}

impl GroupScan {
    fn reset(&mut self) {
        *self = GroupScan::default();
    }
}

/// The scan of every group this node serves.
pub struct StuckScan {
    config: StuckConfig,
    groups: Vec<GroupScan>,
}

/// Runs the scan until `shutdown` is cancelled, over every group `backends` names at each
/// tick.
pub async fn run(
    backends: impl Fn() -> Vec<Arc<dyn Backend>> + Send + 'static,
    config: StuckConfig,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut scan = StuckScan::new(config);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        scan.tick(&backends(), &metrics, &shutdown).await;
    }
}

impl StuckScan {
    /// A scan that has not started.
    pub fn new(config: StuckConfig) -> Self {
        StuckScan {
            config,
            groups: Vec::new(),
        }
    }

    /// One tick over `backends` (one per group, in a stable order); publishes the gauge
    /// when a pass ends.
    pub async fn tick(
        &mut self,
        backends: &[Arc<dyn Backend>],
        metrics: &Metrics,
        shutdown: &CancellationToken,
    ) -> Vec<TickReport> {
        if self.groups.len() != backends.len() {
            // The node's groups changed: start every pass again.
            self.groups = backends.iter().map(|_| GroupScan::default()).collect();
        }
        let mut reports = Vec::with_capacity(backends.len());
        for (index, backend) in backends.iter().enumerate() {
            if shutdown.is_cancelled() {
                break;
            }
            let report = match self.tick_group(index, backend.as_ref(), metrics).await {
                Ok(report) => report,
                Err(error) => {
                    metrics.stuck_scan_failures.inc();
                    tracing::warn!(%error, reason = error.reason(), "stuck-record scan failed; retrying at the next tick");
                    TickReport::default()
                }
            };
            if report.pass_done {
                metrics.set_stuck(&self.totals());
            }
            reports.push(report);
        }
        reports
    }

    /// The last completed pass of every group, summed.
    pub fn totals(&self) -> BTreeMap<Series, u64> {
        let mut totals = BTreeMap::new();
        for group in &self.groups {
            for (series, count) in &group.last_pass {
                *totals.entry(series.clone()).or_default() += count;
            }
        }
        totals
    }

    async fn tick_group(
        &mut self,
        index: usize,
        backend: &dyn Backend,
        metrics: &Metrics,
    ) -> Result<TickReport, RequestError> {
        let group = &mut self.groups[index];
        if !backend.raft_status().is_leader() {
            let had_counts = !group.last_pass.is_empty();
            group.reset();
            return Ok(TickReport {
                pass_done: had_counts,
                ..TickReport::default()
            });
        }
        let now = backend.now();
        let mut report = TickReport::default();
        let mut targets = Vec::new();
        while report.scanned < self.config.per_tick {
            let limit = PAGE.min(self.config.per_tick - report.scanned);
            let page = backend.scan(&[], group.cursor.as_deref(), limit)?;
            let full = page.len() == limit;
            report.scanned += page.len();
            for record in &page {
                group.cursor = Some(record.key.encode());
                look_at(&self.config.policies, record, now, group, &mut targets);
            }
            if !full {
                group.last_pass = std::mem::take(&mut group.counting);
                group.cursor = None;
                report.pass_done = true;
                break;
            }
        }
        report.abandoned = propose_abandon(backend, targets, self.config.node_id).await?;
        metrics.abandoned.inc_by(report.abandoned);
        Ok(report)
    }
}

/// Counts `record` if it is stuck, and names it for abandonment if its endpoint allows.
fn look_at(
    policies: &Policies,
    record: &Record,
    now: Timestamp,
    group: &mut GroupScan,
    targets: &mut Vec<AbandonTarget>,
) {
    if !record.state.is_active() {
        return;
    }
    let endpoint = record.key.scope.endpoint();
    let idle = now.millis().saturating_sub(record.updated_at.millis());
    let stuck_after = policies.stuck_after(endpoint);
    if u128::from(idle) < stuck_after.as_millis() {
        return;
    }
    let series = (record.key.scope.tenant().to_owned(), endpoint.to_owned());
    *group.counting.entry(series).or_default() += 1;
    if let Some(after) = policies.abandon_after(endpoint) {
        let target = AbandonTarget {
            key: record.key.clone(),
            version: record.version,
            after,
        };
        if is_abandoned(record, &target, now) {
            targets.push(target);
        }
    }
}

/// Proposes `targets` in bounded `Abandon` commands; returns how many records apply
/// deleted.
async fn propose_abandon(
    backend: &dyn Backend,
    targets: Vec<AbandonTarget>,
    node_id: u64,
) -> Result<u64, RequestError> {
    let mut deleted = 0;
    for chunk in targets.chunks(MAX_ABANDON_BATCH) {
        let command = Command::Abandon(Audited::new(
            Abandon {
                targets: chunk.to_vec(),
            },
            format!("node:{node_id}"),
            ABANDON_REASON,
        ));
        match backend.propose(command).await {
            Ok(Outcome::Expired { operation_ids }) => deleted += operation_ids.len() as u64,
            Ok(_) => {
                return Err(RequestError::Internal(
                    "abandon: unexpected outcome from apply".into(),
                ))
            }
            // Leadership moved: the new leader's scan finds the records again.
            Err(RequestError::NotLeader { .. }) => break,
            Err(error) => return Err(error),
        }
    }
    if deleted > 0 {
        tracing::info!(deleted, "abandoned claims deleted (abandon_after)");
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use idem_core::command::{Claim, ExternalCall, Fenced, RecordExternalCall};
    use idem_core::fingerprint::Fingerprint;
    use idem_core::{Holder, IdempotencyKey, OperationId, Policy, RecordKey, Scope, Stage, State};

    use super::*;
    use crate::backend::memory::MemoryBackend;
    use crate::policy::EndpointPolicy;

    const IMPORTS: &str = "POST /v1/imports";
    const CHARGES: &str = "POST /v1/charges";

    fn target(tenant: &str, endpoint: &str, key: &str) -> RecordKey {
        RecordKey::new(
            Scope::new(tenant, "prod", "u", endpoint).unwrap(),
            IdempotencyKey::new(key).unwrap(),
        )
    }

    async fn claim(backend: &MemoryBackend, target: &RecordKey) {
        let claim = Command::Claim(Claim {
            target: target.clone(),
            fingerprints: vec![Fingerprint::new("jcs-sha256/v1", 1, vec![1; 32]).unwrap()],
            policy: Policy {
                lease: Duration::from_secs(30),
                ..Policy::default()
            },
            holder: Holder::new("w").unwrap(),
            operation_id: OperationId::generate(),
        });
        backend.propose(claim).await.unwrap();
    }

    async fn calling(backend: &MemoryBackend, target: &RecordKey) {
        let call = Command::RecordExternalCall(RecordExternalCall {
            owner: Fenced {
                target: target.clone(),
                fence: 1,
            },
            call: ExternalCall::Calling,
        });
        backend.propose(call).await.unwrap();
    }

    fn config(per_tick: usize) -> StuckConfig {
        let mut policies = Policies::default();
        policies.endpoints.insert(
            IMPORTS.into(),
            EndpointPolicy {
                stuck_after: Some(Duration::from_secs(60)),
                abandon_after: Some(Duration::from_secs(600)),
                ..EndpointPolicy::default()
            },
        );
        StuckConfig {
            interval: Duration::from_secs(10),
            per_tick,
            policies: Arc::new(policies),
            node_id: 7,
        }
    }

    /// Ticks until a pass ends; returns the ticks taken.
    async fn pass(scan: &mut StuckScan, backends: &[Arc<dyn Backend>], metrics: &Metrics) -> usize {
        let token = CancellationToken::new();
        for ticks in 1..100 {
            if scan.tick(backends, metrics, &token).await[0].pass_done {
                return ticks;
            }
        }
        panic!("no pass ended");
    }

    #[tokio::test]
    async fn reports_stuck_records_by_tenant_and_endpoint_in_bounded_ticks() {
        let backend = MemoryBackend::new();
        for i in 0..5 {
            claim(&backend, &target("acme", IMPORTS, &format!("i-{i}"))).await;
        }
        claim(&backend, &target("acme", CHARGES, "c-1")).await;
        claim(&backend, &target("beta", CHARGES, "c-2")).await;
        let backends: Vec<Arc<dyn Backend>> = vec![backend.clone()];
        let metrics = Metrics::new();
        let mut scan = StuckScan::new(config(2));

        // Nothing is idle long enough yet; 7 records at 2 per tick take 4 ticks.
        assert_eq!(pass(&mut scan, &backends, &metrics).await, 4);
        assert!(scan.totals().is_empty());

        // Past the imports' 60 s, short of the 15 min default of the charges.
        backend.advance(Duration::from_secs(61));
        pass(&mut scan, &backends, &metrics).await;
        let series = |t: &str, e: &str| (t.to_owned(), e.to_owned());
        assert_eq!(
            scan.totals(),
            BTreeMap::from([(series("acme", IMPORTS), 5)])
        );
        let text = metrics.render();
        assert!(
            text.contains(r#"idem_stuck_records{endpoint="POST /v1/imports",tenant="acme"} 5"#),
            "{text}"
        );

        backend.advance(Duration::from_secs(900));
        let mut scan = StuckScan::new(StuckConfig {
            policies: Arc::new(Policies::default()),
            ..config(100)
        });
        pass(&mut scan, &backends, &metrics).await;
        assert_eq!(
            scan.totals(),
            BTreeMap::from([
                (series("acme", CHARGES), 1),
                (series("acme", IMPORTS), 5),
                (series("beta", CHARGES), 1),
            ])
        );

        // A follower keeps no counts and clears what it published as leader.
        backend.not_leader.store(true, Ordering::SeqCst);
        pass(&mut scan, &backends, &metrics).await;
        assert!(scan.totals().is_empty());
        assert!(!metrics.render().contains("idem_stuck_records{"));
        assert_eq!(
            metrics.abandoned.get(),
            0,
            "abandon_after is off by default"
        );
    }

    #[tokio::test]
    async fn abandons_not_called_records_of_opted_in_endpoints_only() {
        let backend = MemoryBackend::new();
        let idle = target("acme", IMPORTS, "idle");
        let called = target("acme", IMPORTS, "called");
        let other = target("acme", CHARGES, "no-abandon-after");
        for key in [&idle, &called, &other] {
            claim(&backend, key).await;
        }
        calling(&backend, &called).await;
        let backends: Vec<Arc<dyn Backend>> = vec![backend.clone()];
        let metrics = Metrics::new();
        let mut scan = StuckScan::new(config(100));

        backend.advance(Duration::from_secs(599));
        pass(&mut scan, &backends, &metrics).await;
        assert_eq!(metrics.abandoned.get(), 0, "short of abandon_after");

        backend.advance(Duration::from_secs(1));
        pass(&mut scan, &backends, &metrics).await;
        assert_eq!(metrics.abandoned.get(), 1);
        assert!(backend.record(&idle).unwrap().is_none());
        let kept = backend.record(&called).unwrap().unwrap();
        assert_eq!(
            (kept.state, kept.stage),
            (State::InProgress, Stage::Calling)
        );
        assert!(backend.record(&other).unwrap().is_some());
        let audit = backend.audit(0, 0, 10).unwrap();
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].admin, "node:7");
        assert_eq!(audit[0].reason, ABANDON_REASON);
        assert_eq!(audit[0].action.kind(), "abandon");

        // The key starts fresh.
        claim(&backend, &idle).await;
        let fresh = backend.record(&idle).unwrap().unwrap();
        assert_eq!((fresh.fence, fresh.attempts), (1, 1));
    }
}
