//! Service-level tests over the in-memory backend: what each RPC answers and exposes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use idem_core::Risk;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_server::Admin;
use idem_proto::v1::idempotency_server::Idempotency;
use idem_proto::{reason, status};
use tonic::{Code, Request, Status};

use super::testing::{claim_req, complete_req, context, fingerprint, scope};
use super::{AdminService, IdempotencyService};
use crate::backend::memory::MemoryBackend;
use crate::policy::{EndpointPolicy, Policies};

struct Harness {
    backend: Arc<MemoryBackend>,
    api: IdempotencyService,
    admin: AdminService,
    ctx: Arc<super::ApiContext>,
}

fn harness() -> Harness {
    harness_with(Policies::default())
}

fn harness_with(policies: Policies) -> Harness {
    let backend = MemoryBackend::new();
    let ctx = context(Arc::clone(&backend), policies);
    Harness {
        backend,
        api: IdempotencyService::new(Arc::clone(&ctx)),
        admin: AdminService::new(Arc::clone(&ctx)),
        ctx,
    }
}

fn reason_of(status: &Status) -> String {
    status::reason_of(status).unwrap_or_default()
}

impl Harness {
    async fn claim(&self, req: pb::ClaimRequest) -> Result<pb::ClaimResponse, Status> {
        self.api
            .claim(Request::new(req))
            .await
            .map(tonic::Response::into_inner)
    }

    async fn complete(&self, key: &str, fence: u64) -> Result<pb::Record, Status> {
        let req = complete_req(key, fence);
        self.api
            .complete(Request::new(req))
            .await
            .map(|r| r.into_inner().record.unwrap())
    }

    async fn get(&self, key: &str) -> Result<pb::GetResponse, Status> {
        let req = pb::GetRequest {
            scope: Some(scope()),
            key: key.into(),
        };
        self.api
            .get(Request::new(req))
            .await
            .map(|r| r.into_inner())
    }

    fn counter(&self, name: &str) -> String {
        self.ctx
            .metrics
            .render()
            .lines()
            .filter(|l| l.starts_with(name))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[tokio::test]
async fn claim_complete_replay_mismatch() {
    let h = harness();
    let first = h.claim(claim_req("order-1", "w-1", 1)).await.unwrap();
    assert_eq!(first.outcome(), pb::ClaimOutcome::Acquired);
    assert_eq!(first.fence, 1);
    assert_eq!(first.state(), pb::State::Pending);
    assert!(first.lease_expires_at_ms > 0);
    assert!(!first.operation_id.is_empty());

    // Another holder while the lease is live: no fence, a retry hint.
    let busy = h.claim(claim_req("order-1", "w-2", 1)).await.unwrap();
    assert_eq!(busy.outcome(), pb::ClaimOutcome::InProgress);
    assert_eq!(busy.fence, 0);
    assert_eq!(busy.retry_after_ms, 30_000);
    assert_eq!(busy.lease_expires_at_ms, first.lease_expires_at_ms);
    assert_eq!(busy.operation_id, first.operation_id);

    // The same holder re-sending gets its ownership back.
    let again = h.claim(claim_req("order-1", "w-1", 1)).await.unwrap();
    assert_eq!(again.outcome(), pb::ClaimOutcome::Acquired);
    assert!(again.redelivered);
    assert_eq!(again.fence, 1);

    let record = h.complete("order-1", 1).await.unwrap();
    assert_eq!(record.state(), pb::State::Completed);
    assert!(record.expires_at_ms > 0);

    let replay = h.claim(claim_req("order-1", "w-3", 1)).await.unwrap();
    assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);
    assert_eq!(replay.fence, 0);
    assert_eq!(replay.result.as_ref().unwrap().resource_id, "ch_1");
    assert_eq!(replay.operation_id, first.operation_id);

    let mismatch = h.claim(claim_req("order-1", "w-4", 2)).await.unwrap();
    assert_eq!(mismatch.outcome(), pb::ClaimOutcome::FingerprintMismatch);
    assert!(mismatch.result.is_none() && mismatch.error.is_none());
    assert_eq!(mismatch.fence, 0);

    let mut other_algorithm = claim_req("order-1", "w-5", 1);
    other_algorithm.fingerprints[0].algorithm = "blake3/v1".into();
    let unverifiable = h.claim(other_algorithm).await.unwrap();
    assert_eq!(
        unverifiable.outcome(),
        pb::ClaimOutcome::FingerprintUnverifiable
    );
    assert_eq!(unverifiable.required_algorithm, "jcs-sha256/v1");
    assert!(unverifiable.result.is_none());

    let claims = h.counter("idem_claims_total");
    assert!(claims.contains("outcome=\"ACQUIRED\"} 2"), "{claims}");
    assert!(claims.contains("outcome=\"COMPLETED\"} 1"), "{claims}");
    assert!(
        claims.contains("outcome=\"FINGERPRINT_MISMATCH\"} 1"),
        "{claims}"
    );
}

#[tokio::test]
async fn claims_validate_their_input() {
    let h = harness();
    let err = h.claim(claim_req("order-1", "", 1)).await.unwrap_err();
    assert_eq!(
        (err.code(), reason_of(&err).as_str()),
        (Code::InvalidArgument, reason::INVALID_ARGUMENT)
    );
    assert!(err.message().contains("holder"));

    let err = h.claim(claim_req("bad key!", "w", 1)).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_KEY);

    let mut none = claim_req("k", "w", 1);
    none.fingerprints.clear();
    let err = h.claim(none).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_FINGERPRINT);

    let mut both = claim_req("k", "w", 1);
    both.request = Some(pb::CanonicalRequest {
        method: "POST".into(),
        route: "/v1/charges".into(),
        ..Default::default()
    });
    let err = h.claim(both).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_FINGERPRINT);

    let mut five = claim_req("k", "w", 1);
    five.fingerprints = (0..5)
        .map(|i| pb::Fingerprint {
            algorithm: format!("algo-{i}"),
            ..fingerprint(1)
        })
        .collect();
    let err = h.claim(five).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_FINGERPRINT);

    let mut lease = claim_req("k", "w", 1);
    lease.lease_ms = Some(10);
    let err = h.claim(lease).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_POLICY);

    let mut no_scope = claim_req("k", "w", 1);
    no_scope.scope = None;
    let err = h.claim(no_scope).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_SCOPE);

    let errors = h.counter("idem_rpc_errors_total");
    assert!(
        errors.contains("reason=\"INVALID_FINGERPRINT\"} 3"),
        "{errors}"
    );
}

fn canonical(body: &str) -> pb::CanonicalRequest {
    pb::CanonicalRequest {
        method: "POST".into(),
        route: "/v1/charges".into(),
        body_json: Some(body.as_bytes().to_vec()),
        schema_version: 1,
        ..Default::default()
    }
}

#[tokio::test]
async fn server_side_fingerprints() {
    let h = harness();
    let mut req = claim_req("order-9", "w-1", 0);
    req.fingerprints.clear();
    req.request = Some(canonical(r#"{"amount": 100, "currency": "EUR"}"#));
    let first = h.claim(req.clone()).await.unwrap();
    assert_eq!(first.outcome(), pb::ClaimOutcome::Acquired);

    // Same data, other spelling: the same request.
    let mut same = req.clone();
    same.holder = "w-2".into();
    same.request = Some(canonical(r#"{ "currency":"EUR","amount":1.0e2 }"#));
    let busy = h.claim(same).await.unwrap();
    assert_eq!(busy.outcome(), pb::ClaimOutcome::InProgress);

    let mut other = req.clone();
    other.request = Some(canonical(r#"{"amount": 101, "currency": "EUR"}"#));
    let mismatch = h.claim(other).await.unwrap();
    assert_eq!(mismatch.outcome(), pb::ClaimOutcome::FingerprintMismatch);

    let mut not_json = req.clone();
    not_json.request = Some(canonical("{amount: 1}"));
    let err = h.claim(not_json).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_FINGERPRINT);
    assert!(err.message().contains("line 1"), "{}", err.message());

    let mut big = req;
    big.request = Some(canonical(&format!("\"{}\"", "x".repeat(2000))));
    let err = h.claim(big).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::BODY_TOO_LARGE);
}

#[tokio::test]
async fn takeover_and_stale_fence() {
    let h = harness();
    let first = h.claim(claim_req("order-2", "w-1", 1)).await.unwrap();
    let start = pb::StartRequest {
        scope: Some(scope()),
        key: "order-2".into(),
        fence: first.fence,
    };
    h.api.start(Request::new(start)).await.unwrap();
    let call = pb::RecordExternalCallRequest {
        scope: Some(scope()),
        key: "order-2".into(),
        fence: first.fence,
        stage: pb::ExternalCallStage::Calling.into(),
        remote_ref: String::new(),
    };
    h.api
        .record_external_call(Request::new(call))
        .await
        .unwrap();

    h.backend.advance(Duration::from_secs(31));
    let taken = h.claim(claim_req("order-2", "w-2", 1)).await.unwrap();
    assert_eq!(taken.outcome(), pb::ClaimOutcome::TakenOver);
    assert_eq!(taken.fence, 2);
    assert_eq!(taken.attempts, 2);
    assert_eq!(taken.previous_stage(), pb::Stage::Calling);

    let err = h.complete("order-2", 1).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason_of(&err), reason::STALE_FENCE);

    assert!(h.counter("idem_stale_fences_total").ends_with(" 1"));
    assert!(h
        .counter("idem_takeovers_total")
        .contains("previous_stage=\"CALLING\"} 1"));
    assert!(h
        .counter("idem_lease_expiries_total")
        .contains("result=\"taken_over\"} 1"));
}

#[tokio::test]
async fn high_risk_endpoint_policy_escalates_instead_of_taking_over() {
    let mut policies = Policies::default();
    policies.endpoints.insert(
        "POST /v1/charges".into(),
        EndpointPolicy {
            risk: Some(Risk::High),
            ..EndpointPolicy::default()
        },
    );
    let h = harness_with(policies);
    let mut req = claim_req("order-3", "w-1", 1);
    req.risk = pb::Risk::Low.into();
    let first = h.claim(req).await.unwrap();
    let call = pb::RecordExternalCallRequest {
        scope: Some(scope()),
        key: "order-3".into(),
        fence: first.fence,
        stage: pb::ExternalCallStage::Calling.into(),
        remote_ref: String::new(),
    };
    h.api
        .record_external_call(Request::new(call))
        .await
        .unwrap();
    let got = h.get("order-3").await.unwrap();
    assert_eq!(
        got.record.unwrap().risk(),
        pb::Risk::High,
        "LOW cannot lower HIGH"
    );

    h.backend.advance(Duration::from_secs(31));
    assert_eq!(
        h.get("order-3").await.unwrap().outcome(),
        pb::ClaimOutcome::NeedsReconciliation
    );
    let escalated = h.claim(claim_req("order-3", "w-2", 1)).await.unwrap();
    assert_eq!(escalated.outcome(), pb::ClaimOutcome::NeedsReconciliation);
    assert_eq!(escalated.state(), pb::State::NeedsReconciliation);
    assert_eq!(escalated.fence, 0);
    assert!(h
        .counter("idem_lease_expiries_total")
        .contains("result=\"needs_reconciliation\"} 1"));

    // The operator decides.
    let record = h.get("order-3").await.unwrap().record.unwrap();
    let reconcile = pb::ReconcileRequest {
        operation_id: record.operation_id.clone(),
        expected_version: record.version,
        target: pb::State::Completed.into(),
        result: Some(pb::StoredResult {
            status_code: 201,
            resource_id: "ch_remote".into(),
            ..Default::default()
        }),
        reason: "checked with the PSP: charge exists".into(),
        ..Default::default()
    };
    let err = h
        .admin
        .reconcile(Request::new(pb::ReconcileRequest {
            expected_version: record.version + 1,
            ..reconcile.clone()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Aborted);
    assert_eq!(reason_of(&err), reason::VERSION_MISMATCH);
    let done = h
        .admin
        .reconcile(Request::new(reconcile))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(done.state(), pb::State::Completed);
    let replay = h.claim(claim_req("order-3", "w-3", 1)).await.unwrap();
    assert_eq!(replay.result.unwrap().resource_id, "ch_remote");
}

#[tokio::test]
async fn weak_keys_are_claimed_with_warnings() {
    let h = harness();
    let first = h.claim(claim_req("order-1", "w-1", 1)).await.unwrap();
    assert_eq!(first.outcome(), pb::ClaimOutcome::Acquired, "never refused");
    let both = [
        pb::KeyWarning::Sequential as i32,
        pb::KeyWarning::Short as i32,
    ];
    assert_eq!(first.warnings, both);
    h.complete("order-1", 1).await.unwrap();
    let replay = h.claim(claim_req("order-1", "w-2", 1)).await.unwrap();
    assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);
    assert_eq!(replay.warnings, both, "replays warn too");
    let stamp = h.claim(claim_req("1764787207123", "w-1", 1)).await.unwrap();
    assert_eq!(
        stamp.warnings,
        [
            pb::KeyWarning::Timestamp as i32,
            pb::KeyWarning::Short as i32
        ]
    );
    let random = "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d";
    let good = h.claim(claim_req(random, "w-1", 1)).await.unwrap();
    assert!(good.warnings.is_empty());
    let counted = h.counter("idem_key_warnings_total");
    for (warning, n) in [("sequential", 2), ("short", 3), ("timestamp", 1)] {
        let line = format!("idem_key_warnings_total{{tenant=\"acme\",warning=\"{warning}\"}} {n}");
        assert!(counted.contains(&line), "{counted}");
    }
    assert!(!counted.contains("low_entropy"), "{counted}");
}

#[tokio::test]
async fn reconcile_cancels_a_calling_record() {
    let h = harness();
    let first = h.claim(claim_req("order-9", "w-1", 1)).await.unwrap();
    let call = |stage: pb::ExternalCallStage, remote_ref: &str| pb::RecordExternalCallRequest {
        scope: Some(scope()),
        key: "order-9".into(),
        fence: first.fence,
        stage: stage.into(),
        remote_ref: remote_ref.into(),
    };
    let calling = call(pb::ExternalCallStage::Calling, "");
    h.api
        .record_external_call(Request::new(calling))
        .await
        .unwrap();
    let record = h.get("order-9").await.unwrap().record.unwrap();
    let cancel = pb::ReconcileRequest {
        operation_id: record.operation_id.clone(),
        expected_version: record.version,
        target: pb::State::Cancelled.into(),
        reason: "the PSP has no charge with this key".into(),
        ..Default::default()
    };
    let done = h.admin.reconcile(Request::new(cancel)).await.unwrap();
    assert_eq!(
        done.into_inner().record.unwrap().state(),
        pb::State::Cancelled
    );
    let replay = h.claim(claim_req("order-9", "w-2", 1)).await.unwrap();
    assert_eq!(
        (replay.outcome(), replay.state()),
        (pb::ClaimOutcome::Failed, pb::State::Cancelled)
    );
    assert!(replay.error.is_none());

    // A confirmed call contradicts "nothing happened".
    let other = h.claim(claim_req("order-10", "w-1", 1)).await.unwrap();
    for (stage, remote_ref) in [
        (pb::ExternalCallStage::Calling, ""),
        (pb::ExternalCallStage::RemoteConfirmed, "ch_1"),
    ] {
        let req = pb::RecordExternalCallRequest {
            key: "order-10".into(),
            fence: other.fence,
            ..call(stage, remote_ref)
        };
        h.api.record_external_call(Request::new(req)).await.unwrap();
    }
    let record = h.get("order-10").await.unwrap().record.unwrap();
    let refused = pb::ReconcileRequest {
        operation_id: record.operation_id.clone(),
        expected_version: record.version,
        target: pb::State::Cancelled.into(),
        reason: "wrong".into(),
        ..Default::default()
    };
    let err = h.admin.reconcile(Request::new(refused)).await.unwrap_err();
    assert_eq!(
        (err.code(), reason_of(&err).as_str()),
        (Code::FailedPrecondition, reason::IRREVERSIBLE_STAGE)
    );
}

#[tokio::test]
async fn reads_and_not_found() {
    let h = harness();
    let err = h.get("missing").await.unwrap_err();
    assert_eq!(
        (err.code(), reason_of(&err).as_str()),
        (Code::NotFound, reason::NOT_FOUND)
    );
    let first = h.claim(claim_req("order-4", "w-1", 1)).await.unwrap();
    let got = h.get("order-4").await.unwrap();
    assert_eq!(got.outcome(), pb::ClaimOutcome::InProgress);
    assert_eq!(got.record.as_ref().unwrap().fence, 1);

    let by_id = h
        .api
        .get_operation(Request::new(pb::GetOperationRequest {
            operation_id: first.operation_id.clone(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_id.record, got.record);

    h.backend.advance(Duration::from_secs(31));
    assert_eq!(
        h.get("order-4").await.unwrap().outcome(),
        pb::ClaimOutcome::TakenOver
    );
    let err = h
        .api
        .get_operation(Request::new(pb::GetOperationRequest {
            operation_id: "not-a-uuid".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_ARGUMENT);
}

#[tokio::test]
async fn timeouts_and_leader_loss_are_unavailable() {
    let h = harness();
    h.backend.lose_replies.store(true, Ordering::SeqCst);
    let err = h.claim(claim_req("order-5", "w-1", 1)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(reason_of(&err), reason::UNAVAILABLE_OUTCOME_UNKNOWN);
    // The write landed: the same holder's retry gets ownership back.
    h.backend.lose_replies.store(false, Ordering::SeqCst);
    let retry = h.claim(claim_req("order-5", "w-1", 1)).await.unwrap();
    assert!(retry.redelivered);
    assert_eq!(retry.outcome(), pb::ClaimOutcome::Acquired);

    h.backend.not_leader.store(true, Ordering::SeqCst);
    let err = h.get("order-5").await.unwrap_err();
    assert_eq!(reason_of(&err), reason::NOT_LEADER);
    assert_eq!(
        status::leader_hint(&err),
        (Some(2), Some("127.0.0.2:7400".to_owned()))
    );
}

#[tokio::test]
async fn wait_returns_when_the_record_settles() {
    let h = Arc::new(harness());
    let first = h.claim(claim_req("order-6", "w-1", 1)).await.unwrap();
    let waiter = {
        let h = Arc::clone(&h);
        tokio::spawn(async move {
            h.api
                .wait(Request::new(pb::WaitRequest {
                    scope: Some(scope()),
                    key: "order-6".into(),
                    timeout_ms: 10_000,
                    ..Default::default()
                }))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    h.complete("order-6", first.fence).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("wait ends on completion")
        .unwrap()
        .unwrap()
        .into_inner();
    assert!(done.terminal);
    assert_eq!(done.outcome(), pb::ClaimOutcome::Completed);

    // A lease running out also ends the wait (not terminal).
    h.claim(claim_req("order-7", "w-1", 1)).await.unwrap();
    let waiter = {
        let h = Arc::clone(&h);
        tokio::spawn(async move {
            h.api
                .wait(Request::new(pb::WaitRequest {
                    scope: Some(scope()),
                    key: "order-7".into(),
                    ..Default::default()
                }))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.backend.advance(Duration::from_secs(31));
    let expired = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("wait ends at lease expiry")
        .unwrap()
        .unwrap()
        .into_inner();
    assert!(!expired.terminal);
    assert_eq!(expired.outcome(), pb::ClaimOutcome::TakenOver);
}

#[tokio::test]
async fn wait_honours_its_budget_and_validates_its_target() {
    let h = harness();
    h.claim(claim_req("order-8", "w-1", 1)).await.unwrap();
    let started = std::time::Instant::now();
    let out = h
        .api
        .wait(Request::new(pb::WaitRequest {
            scope: Some(scope()),
            key: "order-8".into(),
            timeout_ms: 150,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.outcome(), pb::ClaimOutcome::InProgress);

    let both = pb::WaitRequest {
        scope: Some(scope()),
        key: "order-8".into(),
        operation_id: out.record.unwrap().operation_id,
        ..Default::default()
    };
    let err = h.api.wait(Request::new(both)).await.unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_ARGUMENT);
    let err = h
        .api
        .wait(Request::new(pb::WaitRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(reason_of(&err), reason::INVALID_ARGUMENT);

    // Shutdown ends a wait at once.
    h.ctx.shutdown.cancel();
    let started = std::time::Instant::now();
    h.api
        .wait(Request::new(pb::WaitRequest {
            scope: Some(scope()),
            key: "order-8".into(),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn list_operations_filters_and_paginates() {
    let h = harness();
    for i in 0..7 {
        let claim = h.claim(claim_req(&format!("k-{i}"), "w", 1)).await.unwrap();
        if i % 2 == 0 {
            h.complete(&format!("k-{i}"), claim.fence).await.unwrap();
        }
    }
    let list = |req: pb::ListOperationsRequest| async {
        h.admin
            .list_operations(Request::new(req))
            .await
            .unwrap()
            .into_inner()
    };
    let pending = list(pb::ListOperationsRequest {
        states: vec![pb::State::Pending.into()],
        ..Default::default()
    })
    .await;
    assert_eq!(pending.records.len(), 3);
    assert!(pending.next_page_token.is_empty());

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = list(pb::ListOperationsRequest {
            limit: 2,
            page_token: token.clone(),
            tenant: "acme".into(),
            ..Default::default()
        })
        .await;
        seen.extend(page.records.into_iter().map(|r| r.key));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    seen.sort();
    assert_eq!(seen, (0..7).map(|i| format!("k-{i}")).collect::<Vec<_>>());

    let none = list(pb::ListOperationsRequest {
        tenant: "other".into(),
        ..Default::default()
    })
    .await;
    assert!(none.records.is_empty());

    h.backend.advance(Duration::from_secs(60));
    let old = list(pb::ListOperationsRequest {
        older_than_ms: 30_000,
        states: vec![pb::State::Completed.into()],
        ..Default::default()
    })
    .await;
    assert_eq!(old.records.len(), 4);
    let fresh = list(pb::ListOperationsRequest {
        older_than_ms: 120_000,
        ..Default::default()
    })
    .await;
    assert!(fresh.records.is_empty());
}

#[tokio::test]
async fn purge_and_status() {
    let h = harness();
    for i in 0..3 {
        let claim = h.claim(claim_req(&format!("p-{i}"), "w", 1)).await.unwrap();
        h.complete(&format!("p-{i}"), claim.fence).await.unwrap();
    }
    let purge = pb::PurgeSubjectRequest {
        tenant: "acme".into(),
        actor: "user-42".into(),
        reason: "GDPR request 17".into(),
        operator: String::new(),
    };
    let purged = h
        .admin
        .purge_subject(Request::new(purge.clone()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(purged.records_scrubbed, 3);
    let again = h
        .admin
        .purge_subject(Request::new(purge))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.records_scrubbed, 0);
    let replay = h.claim(claim_req("p-0", "w-2", 1)).await.unwrap();
    let result = replay.result.unwrap();
    assert!(result.purged && result.fields.is_empty());
    assert_eq!(
        result.resource_id, "ch_1",
        "the tombstone keeps the resource"
    );

    let err = h
        .admin
        .purge_subject(Request::new(pb::PurgeSubjectRequest {
            tenant: "acme".into(),
            actor: "user-42".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(
        reason_of(&err),
        reason::INVALID_ARGUMENT,
        "reason is required"
    );

    h.claim(claim_req("p-open", "w", 1)).await.unwrap();
    h.backend.advance(Duration::from_secs(5));
    let status = h
        .admin
        .status(Request::new(pb::StatusRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.node_id, 1);
    assert_eq!(status.leader_id, 1);
    assert_eq!(status.version, crate::VERSION);
    assert_eq!(status.records_by_state.get("STATE_COMPLETED"), Some(&3));
    assert_eq!(status.records_by_state.get("STATE_PENDING"), Some(&1));
    assert_eq!(status.oldest_pending_age_ms, 5000);
    assert_eq!(
        (status.region.as_str(), status.zone.as_str()),
        ("local", "local-a")
    );
}
