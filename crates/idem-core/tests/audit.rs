//! The audit of placement and membership changes through `apply` on the in-memory store:
//! each audited change writes exactly one entry naming who, why and what, in the same
//! write set as the change; a refused or repeated change writes none; the commands written
//! before audit existed (`Cluster`, `Group`) still apply, unaudited, as they did then.

use idem_core::audit::{MembershipKind, MembershipNote};
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
