//! The audit of placement and membership changes through `apply` on the in-memory store:
//! each audited change writes exactly one entry naming who, why and what, in the same
//! write set as the change; a refused or repeated change writes none; the commands written
//! before audit existed (`Cluster`, `Group`) still apply, unaudited, as they did then. A
//! membership entry is audited when applied, with the pending intent it fulfils.

use idem_core::apply::{membership, AppliedMembership};
use idem_core::audit::{MembershipIntent, MembershipKind, MembershipNote};
use idem_core::command::Audited;
use idem_core::placement::{ClusterChange, GroupChange, Mode};
use idem_core::testing::Harness;
use idem_core::{AuditAction, AuditEntry, Command, MemoryStore, Outcome, StateStore};

type H = Harness<MemoryStore>;

fn by_alice<T>(change: T) -> Audited<T> {
    Audited::new(change, "alice", "CHG-7")
}

fn cluster(h: &mut H, change: ClusterChange) -> Outcome {
    h.apply(Command::AuditedCluster(by_alice(change)))
}

fn audit_log(h: &H) -> Vec<AuditEntry> {
    h.store.audit(0, usize::MAX).unwrap()
}

fn accepted(outcome: Outcome) {
    assert!(matches!(outcome, Outcome::Placement(_)), "{outcome:?}");
}

fn refused(outcome: Outcome, reason: &str) {
    match outcome {
        Outcome::Rejected(rejection) => assert_eq!(rejection.reason(), reason),
        other => panic!("expected {reason}, got {other:?}"),
    }
}

/// The last entry, checking attribution and that it is the `n`th.
fn last(h: &H, n: usize) -> AuditAction {
    let log = audit_log(h);
    assert_eq!(log.len(), n, "{log:?}");
    let entry = log.last().unwrap().clone();
    assert_eq!(entry.seq, n as u64);
    assert_eq!(entry.admin, "alice");
    assert_eq!(entry.reason, "CHG-7");
    entry.action
}

fn bind(tenant: &str, region: &str) -> ClusterChange {
    ClusterChange::Bind {
        tenant: tenant.into(),
        region: region.into(),
    }
}

#[test]
fn each_cluster_change_is_audited_with_its_before_and_after() {
    let mut h = H::new(MemoryStore::new());
    accepted(cluster(
        &mut h,
        ClusterChange::SetMode(Mode::RegionAffinity),
    ));
    assert_eq!(
        last(&h, 1),
        AuditAction::SetMode {
            from: Mode::Global,
            to: Mode::RegionAffinity
        }
    );
    let add = ClusterChange::AddRegion { name: "r1".into() };
    accepted(cluster(&mut h, add));
    assert_eq!(
        last(&h, 2),
        AuditAction::AddRegion {
            name: "r1".into(),
            group: 1
        }
    );
    accepted(cluster(&mut h, bind("acme", "r1")));
    let bound = last(&h, 3);
    assert_eq!(bound.tenant(), Some("acme"));
    assert_eq!(
        bound,
        AuditAction::BindTenant {
            tenant: "acme".into(),
            from: None,
            region: "r1".into()
        }
    );
    let unbind = ClusterChange::Unbind {
        tenant: "acme".into(),
    };
    accepted(cluster(&mut h, unbind));
    assert_eq!(
        last(&h, 4),
        AuditAction::UnbindTenant {
            tenant: "acme".into(),
            from: "r1".into()
        }
    );
    assert_eq!(last(&h, 4).kind(), "unbind_tenant");
}

#[test]
fn a_refused_or_repeated_change_writes_no_entry() {
    let mut h = H::new(MemoryStore::new());
    // Binding needs region-affinity mode: refused, nothing written, no entry.
    refused(cluster(&mut h, bind("acme", "r1")), "PLACEMENT_CONFLICT");
    assert!(audit_log(&h).is_empty());
    assert_eq!(h.store.placement().unwrap(), Default::default());
    accepted(cluster(
        &mut h,
        ClusterChange::SetMode(Mode::RegionAffinity),
    ));
    // Already in place: answered, not audited again.
    accepted(cluster(
        &mut h,
        ClusterChange::SetMode(Mode::RegionAffinity),
    ));
    assert_eq!(audit_log(&h).len(), 1);
    // Unknown region: refused, no entry.
    refused(cluster(&mut h, bind("acme", "nowhere")), "UNKNOWN_REGION");
    assert_eq!(audit_log(&h).len(), 1);
    // An audited command without a reason is refused by validation, nothing written.
    let no_reason = Audited::new(ClusterChange::SetMode(Mode::Global), "alice", "");
    refused(
        h.apply(Command::AuditedCluster(no_reason)),
        "INVALID_ARGUMENT",
    );
    assert_eq!(
        h.store.placement().unwrap().cluster.mode,
        Mode::RegionAffinity
    );
    assert_eq!(audit_log(&h).len(), 1);
}

#[test]
fn commands_from_before_audit_still_apply_unaudited() {
    let mut h = H::new(MemoryStore::new());
    accepted(h.apply(Command::Cluster(ClusterChange::SetMode(
        Mode::RegionAffinity,
    ))));
    assert_eq!(
        h.store.placement().unwrap().cluster.mode,
        Mode::RegionAffinity
    );
    assert!(audit_log(&h).is_empty());
}

/// A region group of region r1 (home r1).
fn region_group() -> H {
    let mut h = H::new(MemoryStore::new());
    let init = GroupChange::Init {
        region: "r1".into(),
    };
    accepted(h.apply(Command::Group(init)));
    h
}

fn by_node(change: GroupChange) -> Command {
    Command::AuditedGroup(Audited::new(
        change,
        "node:2",
        "leader outside the home region",
    ))
}

#[test]
fn failover_is_audited_as_the_leader_node() {
    let mut h = region_group();
    let enter = GroupChange::EnterFailover {
        leader_id: 2,
        leader_region: "r2".into(),
    };
    accepted(h.apply(by_node(enter.clone())));
    // Repeated while in failover: no new entry.
    accepted(h.apply(by_node(enter)));
    let log = audit_log(&h);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].admin, "node:2");
    assert_eq!(
        log[0].action,
        AuditAction::EnterFailover {
            group_region: "r1".into(),
            leader_id: 2,
            leader_region: "r2".into(),
            epoch: 2
        }
    );
    accepted(h.apply(by_node(GroupChange::EndFailover { leader_id: 1 })));
    let log = audit_log(&h);
    assert_eq!(log.len(), 2);
    assert_eq!(
        log[1].action,
        AuditAction::EndFailover {
            group_region: "r1".into(),
            leader_id: 1,
            epoch: 3
        }
    );
    // The audited epoch is the one the change produced (groups start at epoch 1).
    assert_eq!(h.store.placement().unwrap().group.unwrap().epoch, 3);
}

#[test]
fn a_refused_failover_writes_no_entry() {
    let mut h = region_group();
    // The leader is in the home region: not a failover.
    let home = GroupChange::EnterFailover {
        leader_id: 1,
        leader_region: "r1".into(),
    };
    refused(h.apply(by_node(home)), "PLACEMENT_CONFLICT");
    assert!(audit_log(&h).is_empty());
    // Not in failover: nothing to end, nothing audited.
    accepted(h.apply(by_node(GroupChange::EndFailover { leader_id: 1 })));
    assert!(audit_log(&h).is_empty());
    // A confirmation outside failover is refused and writes no entry either.
    let confirm = GroupChange::ConfirmHome {
        new_home: "r2".into(),
        reason: "INC-1".into(),
        admin: "alice".into(),
    };
    refused(h.apply(Command::Group(confirm)), "NOT_IN_FAILOVER");
    assert!(audit_log(&h).is_empty());
}

#[test]
fn a_membership_note_is_one_entry() {
    let mut h = H::new(MemoryStore::new());
    let note = MembershipNote {
        kind: MembershipKind::Promote,
        member: 4,
        voters: vec![1, 2, 3, 4],
        learners: vec![],
    };
    let outcome = h.apply(Command::NoteMembership(by_alice(note.clone())));
    assert_eq!(outcome, Outcome::Audited { seq: 1 });
    assert_eq!(last(&h, 1), AuditAction::Membership(note));
    let too_many = MembershipNote {
        kind: MembershipKind::Add,
        member: 1,
        voters: (0..100).collect(),
        learners: vec![],
    };
    refused(
        h.apply(Command::NoteMembership(by_alice(too_many))),
        "INVALID_ARGUMENT",
    );
    assert_eq!(audit_log(&h).len(), 1);
}

fn applied(index: u64, voters: &[u64], learners: &[u64]) -> AppliedMembership {
    AppliedMembership {
        index,
        voters: voters.to_vec(),
        learners: learners.to_vec(),
    }
}

fn intend(h: &mut H, kind: MembershipKind, member: u64, admin: &str) {
    let intent = MembershipIntent { kind, member };
    let command = Command::MembershipIntent(Audited::new(intent, admin, "CHG-7"));
    accepted(h.apply(command));
}

#[test]
fn a_membership_entry_is_audited_once_with_the_intent_it_fulfils() {
    let mut h = H::new(MemoryStore::new());
    // The cluster's first membership, or one of a release before intents: no entry.
    assert_eq!(
        membership(&mut h.store, &applied(1, &[1, 2, 3], &[])).unwrap(),
        None
    );
    intend(&mut h, MembershipKind::Add, 4, "alice");
    assert!(audit_log(&h).is_empty(), "the intent alone is not audited");
    // A membership that is not the intended change (4 is not a learner yet) writes nothing.
    assert_eq!(
        membership(&mut h.store, &applied(5, &[1, 2, 3], &[])).unwrap(),
        None
    );
    assert_eq!(
        membership(&mut h.store, &applied(6, &[1, 2, 3], &[4])).unwrap(),
        Some(1)
    );
    let expected = AuditAction::MembershipChange {
        note: MembershipNote {
            kind: MembershipKind::Add,
            member: 4,
            voters: vec![1, 2, 3],
            learners: vec![4],
        },
        index: 6,
    };
    assert_eq!(last(&h, 1), expected);
    assert_eq!(audit_log(&h)[0].at, h.store.meta().unwrap().last_stamp);
    assert_eq!(expected.kind(), "membership");
    // The intent is used up: a later membership (or the same one again) writes nothing.
    assert!(h.store.placement().unwrap().membership_intents.is_empty());
    assert_eq!(
        membership(&mut h.store, &applied(7, &[1, 2, 3], &[4])).unwrap(),
        None
    );
    assert_eq!(audit_log(&h).len(), 1);
}

#[test]
fn the_newest_fulfilled_intent_is_audited_and_stale_ones_are_pushed_out() {
    let mut h = H::new(MemoryStore::new());
    // A promote that never happened, then one that does: the entry names the latter.
    intend(&mut h, MembershipKind::Promote, 4, "mallory");
    intend(&mut h, MembershipKind::Remove, 5, "bob");
    intend(&mut h, MembershipKind::Promote, 4, "alice");
    assert_eq!(
        membership(&mut h.store, &applied(9, &[1, 2, 3, 4], &[5])).unwrap(),
        Some(1)
    );
    assert!(matches!(
        last(&h, 1),
        AuditAction::MembershipChange { index: 9, .. }
    ));
    let pending = h.store.placement().unwrap().membership_intents;
    let admins: Vec<&str> = pending.iter().map(|i| i.admin.as_str()).collect();
    assert_eq!(admins, ["mallory", "bob"]);
    // At most MAX_MEMBERSHIP_INTENTS stay pending; the oldest go first.
    for member in 10..20 {
        intend(&mut h, MembershipKind::Add, member, "alice");
    }
    let pending = h.store.placement().unwrap().membership_intents;
    assert_eq!(pending.len(), idem_core::placement::MAX_MEMBERSHIP_INTENTS);
    assert_eq!(pending[0].change.member, 12);
    // An intent naming no member is refused.
    let zero = MembershipIntent {
        kind: MembershipKind::Remove,
        member: 0,
    };
    refused(
        h.apply(Command::MembershipIntent(by_alice(zero))),
        "INVALID_ARGUMENT",
    );
}

#[test]
fn old_log_entries_still_decode() {
    // bincode is positional: the commands and entries written before audit existed keep
    // their encoding because every new variant was appended.
    let old = Command::Cluster(ClusterChange::SetMode(Mode::RegionAffinity));
    let bytes = bincode::serialize(&old).unwrap();
    assert_eq!(&bytes[..4], &11u32.to_le_bytes());
    assert_eq!(bincode::deserialize::<Command>(&bytes).unwrap(), old);
    let entry = AuditEntry {
        seq: 1,
        at: idem_core::Timestamp(5),
        admin: "a".into(),
        reason: "r".into(),
        action: AuditAction::ConfirmHome {
            group_region: "r1".into(),
            from: "r1".into(),
            to: "r2".into(),
            epoch: 3,
        },
    };
    let bytes = bincode::serialize(&entry).unwrap();
    assert_eq!(bincode::deserialize::<AuditEntry>(&bytes).unwrap(), entry);
}
