//! One function per rule of docs/design.md §2, each on a fresh store.
//!
//! Scenario names say the rule they prove. Each transition of the state diagram and each
//! claim outcome appears in at least one scenario.

use std::time::Duration;

use super::harness::{rejected, updated, Harness, BODY_A, BODY_B};
use crate::audit::AuditAction;
use crate::command::{Claim, Command, Expire, PurgeSubject, Reconcile, ReconcileTarget};
use crate::fingerprint::Fingerprint;
use crate::outcome::{ClaimKind, Outcome};
use crate::policy::Risk;
use crate::record::{Record, Stage, State, StoredResult};
use crate::store::{Overlay, StateStore};
use crate::time::Timestamp;

const LEASE: Duration = Duration::from_secs(30);
const PAST_LEASE: Duration = Duration::from_secs(31);

/// First claim: ACQUIRED, PENDING, fence 1, version 1, one attempt, lease for the holder.
pub fn first_claim_acquires<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let out = h.claim_expect(&key, BODY_A, "w1", ClaimKind::Acquired);
    let r = &out.record;
    assert_eq!(
        (r.state, r.stage, r.fence, r.version, r.attempts),
        (State::Pending, Stage::NotCalled, 1, 1, 1)
    );
    let lease = r.lease.as_ref().unwrap();
    assert_eq!(lease.holder.as_str(), "w1");
    assert_eq!(lease.expires_at, Timestamp(h.now).plus(LEASE));
    assert_eq!(h.record(&key).unwrap(), out.record);
    assert!(!out.redelivered);
}

/// A live lease held by someone else: IN_PROGRESS with retry-after; nothing changes.
pub fn concurrent_claim_sees_in_progress<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let first = h.claim(&key, BODY_A, "w1");
    h.advance(Duration::from_secs(10));
    let second = h.claim_expect(&key, BODY_A, "w2", ClaimKind::InProgress);
    assert_eq!(second.retry_after, Some(Duration::from_secs(20)));
    assert_eq!(second.record, first.record);
    assert_eq!(h.record(&key).unwrap(), first.record);
}

/// A claim re-sent by the same holder while its lease is live returns its ownership.
pub fn same_holder_gets_ownership_back<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let first = h.claim(&key, BODY_A, "w1");
    let again = h.claim_expect(&key, BODY_A, "w1", ClaimKind::Acquired);
    assert!(again.redelivered);
    assert_eq!(again.record, first.record);
    // After a takeover, the taker's redelivery reports TAKEN_OVER and the previous stage.
    h.advance(PAST_LEASE);
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    let redo = h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    assert!(redo.redelivered);
    assert_eq!(redo.previous_stage, Some(Stage::NotCalled));
    assert_eq!(redo.record.fence, 2);
}

/// PENDING --start--> IN_PROGRESS; a repeated start changes nothing.
pub fn start_moves_to_in_progress<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let r = updated(h.start(&key, fence));
    assert_eq!((r.state, r.version), (State::InProgress, 2));
    let again = updated(h.start(&key, fence));
    assert_eq!(again, r);
}

/// IN_PROGRESS --complete--> COMPLETED; every later matching claim replays the result.
pub fn complete_is_replayed<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.start(&key, fence);
    let done = updated(h.complete(&key, fence, Harness::<S>::result("ch_1")));
    assert_eq!(
        (done.state, done.stage),
        (State::Completed, Stage::LocalDone)
    );
    assert!(done.lease.is_none());
    assert_eq!(done.completed_at, Some(Timestamp(h.now)));
    assert_eq!(
        done.expires_at,
        Some(Timestamp(h.now).plus(h.policy.retention))
    );
    for holder in ["w1", "w2", "w3"] {
        h.advance(Duration::from_secs(3600));
        let replay = h.claim_expect(&key, BODY_A, holder, ClaimKind::Completed);
        assert_eq!(replay.record.result, Some(Harness::<S>::result("ch_1")));
        assert_eq!(replay.record, done);
    }
}

/// Same scope and key, different request: FINGERPRINT_MISMATCH in every state, and the
/// record never changes.
pub fn mismatch_never_mutates<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let before = h.record(&key).unwrap();
    h.claim_expect(&key, BODY_B, "w2", ClaimKind::FingerprintMismatch);
    h.advance(PAST_LEASE);
    h.claim_expect(&key, BODY_B, "w2", ClaimKind::FingerprintMismatch);
    assert_eq!(
        h.record(&key).unwrap(),
        before,
        "an expired lease is not taken by a mismatch"
    );
    h.complete(&key, fence, Harness::<S>::result("ch_1"));
    let done = h.record(&key).unwrap();
    h.claim_expect(&key, BODY_B, "w3", ClaimKind::FingerprintMismatch);
    assert_eq!(h.record(&key).unwrap(), done);
}

/// A claim without a fingerprint of the stored algorithm and schema version is
/// FINGERPRINT_UNVERIFIABLE, never a new request; carrying it among others matches.
pub fn unverifiable_without_stored_algorithm<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    h.acquire(&key, "w1");
    let before = h.record(&key).unwrap();
    let other = |algorithm: &str, schema_version, body| Fingerprint {
        algorithm: algorithm.into(),
        schema_version,
        digest: vec![body; 32],
    };
    for fingerprints in [
        vec![other("jcs-sha512/v2", 1, BODY_A)],
        vec![other("jcs-sha256/v1", 2, BODY_A)],
    ] {
        let out = claim_with(&mut h, &key, fingerprints, "w2");
        assert_eq!(out, ClaimKind::FingerprintUnverifiable);
    }
    assert_eq!(h.record(&key).unwrap(), before);
    let both = vec![
        other("jcs-sha512/v2", 1, BODY_B),
        Harness::<S>::fingerprint(BODY_A),
    ];
    assert_eq!(claim_with(&mut h, &key, both, "w2"), ClaimKind::InProgress);
}

fn claim_with<S: StateStore>(
    h: &mut Harness<S>,
    key: &crate::record::RecordKey,
    fingerprints: Vec<Fingerprint>,
    holder: &str,
) -> ClaimKind {
    let Command::Claim(mut claim) = h.claim_command(key, BODY_A, holder) else {
        unreachable!()
    };
    claim.fingerprints = fingerprints;
    match h.apply(Command::Claim(claim)) {
        Outcome::Claim(out) => out.kind,
        other => panic!("{other:?}"),
    }
}

/// An expired lease is taken over with a new fence; the late worker gets STALE_FENCE and
/// the taker's result wins.
pub fn takeover_after_lease_expiry_fences_old_worker<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let old = h.acquire(&key, "w1");
    h.start(&key, old);
    h.advance(PAST_LEASE);
    let taken = h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    assert_eq!(taken.previous_stage, Some(Stage::NotCalled));
    let r = &taken.record;
    assert_eq!((r.state, r.fence, r.attempts), (State::Pending, old + 1, 2));
    assert_eq!(r.operation_id, h.record(&key).unwrap().operation_id);
    rejected(
        h.complete(&key, old, Harness::<S>::result("late")),
        "STALE_FENCE",
    );
    updated(h.complete(&key, old + 1, Harness::<S>::result("taker")));
    let replay = h.claim_expect(&key, BODY_A, "w3", ClaimKind::Completed);
    assert_eq!(replay.record.result.unwrap().resource_id, "taker");
}

/// NORMAL risk, call in flight, lease expired: taken over, the taker told CALLING.
pub fn takeover_reports_calling_stage<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.calling(&key, fence);
    h.advance(PAST_LEASE);
    let taken = h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    assert_eq!(taken.previous_stage, Some(Stage::Calling));
    assert_eq!(
        taken.record.stage,
        Stage::Calling,
        "the ledger is kept for the taker"
    );
}

/// A taker told REMOTE_CONFIRMED confirms the same reference again (it found the charge at
/// the downstream) and completes; a different reference is refused, the first one kept.
pub fn taker_reconfirms_the_known_reference<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.calling(&key, fence);
    updated(h.confirmed(&key, fence, "pi_123"));
    h.advance(PAST_LEASE);
    let taken = h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    assert_eq!(taken.previous_stage, Some(Stage::RemoteConfirmed));
    let fence = taken.record.fence;
    rejected(h.confirmed(&key, fence, "pi_other"), "WRONG_STATE");
    let again = updated(h.confirmed(&key, fence, "pi_123"));
    assert_eq!(
        (again.state, again.stage, again.remote_ref.as_deref()),
        (State::InProgress, Stage::RemoteConfirmed, Some("pi_123"))
    );
    rejected(h.calling(&key, fence), "WRONG_STATE");
    let done = updated(h.complete(&key, fence, Harness::<S>::result("ch")));
    assert_eq!(done.stage, Stage::LocalDone);
}

/// HIGH risk, call in flight, lease expired: NEEDS_RECONCILIATION, never a takeover.
pub fn high_risk_calling_needs_reconciliation<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    h.policy.risk = Risk::High;
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.calling(&key, fence);
    h.advance(Duration::from_secs(10));
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::InProgress);
    h.advance(PAST_LEASE);
    let out = h.claim_expect(&key, BODY_A, "w2", ClaimKind::NeedsReconciliation);
    assert_eq!(
        (out.record.state, out.record.fence),
        (State::NeedsReconciliation, fence)
    );
    assert!(out.record.lease.is_none());
    h.claim_expect(&key, BODY_A, "w3", ClaimKind::NeedsReconciliation);
    rejected(
        h.complete(&key, fence, Harness::<S>::result("late")),
        "WRONG_STATE",
    );
    assert_eq!(h.record(&key).unwrap().state, State::NeedsReconciliation);
}

/// HIGH risk with nothing irreversible begun is taken over normally.
pub fn high_risk_not_called_is_taken_over<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    h.policy.risk = Risk::High;
    let key = Harness::<S>::target("k1");
    h.acquire(&key, "w1");
    h.advance(PAST_LEASE);
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
}

/// RETRYABLE_FAILURE is never replayed: the next claim takes over at once.
pub fn retryable_failure_is_never_replayed<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let failed = updated(h.fail(&key, fence, true));
    assert_eq!(failed.state, State::RetryableFailure);
    assert!(failed.lease.is_none() && failed.expires_at.is_none());
    let retry = h.claim_expect(&key, BODY_A, "w1-retry", ClaimKind::TakenOver);
    assert_eq!((retry.record.fence, retry.record.attempts), (fence + 1, 2));
    assert_eq!(retry.record.state, State::Pending);
}

/// TERMINAL_FAILURE is replayed as FAILED with its error summary.
pub fn terminal_failure_is_replayed<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.start(&key, fence);
    let failed = updated(h.fail(&key, fence, false));
    assert_eq!(failed.state, State::TerminalFailure);
    assert!(failed.expires_at.is_some());
    let replay = h.claim_expect(&key, BODY_A, "w2", ClaimKind::Failed);
    assert_eq!(replay.record.error, Some(Harness::<S>::error("declined")));
}

/// Release (nothing irreversible began): PENDING without a lease; the next claim takes over.
pub fn release_lets_next_claim_take_over<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.start(&key, fence);
    let released = updated(h.release(&key, fence));
    assert_eq!(released.state, State::Pending);
    assert!(released.lease.is_none());
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    rejected(h.renew(&key, fence, None), "STALE_FENCE");
}

/// Release after an external call began is refused.
pub fn release_refused_after_external_call<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.calling(&key, fence);
    rejected(h.release(&key, fence), "IRREVERSIBLE_STAGE");
    assert!(h.record(&key).unwrap().lease.is_some());
}

/// PENDING --cancel--> CANCELLED, replayed as FAILED; refused once a call began.
pub fn cancel_only_before_irreversible<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let cancelled = updated(h.cancel(&key, fence));
    assert_eq!(cancelled.state, State::Cancelled);
    let replay = h.claim_expect(&key, BODY_A, "w2", ClaimKind::Failed);
    assert_eq!(replay.record.state, State::Cancelled);
    let other = Harness::<S>::target("k2");
    let fence = h.acquire(&other, "w1");
    h.confirmed(&other, fence, "remote-1");
    rejected(h.cancel(&other, fence), "IRREVERSIBLE_STAGE");
    rejected(h.cancel(&key, 1 + 1), "STALE_FENCE");
}

/// Renew moves the lease end; claims stay IN_PROGRESS past the original end.
pub fn renew_extends_lease<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.advance(Duration::from_secs(20));
    let renewed = updated(h.renew(&key, fence, Some(Duration::from_secs(60))));
    assert_eq!(renewed.lease.unwrap().expires_at, Timestamp(h.now + 60_000));
    h.advance(Duration::from_secs(40));
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::InProgress);
    rejected(
        h.renew(&key, fence, Some(Duration::from_secs(7200))),
        "INVALID_POLICY",
    );
}

/// Every worker command with a stale fence changes nothing.
pub fn stale_fence_changes_nothing<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let old = h.acquire(&key, "w1");
    h.advance(PAST_LEASE);
    h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    let before = h.record(&key).unwrap();
    let attempts = [
        h.start(&key, old),
        h.calling(&key, old),
        h.confirmed(&key, old, "r"),
        h.renew(&key, old, None),
        h.complete(&key, old, Harness::<S>::result("late")),
        h.fail(&key, old, true),
        h.fail(&key, old, false),
        h.release(&key, old),
        h.cancel(&key, old),
        h.start(&key, old + 7),
    ];
    for outcome in attempts {
        rejected(outcome, "STALE_FENCE");
    }
    assert_eq!(h.record(&key).unwrap(), before);
}

/// Results and error summaries above the record's limit are refused and change nothing.
pub fn result_too_large_is_refused<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    h.policy.max_result_bytes = 256;
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let before = h.record(&key).unwrap();
    let mut big = Harness::<S>::result("ch_1");
    for i in 0..8 {
        big.fields.insert(format!("f{i}"), "x".repeat(100));
    }
    rejected(h.complete(&key, fence, big), "RESULT_TOO_LARGE");
    assert_eq!(h.record(&key).unwrap(), before);
    // A verbatim body counts with the rest of the result.
    let body = |len: usize| StoredResult {
        body: Some(crate::StoredBody {
            content_type: "text/plain".into(),
            bytes: vec![b'x'; len],
        }),
        ..Harness::<S>::result("ch_1")
    };
    rejected(h.complete(&key, fence, body(256)), "RESULT_TOO_LARGE");
    assert_eq!(h.record(&key).unwrap(), before);
    let done = updated(h.complete(&key, fence, body(64)));
    assert_eq!(done.result, Some(body(64)));
}

/// Apply uses max(stamp, last stamp): a late, lower stamp cannot re-open a lease window.
pub fn replicated_time_never_runs_backwards<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    h.acquire(&key, "w1");
    h.advance(PAST_LEASE);
    let other = Harness::<S>::target("k2");
    h.acquire(&other, "w1");
    let latest = h.now;
    h.now -= 20_000; // a new leader with a slow clock
    let taken = h.claim_expect(&key, BODY_A, "w2", ClaimKind::TakenOver);
    assert_eq!(taken.record.updated_at, Timestamp(latest));
    assert_eq!(h.store.meta().unwrap().last_stamp, Timestamp(latest));
    let fresh = h.claim_expect(&other, BODY_A, "w3", ClaimKind::InProgress);
    assert_eq!(fresh.retry_after, Some(LEASE));
}

/// Expire deletes terminal records past retention, and nothing else, whatever their age.
pub fn expire_deletes_only_terminal_past_retention<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let keys: Vec<_> = (0..8)
        .map(|i| Harness::<S>::target(&format!("k{i}")))
        .collect();
    let fences: Vec<u64> = keys.iter().map(|k| h.acquire(k, "w")).collect();
    updated(h.complete(&keys[0], fences[0], Harness::<S>::result("r0")));
    updated(h.fail(&keys[1], fences[1], false));
    updated(h.cancel(&keys[2], fences[2]));
    updated(h.fail(&keys[3], fences[3], true));
    updated(h.start(&keys[4], fences[4]));
    h.calling(&keys[5], fences[5]);
    // keys[6] stays PENDING; keys[7] becomes NEEDS_RECONCILIATION below.
    h.policy.risk = Risk::High;
    let high = Harness::<S>::target("high");
    let f = h.acquire(&high, "w");
    h.calling(&high, f);
    h.advance(PAST_LEASE);
    h.claim_expect(&high, BODY_A, "w2", ClaimKind::NeedsReconciliation);
    h.advance(Duration::from_secs(23 * 3600));
    assert_eq!(expire(&mut h, 100), 0, "retention has not passed");
    h.advance(Duration::from_secs(3600));
    assert_eq!(expire(&mut h, 100), 3);
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(h.record(key).is_some(), i >= 3, "key {i}");
    }
    assert!(h.record(&high).is_some());
    h.advance(Duration::from_secs(400 * 24 * 3600));
    assert_eq!(
        expire(&mut h, 100),
        0,
        "non-terminal records never expire by time"
    );
    // An expired key is free again: a new intent gets a new operation.
    h.claim_expect(&keys[0], BODY_B, "w9", ClaimKind::Acquired);
}

fn expire<S: StateStore>(h: &mut Harness<S>, limit: u32) -> usize {
    match h.apply(Command::Expire(Expire { limit })) {
        Outcome::Expired { operation_ids } => {
            for id in &operation_ids {
                assert!(h.store.operation(id).unwrap().is_none(), "index entry left");
            }
            operation_ids.len()
        }
        other => panic!("{other:?}"),
    }
}

/// Expire works in bounded batches, oldest expiry first.
pub fn expire_is_bounded_and_oldest_first<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let mut order = Vec::new();
    for i in 0..5 {
        let key = Harness::<S>::target(&format!("k{i}"));
        let fence = h.acquire(&key, "w");
        let done = updated(h.complete(&key, fence, Harness::<S>::result("r")));
        order.push(done.operation_id);
        h.advance(Duration::from_secs(1));
    }
    h.advance(Duration::from_secs(25 * 3600));
    let mut deleted = Vec::new();
    while deleted.len() < 5 {
        match h.apply(Command::Expire(Expire { limit: 2 })) {
            Outcome::Expired { operation_ids } => {
                assert!(!operation_ids.is_empty() && operation_ids.len() <= 2);
                deleted.extend(operation_ids);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(deleted, order);
    rejected(
        h.apply(Command::Expire(Expire { limit: 0 })),
        "INVALID_ARGUMENT",
    );
}

/// Reconcile: version-checked, never on terminal records, audited in the same write set,
/// and it revokes the holder's fence.
pub fn reconcile_is_version_checked_and_audited<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    h.policy.risk = Risk::High;
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    h.calling(&key, fence);
    h.advance(PAST_LEASE);
    let stuck = h.claim(&key, BODY_A, "w2").record;
    assert_eq!(stuck.state, State::NeedsReconciliation);
    let reconcile = |version, target| {
        Command::Reconcile(Reconcile {
            operation_id: stuck.operation_id,
            expected_version: version,
            target,
            reason: "remote confirmed charge ch_9 by phone".into(),
            admin: "ops@acme".into(),
        })
    };
    let done = ReconcileTarget::Completed(Harness::<S>::result("ch_9"));
    rejected(
        h.apply(reconcile(stuck.version - 1, done.clone())),
        "VERSION_MISMATCH",
    );
    assert!(
        h.store.audit(0, 10).unwrap().is_empty(),
        "no change, no audit"
    );
    let fixed = updated(h.apply(reconcile(stuck.version, done.clone())));
    assert_eq!(
        (fixed.state, fixed.version, fixed.fence),
        (State::Completed, stuck.version + 1, fence + 1)
    );
    let audit = h.store.audit(0, 10).unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].seq, 1);
    assert_eq!(audit[0].admin, "ops@acme");
    match &audit[0].action {
        AuditAction::ReconcileRecord {
            tenant,
            from: State::NeedsReconciliation,
            to: State::Completed,
            ..
        } => assert_eq!(tenant, key.scope.tenant()),
        other => panic!("the reconcile's entry names the record's tenant: {other:?}"),
    }
    assert_eq!(audit[0].action.tenant(), Some(key.scope.tenant()));
    rejected(h.apply(reconcile(fixed.version, done)), "ALREADY_TERMINAL");
    h.claim_expect(&key, BODY_A, "w3", ClaimKind::Completed);
    // A stuck IN_PROGRESS record may be sent back to RETRYABLE_FAILURE; its holder is fenced.
    let other = Harness::<S>::target("k2");
    let f = h.acquire(&other, "w1");
    let r = updated(h.start(&other, f));
    let retry = ReconcileTarget::RetryableFailure(Harness::<S>::error("operator_retry"));
    let op = Command::Reconcile(Reconcile {
        operation_id: r.operation_id,
        expected_version: r.version,
        target: retry,
        reason: "worker host lost".into(),
        admin: "ops@acme".into(),
    });
    assert_eq!(updated(h.apply(op)).state, State::RetryableFailure);
    rejected(
        h.complete(&other, f, Harness::<S>::result("late")),
        "STALE_FENCE",
    );
    assert_eq!(h.store.audit(0, 10).unwrap().len(), 2);
}

/// Reconcile to CANCELLED settles only an unknown outcome (NEEDS_RECONCILIATION, or stage
/// CALLING): CANCELLED promises nothing irreversible happened, which a confirmed call
/// contradicts and which a NOT_CALLED holder declares itself. The key then replays
/// CANCELLED, the holder is fenced, the change is audited.
pub fn reconcile_cancels_only_unknown_outcomes<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let reconcile = |record: &Record| {
        Command::Reconcile(Reconcile {
            operation_id: record.operation_id,
            expected_version: record.version,
            target: ReconcileTarget::Cancelled,
            reason: "the provider has no charge with this key".into(),
            admin: "reconciler".into(),
        })
    };
    let not_called = Harness::<S>::target("k1");
    let f = h.acquire(&not_called, "w1");
    let r = updated(h.start(&not_called, f));
    rejected(h.apply(reconcile(&r)), "WRONG_STATE");
    let confirmed = Harness::<S>::target("k2");
    let f = h.acquire(&confirmed, "w1");
    h.calling(&confirmed, f);
    let r = updated(h.confirmed(&confirmed, f, "ch_1"));
    rejected(h.apply(reconcile(&r)), "IRREVERSIBLE_STAGE");
    assert!(
        h.store.audit(0, 10).unwrap().is_empty(),
        "refusals audit nothing"
    );
    // A live holder at CALLING: the downstream's "absent" is the evidence; the holder is fenced.
    let calling = Harness::<S>::target("k3");
    let f = h.acquire(&calling, "w1");
    let r = updated(h.calling(&calling, f));
    let cancelled = updated(h.apply(reconcile(&r)));
    assert_eq!(
        (cancelled.state, cancelled.fence, cancelled.lease.is_none()),
        (State::Cancelled, f + 1, true)
    );
    assert!(cancelled.completed_at.is_some() && cancelled.expires_at.is_some());
    rejected(
        h.complete(&calling, f, Harness::<S>::result("late")),
        "STALE_FENCE",
    );
    h.claim_expect(&calling, BODY_A, "w2", ClaimKind::Failed);
    rejected(h.apply(reconcile(&cancelled)), "ALREADY_TERMINAL");
    // HIGH risk, holder gone at CALLING: NEEDS_RECONCILIATION.
    h.policy.risk = Risk::High;
    let stuck = Harness::<S>::target("k4");
    let f = h.acquire(&stuck, "w1");
    h.calling(&stuck, f);
    h.advance(PAST_LEASE);
    let r = h.claim(&stuck, BODY_A, "w2").record;
    assert_eq!(r.state, State::NeedsReconciliation);
    assert_eq!(updated(h.apply(reconcile(&r))).state, State::Cancelled);
    let audit = h.store.audit(0, 10).unwrap();
    let moves: Vec<_> = audit
        .iter()
        .map(|entry| match &entry.action {
            AuditAction::ReconcileRecord { from, to, .. } => (*from, *to),
            other => panic!("not a reconcile: {other:?}"),
        })
        .collect();
    assert_eq!(
        moves,
        [
            (State::InProgress, State::Cancelled),
            (State::NeedsReconciliation, State::Cancelled)
        ]
    );
}

/// Purge scrubs the subject's result fields and error messages, keeps the tombstone (a
/// retry is still answered, never re-executed), leaves other subjects alone, is audited.
pub fn purge_scrubs_subject_and_keeps_tombstone<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let mine = Harness::<S>::target_for("acme", "alice", "k1");
    let failed = Harness::<S>::target_for("acme", "alice", "k2");
    let theirs = Harness::<S>::target_for("acme", "bob", "k1");
    let other_tenant = Harness::<S>::target_for("globex", "alice", "k1");
    for key in [&mine, &theirs, &other_tenant] {
        let f = h.acquire(key, "w");
        let result = StoredResult {
            body: Some(crate::StoredBody {
                content_type: "application/json".into(),
                bytes: br#"{"card":"4242"}"#.to_vec(),
            }),
            ..Harness::<S>::result("ch")
        };
        updated(h.complete(key, f, result));
    }
    let f = h.acquire(&failed, "w");
    updated(h.fail(&failed, f, false));
    let purged = purge(&mut h, "acme", "alice", None, 100);
    assert_eq!(purged, (2, None));
    let record = h.record(&mine).unwrap();
    let result = record.result.clone().unwrap();
    assert!(result.purged && result.fields.is_empty() && result.body.is_none());
    assert_eq!(
        (result.status_code, result.resource_id.as_str()),
        (201, "ch")
    );
    assert_eq!(h.record(&failed).unwrap().error.unwrap().message, "");
    for key in [&theirs, &other_tenant] {
        let kept = h.record(key).unwrap().result.unwrap();
        assert!(!kept.purged && kept.body.is_some());
    }
    let replay = h.claim_expect(&mine, BODY_A, "w2", ClaimKind::Completed);
    assert_eq!(replay.record.operation_id, record.operation_id);
    let audit = h.store.audit(1, 10).unwrap();
    assert!(matches!(
        &audit[0].action,
        AuditAction::PurgeSubject { scrubbed: 2, .. }
    ));
    assert_eq!(
        purge(&mut h, "acme", "alice", None, 100),
        (0, None),
        "idempotent"
    );
}

fn purge<S: StateStore>(
    h: &mut Harness<S>,
    tenant: &str,
    actor: &str,
    after: Option<crate::record::RecordKey>,
    limit: u32,
) -> (u64, Option<crate::record::RecordKey>) {
    let command = Command::PurgeSubject(PurgeSubject {
        tenant: tenant.into(),
        actor: actor.into(),
        reason: "GDPR erasure request 42".into(),
        admin: "privacy@acme".into(),
        after,
        limit,
    });
    match h.apply(command) {
        Outcome::Purged { scrubbed, next } => (scrubbed, next),
        other => panic!("{other:?}"),
    }
}

/// Purge runs in bounded batches that resume from a cursor.
pub fn purge_resumes_from_cursor<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    for i in 0..5 {
        let key = Harness::<S>::target_for("acme", "alice", &format!("k{i}"));
        let f = h.acquire(&key, "w");
        updated(h.complete(&key, f, Harness::<S>::result("ch")));
    }
    let mut total = 0;
    let mut cursor = None;
    let mut batches = 0;
    loop {
        let (scrubbed, next) = purge(&mut h, "acme", "alice", cursor, 2);
        total += scrubbed;
        batches += 1;
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!((total, batches), (5, 3));
}

/// The ledger moves NOT_CALLED -> CALLING -> REMOTE_CONFIRMED, never back; complete sets
/// LOCAL_DONE and keeps the remote reference.
pub fn external_call_ledger_moves_forward<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let calling = updated(h.calling(&key, fence));
    assert_eq!(
        (calling.state, calling.stage),
        (State::InProgress, Stage::Calling)
    );
    assert_eq!(
        updated(h.calling(&key, fence)),
        calling,
        "repeated CALLING changes nothing"
    );
    let confirmed = updated(h.confirmed(&key, fence, "pi_123"));
    assert_eq!(confirmed.stage, Stage::RemoteConfirmed);
    assert_eq!(confirmed.remote_ref.as_deref(), Some("pi_123"));
    rejected(h.calling(&key, fence), "WRONG_STATE");
    rejected(h.confirmed(&key, fence, "pi_other"), "WRONG_STATE");
    let done = updated(h.complete(&key, fence, Harness::<S>::result("ch")));
    assert_eq!(
        (done.stage, done.remote_ref.as_deref()),
        (Stage::LocalDone, Some("pi_123"))
    );
    rejected(h.calling(&key, fence), "ALREADY_TERMINAL");
}

/// Re-sending a command that took effect (same fence, same content) changes nothing more;
/// different content on a terminal record is refused.
pub fn worker_commands_are_idempotent<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let fence = h.acquire(&key, "w1");
    let done = updated(h.complete(&key, fence, Harness::<S>::result("ch_1")));
    assert_eq!(
        updated(h.complete(&key, fence, Harness::<S>::result("ch_1"))),
        done
    );
    rejected(
        h.complete(&key, fence, Harness::<S>::result("ch_2")),
        "ALREADY_TERMINAL",
    );
    rejected(h.fail(&key, fence, false), "ALREADY_TERMINAL");
    let other = Harness::<S>::target("k2");
    let fence = h.acquire(&other, "w1");
    let failed = updated(h.fail(&other, fence, true));
    assert_eq!(updated(h.fail(&other, fence, true)), failed);
    rejected(
        h.complete(&other, fence, Harness::<S>::result("x")),
        "WRONG_STATE",
    );
}

/// Invalid commands are rejected with the field's reason and store nothing.
pub fn invalid_commands_change_nothing<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let Command::Claim(claim) = h.claim_command(&key, BODY_A, "w1") else {
        unreachable!()
    };
    let variants = [
        (
            Claim {
                fingerprints: vec![],
                ..claim.clone()
            },
            "INVALID_FINGERPRINT",
        ),
        (
            Claim {
                fingerprints: vec![Harness::<S>::fingerprint(1), Harness::<S>::fingerprint(2)],
                ..claim.clone()
            },
            "INVALID_FINGERPRINT",
        ),
        (
            Claim {
                policy: crate::policy::Policy {
                    lease: Duration::ZERO,
                    ..claim.policy.clone()
                },
                ..claim.clone()
            },
            "INVALID_POLICY",
        ),
    ];
    for (bad, reason) in variants {
        rejected(h.apply(Command::Claim(bad)), reason);
    }
    assert!(h.record(&key).is_none());
    let fence = h.acquire(&key, "w1");
    let mut bad = Harness::<S>::result("ch");
    bad.status_code = 42;
    rejected(h.complete(&key, fence, bad), "INVALID_RESULT");
    assert_eq!(h.record(&key).unwrap().state, State::Pending);
}

/// Worker commands on a key nobody claimed: NOT_FOUND.
pub fn missing_record_is_not_found<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("nobody");
    rejected(h.start(&key, 1), "NOT_FOUND");
    rejected(
        h.complete(
            &key,
            1,
            StoredResult {
                status_code: 200,
                ..Default::default()
            },
        ),
        "NOT_FOUND",
    );
    assert!(h.record(&key).is_none());
}

/// The operation-id index finds the record for its whole life and forgets it on expiry.
pub fn operation_index_finds_record<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let key = Harness::<S>::target("k1");
    let out = h.claim(&key, BODY_A, "w1");
    let id = out.record.operation_id;
    assert_eq!(h.store.operation(&id).unwrap(), Some(key.clone()));
    h.advance(PAST_LEASE);
    let taken = h.claim(&key, BODY_A, "w2");
    assert_eq!(taken.record.operation_id, id, "stable across takeovers");
    updated(h.complete(&key, taken.record.fence, Harness::<S>::result("r")));
    h.advance(Duration::from_secs(25 * 3600));
    assert_eq!(expire(&mut h, 10), 1);
    assert!(h.store.operation(&id).unwrap().is_none());
}

/// Applying a batch through an [`Overlay`] and committing once equals applying each
/// command directly: later commands see earlier ones.
pub fn overlay_batch_equals_sequential<S: StateStore>(store: S) {
    let mut h = Harness::new(store);
    let keys: Vec<_> = (0..3)
        .map(|i| Harness::<S>::target(&format!("k{i}")))
        .collect();
    let mut commands = Vec::new();
    for key in &keys {
        commands.push(h.claim_command(key, BODY_A, "w1"));
        commands.push(Command::Complete(crate::command::Complete {
            owner: Harness::<S>::owner(key, 1),
            result: Harness::<S>::result("r"),
        }));
    }
    commands.push(Command::Expire(Expire { limit: 10 }));
    commands.push(h.claim_command(&keys[0], BODY_B, "w2"));
    let stamp = Timestamp(h.now);
    let mut overlay = Overlay::new(&h.store);
    let batched: Vec<Outcome> = commands
        .iter()
        .map(|c| crate::apply(&mut overlay, c, stamp).unwrap())
        .collect();
    let writes = overlay.into_writes();
    h.store.commit(writes).unwrap();
    assert!(matches!(&batched[1], Outcome::Record(r) if r.state == State::Completed));
    assert!(matches!(&batched[7], Outcome::Claim(c) if c.kind == ClaimKind::FingerprintMismatch));
    for key in &keys {
        assert_eq!(h.record(key).unwrap().state, State::Completed);
    }
}
