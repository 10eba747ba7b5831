//! The reconciler against the payment example's fake provider and a real `idemd`: workers
//! that charged and died before `Complete` (a HIGH-risk one escalated to
//! NEEDS_RECONCILIATION, a NORMAL-risk one stuck at CALLING) end COMPLETED with the
//! provider's reference, one that died before charging ends RETRYABLE_FAILURE, a dry run
//! writes nothing, two reconcilers at once settle each record exactly once, and later
//! claims replay instead of charging again: the provider saw one charge per operation.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{claim, dying_worker, target, ENDPOINT, LEASE};
use idem_client::idem_core::{OperationId, Risk, Stage, State, StoredResult};
use idem_client::reconcile::{
    Action, CheckFuture, HttpCheck, HttpCheckConfig, Metrics, PassReport, Reconciler,
    ReconcilerOptions, Remote, RemoteCheck,
};
use idem_client::{ClaimOutcome, Client, ClientOptions};
use idem_tests::{Node, NodeOptions};
use payments::provider::Provider;
use payments::provider_client::ProviderClient;
use tokio::sync::Barrier;

/// Lets the checks of two reconcilers through only together, so both decide every record
/// from the same listing and race on the same version.
struct Lockstep {
    inner: HttpCheck,
    barrier: Barrier,
}

impl RemoteCheck for Lockstep {
    fn check<'a>(&'a self, operation_id: &'a OperationId) -> CheckFuture<'a> {
        Box::pin(async move {
            let met = tokio::time::timeout(Duration::from_secs(10), self.barrier.wait()).await;
            if met.is_err() {
                return Ok(Remote::Unknown {
                    why: "the other reconciler never asked".into(),
                });
            }
            self.inner.check(operation_id).await
        })
    }

    fn kind(&self) -> &'static str {
        "http"
    }
}

fn reconciler(idem: &Client, check: Arc<dyn RemoteCheck>, dry_run: bool) -> Reconciler {
    let options = ReconcilerOptions {
        tenant: Some("acme".into()),
        endpoint: Some(ENDPOINT.into()),
        stuck_after: Duration::from_millis(500),
        checks_per_second: 100.0,
        burst: 10,
        dry_run,
        completed_status: 201,
        ..ReconcilerOptions::default()
    };
    Reconciler::new(idem.clone(), check, options, Metrics::new()).unwrap()
}

fn action_of(report: &PassReport, id: OperationId) -> Vec<Action> {
    report
        .items
        .iter()
        .filter(|i| i.operation_id == id)
        .map(|i| i.action.clone())
        .collect()
}

/// The sum of every sample of `name` (all label values) in the reconciler's metrics text.
fn metric_sum(reconciler: &Reconciler, name: &str) -> f64 {
    reconciler
        .metrics()
        .render()
        .lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with([' ', '{']))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dead_workers_are_settled_once_without_a_second_charge() {
    let node = Node::start(NodeOptions::default());
    let provider = Arc::new(Provider::default());
    let base = format!("http://{}", common::listen(provider.clone().router()).await);
    let psp = ProviderClient::new(base.clone(), Duration::from_secs(5));
    let idem = Client::connect(vec![node.endpoint()], ClientOptions::default()).unwrap();

    // Three workers die after recording CALLING; two of them after the provider charged.
    let (high, high_fence) = dying_worker(&idem, &psp, "order-high", Risk::High, true).await;
    let (normal, _) = dying_worker(&idem, &psp, "order-normal", Risk::Normal, true).await;
    let (never, _) = dying_worker(&idem, &psp, "order-never", Risk::High, false).await;
    assert_eq!(provider.charges_made(), 2);
    tokio::time::sleep(LEASE + Duration::from_millis(400)).await;
    // A retry of the HIGH-risk key after the lease: nobody may guess, it escalates.
    let retry = idem.claim(claim("order-high", Risk::High)).await.unwrap();
    assert!(matches!(retry.outcome, ClaimOutcome::NeedsReconciliation));
    let before = idem.get(&target("order-high")).await.unwrap().record;
    assert_eq!(before.state, State::NeedsReconciliation);
    let stuck = idem.get(&target("order-normal")).await.unwrap().record;
    assert_eq!(
        (stuck.state, stuck.stage),
        (State::InProgress, Stage::Calling)
    );

    let http = |template: &str| {
        HttpCheck::new(HttpCheckConfig::new(format!("{base}{template}"), "/id")).unwrap()
    };

    // A dry run decides everything and writes nothing.
    let dry = reconciler(&idem, Arc::new(http("/charges/{operation_id}")), true);
    let report = dry.run_pass().await.unwrap();
    assert!(report.dry_run);
    assert_eq!(
        (report.counts.completed, report.counts.retryable_failure),
        (2, 1),
        "{report:?}"
    );
    assert_eq!(
        action_of(&report, high),
        [Action::Settled(State::Completed)]
    );
    assert_eq!(
        action_of(&report, never),
        [Action::Settled(State::RetryableFailure)]
    );
    for (key, version) in [
        ("order-high", before.version),
        ("order-normal", stuck.version),
    ] {
        assert_eq!(
            idem.get(&target(key)).await.unwrap().record.version,
            version
        );
    }

    // Two reconcilers at once, in lockstep: each record settled by one, refused to the other.
    let lockstep = Arc::new(Lockstep {
        inner: http("/charges/{operation_id}"),
        barrier: Barrier::new(2),
    });
    let first = reconciler(&idem, lockstep.clone(), false);
    let second = reconciler(&idem, lockstep, false);
    let (a, b) = tokio::join!(first.run_pass(), second.run_pass());
    let (a, b) = (a.unwrap(), b.unwrap());
    for id in [high, normal, never] {
        let mut actions = action_of(&a, id);
        actions.extend(action_of(&b, id));
        let settled = actions
            .iter()
            .filter(|x| matches!(x, Action::Settled(_)))
            .count();
        assert_eq!(settled, 1, "{id}: {actions:?}");
        assert!(actions.contains(&Action::Conflict), "{id}: {actions:?}");
    }
    assert_eq!(a.counts.conflicts + b.counts.conflicts, 3);
    let metric = |name: &str| metric_sum(&first, name) + metric_sum(&second, name);
    assert_eq!(metric("idem_reconciler_settled_total"), 3.0);
    assert_eq!(metric("idem_reconciler_conflicts_total"), 3.0);
    assert_eq!(metric("idem_reconciler_check_seconds_count"), 6.0);

    // The records: the provider's references, and the revoked worker cannot write any more.
    for (key, reference) in [("order-high", "psp_1"), ("order-normal", "psp_2")] {
        let record = idem.get(&target(key)).await.unwrap().record;
        assert_eq!(record.state, State::Completed, "{key}");
        let result = record.result.unwrap();
        assert_eq!((result.status_code, &*result.resource_id), (201, reference));
    }
    let never_record = idem.get(&target("order-never")).await.unwrap().record;
    assert_eq!(never_record.state, State::RetryableFailure);
    let late_result = StoredResult {
        status_code: 201,
        resource_id: "psp_1".into(),
        ..StoredResult::default()
    };
    let late = idem
        .complete(&target("order-high"), high_fence, &late_result)
        .await
        .unwrap_err();
    assert_eq!(late.reason(), "STALE_FENCE");

    // Later claims replay the charges; the never-charged one is taken over and charged once.
    for key in ["order-high", "order-normal"] {
        let replay = idem.claim(claim(key, Risk::High)).await.unwrap();
        assert!(
            matches!(replay.outcome, ClaimOutcome::Completed { .. }),
            "{key}"
        );
    }
    let takeover = idem.claim(claim("order-never", Risk::High)).await.unwrap();
    let ClaimOutcome::TakenOver { fence, .. } = takeover.outcome else {
        panic!("not taken over: {:?}", takeover.outcome);
    };
    assert_eq!(psp.find(&never.to_string()).await.unwrap(), None);
    let charge = psp.charge(&never.to_string(), 1000, "EUR").await.unwrap();
    let result = StoredResult {
        status_code: 201,
        resource_id: charge.id,
        ..StoredResult::default()
    };
    idem.complete(&target("order-never"), fence, &result)
        .await
        .unwrap();
    assert_eq!(provider.charges_made(), 3, "one charge per operation");

    // Nothing is left to do.
    let again = reconciler(&idem, Arc::new(http("/charges/{operation_id}")), false);
    assert_eq!(again.run_pass().await.unwrap().counts.scanned, 0);
}
