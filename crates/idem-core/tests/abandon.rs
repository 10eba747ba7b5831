//! Abandoned claims (`abandon_after`, the bounded-growth rule) through `apply` on the
//! in-memory store: a NOT_CALLED record with no live lease, unchanged past `abandon_after`,
//! is deleted with an audit entry and its key starts fresh; a CALLING, confirmed, leased,
//! recently changed, terminal or since-changed record is never touched.

use std::time::Duration;

use idem_core::command::{Abandon, AbandonTarget, Audited};
use idem_core::testing::{Harness, BODY_A};
use idem_core::{
    AuditAction, ClaimKind, Command, MemoryStore, Outcome, RecordKey, State, StateStore,
};

type H = Harness<MemoryStore>;

const AFTER: Duration = Duration::from_secs(600);
const LEASE: Duration = Duration::from_secs(30);

fn harness() -> H {
    let mut h = H::new(MemoryStore::new());
    h.policy.lease = LEASE;
    h
}

/// Abandons `keys` at the versions the store holds now; returns the deleted operation ids.
fn abandon(h: &mut H, keys: &[&RecordKey]) -> usize {
    let targets = keys
        .iter()
        .map(|key| AbandonTarget {
            key: (*key).clone(),
            version: h.record(key).map_or(0, |r| r.version),
            after: AFTER,
        })
        .collect();
    let command = Command::Abandon(Audited::new(
        Abandon { targets },
        "node:1",
        "abandon_after 10m elapsed",
    ));
    match h.apply(command) {
        Outcome::Expired { operation_ids } => operation_ids.len(),
        other => panic!("abandon answered {other:?}"),
    }
}

#[test]
fn a_not_called_record_past_abandon_after_is_deleted_audited_and_its_key_starts_fresh() {
    let mut h = harness();
    let pending = H::target("pending");
    let started = H::target("started");
    h.acquire(&pending, "w1");
    let fence = h.acquire(&started, "w2");
    h.start(&started, fence);
    let first_id = h.record(&pending).unwrap().operation_id;

    // Lease expired but abandon_after not reached: kept.
    h.advance(AFTER - Duration::from_secs(1));
    assert_eq!(abandon(&mut h, &[&pending, &started]), 0);
    assert!(h.record(&pending).is_some());

    h.advance(Duration::from_secs(1));
    assert_eq!(abandon(&mut h, &[&pending, &started]), 2);
    assert!(h.record(&pending).is_none());
    assert!(h.record(&started).is_none());
    assert!(
        h.store.operation(&first_id).unwrap().is_none(),
        "index entry deleted too"
    );

    let audit = h.store.audit(0, usize::MAX).unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].admin, "node:1");
    match &audit[0].action {
        AuditAction::Abandon {
            operation_id,
            tenant,
            state,
            idle_ms,
        } => {
            assert_eq!(*operation_id, first_id);
            assert_eq!(tenant, "acme");
            assert_eq!(*state, State::Pending);
            assert_eq!(*idle_ms, 600_000);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(audit[1].action.kind(), "abandon");

    // A new claim of the key starts from scratch: a new operation, fence 1, attempt 1.
    let fresh = h.claim_expect(&pending, BODY_A, "w3", ClaimKind::Acquired);
    assert_ne!(fresh.record.operation_id, first_id);
    assert_eq!((fresh.record.fence, fresh.record.attempts), (1, 1));
}

#[test]
fn calling_confirmed_leased_or_taken_over_records_are_never_touched() {
    let mut h = harness();
    let calling = H::target("calling");
    let confirmed = H::target("confirmed");
    let renewed = H::target("renewed");
    let taken = H::target("taken-over-from-calling");
    let fence = h.acquire(&calling, "w1");
    h.calling(&calling, fence);
    let fence = h.acquire(&confirmed, "w2");
    h.confirmed(&confirmed, fence, "ch_1");
    let renewed_fence = h.acquire(&renewed, "w3");
    let fence = h.acquire(&taken, "w4");
    h.calling(&taken, fence);

    h.advance(AFTER);
    // The worker on `renewed` is alive: a lease longer than abandon_after is live.
    h.renew(&renewed, renewed_fence, Some(Duration::from_secs(3600)));
    // A new worker took `taken` over from CALLING (its stage stays CALLING).
    h.claim_expect(&taken, BODY_A, "w5", ClaimKind::TakenOver);
    h.advance(AFTER + LEASE);

    let keys = [&calling, &confirmed, &renewed, &taken];
    let before: Vec<_> = keys.iter().map(|k| h.record(k).unwrap()).collect();
    assert_eq!(abandon(&mut h, &keys), 0);
    let after: Vec<_> = keys.iter().map(|k| h.record(k).unwrap()).collect();
    assert_eq!(before, after);
    assert!(h.store.audit(0, usize::MAX).unwrap().is_empty());
}

#[test]
fn terminal_changed_or_unknown_records_are_left_alone() {
    let mut h = harness();
    let done = H::target("done");
    let moved = H::target("moved-on");
    let fence = h.acquire(&done, "w1");
    h.complete(&done, fence, H::result("ch_9"));
    h.acquire(&moved, "w2");
    h.advance(AFTER + LEASE);

    // The sweep saw `moved` at version 1; a claim took it over before the command applied.
    let stale = AbandonTarget {
        key: moved.clone(),
        version: h.record(&moved).unwrap().version,
        after: AFTER,
    };
    h.claim_expect(&moved, BODY_A, "w3", ClaimKind::TakenOver);
    h.advance(AFTER + LEASE);
    let command = Command::Abandon(Audited::new(
        Abandon {
            targets: vec![
                stale.clone(),
                stale,
                AbandonTarget {
                    key: H::target("never-claimed"),
                    version: 1,
                    after: AFTER,
                },
            ],
        },
        "node:1",
        "abandon_after",
    ));
    assert_eq!(
        h.apply(command),
        Outcome::Expired {
            operation_ids: vec![]
        }
    );
    assert_eq!(abandon(&mut h, &[&done]), 0);
    assert_eq!(h.record(&done).unwrap().state, State::Completed);
    assert_eq!(h.record(&moved).unwrap().state, State::Pending);

    // The same key twice in one command: deleted and audited once.
    assert_eq!(abandon(&mut h, &[&moved, &moved]), 1);
    assert_eq!(h.store.audit(0, usize::MAX).unwrap().len(), 1);
}

#[test]
fn bad_commands_are_refused_and_change_nothing() {
    let mut h = harness();
    let key = H::target("k");
    h.acquire(&key, "w1");
    h.advance(AFTER * 2);
    let target = |after| AbandonTarget {
        key: key.clone(),
        version: 1,
        after,
    };
    for (targets, reason) in [
        (vec![], "INVALID_ARGUMENT"),
        (vec![target(Duration::from_secs(1))], "INVALID_POLICY"),
        (
            vec![target(AFTER); idem_core::command::MAX_ABANDON_BATCH + 1],
            "INVALID_ARGUMENT",
        ),
    ] {
        let command = Command::Abandon(Audited::new(Abandon { targets }, "node:1", "why"));
        match h.apply(command) {
            Outcome::Rejected(rejection) => assert_eq!(rejection.reason(), reason),
            other => panic!("{other:?}"),
        }
    }
    let command = Command::Abandon(Audited::new(
        Abandon {
            targets: vec![target(AFTER)],
        },
        "",
        "",
    ));
    assert!(matches!(h.apply(command), Outcome::Rejected(_)));
    assert_eq!(h.record(&key).unwrap().state, State::Pending);
}
