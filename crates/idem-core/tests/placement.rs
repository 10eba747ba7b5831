//! Placement through `apply` on the in-memory store: the cluster configuration of the global
//! group (mode, regions, tenant homes), a region group's own state (Init, Admit, Release),
//! the refusal of tenants a group does not decide (`WRONG_GROUP`, nothing written), the
//! failover guard, and `apply::replay` against `apply`.
//!
//! "Nothing written" is checked on the whole store image ([`MemoryStore::dump`]): the image
//! after a refused command equals the image before it with only the metadata (replicated
//! clock) advanced, which every applied command commits.

use std::time::Duration;

use idem_core::apply::replay;
use idem_core::command::{
    Complete, ExternalCall, Fail, Fenced, PurgeSubject, RecordExternalCall, Renew,
};
use idem_core::fingerprint::Fingerprint;
use idem_core::placement::{
    ClusterChange, ClusterConfig, GroupChange, Mode, RegionGroup, FAILOVER_RETRY_AFTER,
    GLOBAL_GROUP, MAX_REGIONS,
};
use idem_core::store::WriteSet;
use idem_core::testing::{Harness, BODY_A, BODY_B};
use idem_core::{
    AuditAction, ClaimKind, ClaimOutcome, Command, MemoryStore, Outcome, Placement, Record,
    RecordKey, Rejection, Risk, Stage, State, StateStore, Timestamp,
};

type H = Harness<MemoryStore>;

const PAST_LEASE: Duration = Duration::from_secs(31);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn cluster(h: &mut H, change: ClusterChange) -> Outcome {
    h.apply(Command::Cluster(change))
}

fn group(h: &mut H, change: GroupChange) -> Outcome {
    h.apply(Command::Group(change))
}

/// The placement answered by an accepted placement change.
fn placed(outcome: Outcome) -> Placement {
    match outcome {
        Outcome::Placement(placement) => placement,
        other => panic!("expected a placement, got {other:?}"),
    }
}

/// The rejection, asserting its reason.
fn rejected(outcome: Outcome, reason: &str) -> Rejection {
    match outcome {
        Outcome::Rejected(rejection) => {
            assert_eq!(rejection.reason(), reason, "{rejection:?}");
            rejection
        }
        other => panic!("expected {reason}, got {other:?}"),
    }
}

fn claimed(outcome: Outcome) -> ClaimOutcome {
    match outcome {
        Outcome::Claim(claim) => claim,
        other => panic!("expected a claim outcome, got {other:?}"),
    }
}

fn set_mode(mode: Mode) -> ClusterChange {
    ClusterChange::SetMode(mode)
}

fn add_region(name: &str) -> ClusterChange {
    ClusterChange::AddRegion { name: name.into() }
}

fn bind(tenant: &str, region: &str) -> ClusterChange {
    ClusterChange::Bind {
        tenant: tenant.into(),
        region: region.into(),
    }
}

fn unbind(tenant: &str) -> ClusterChange {
    ClusterChange::Unbind {
        tenant: tenant.into(),
    }
}

fn init(region: &str) -> GroupChange {
    GroupChange::Init {
        region: region.into(),
    }
}

fn admit(tenant: &str) -> GroupChange {
    GroupChange::Admit {
        tenant: tenant.into(),
    }
}

fn release(tenant: &str) -> GroupChange {
    GroupChange::Release {
        tenant: tenant.into(),
    }
}

fn enter_failover(leader_id: u64, leader_region: &str) -> GroupChange {
    GroupChange::EnterFailover {
        leader_id,
        leader_region: leader_region.into(),
    }
}

fn confirm_home(new_home: &str) -> GroupChange {
    GroupChange::ConfirmHome {
        new_home: new_home.into(),
        reason: "INC-42: eu-west lost".into(),
        admin: "alice".into(),
    }
}

fn key(tenant: &str, key: &str) -> RecordKey {
    H::target_for(tenant, "user-1", key)
}

fn placement(h: &H) -> Placement {
    h.store.placement().unwrap()
}

fn region_group(h: &H) -> RegionGroup {
    placement(h).group.expect("a region group")
}

/// A global group in region-affinity mode with regions r1 (group 1) and r2 (group 2).
fn global() -> H {
    let mut h = H::new(MemoryStore::new());
    placed(cluster(&mut h, set_mode(Mode::RegionAffinity)));
    placed(cluster(&mut h, add_region("r1")));
    placed(cluster(&mut h, add_region("r2")));
    h
}

/// The group of region `name`, initialized, admitting `tenants`.
fn region(name: &str, tenants: &[&str]) -> H {
    let mut h = H::new(MemoryStore::new());
    placed(group(&mut h, init(name)));
    for tenant in tenants {
        placed(group(&mut h, admit(tenant)));
    }
    h
}

/// Applies `command` and asserts that it wrote nothing but the metadata.
fn apply_writes_nothing(h: &mut H, command: Command) -> Outcome {
    let before = h.store.clone();
    let outcome = h.apply(command);
    assert_unchanged(&before, &h.store);
    outcome
}

/// `after` is `before` with at most the metadata changed.
fn assert_unchanged(before: &MemoryStore, after: &MemoryStore) {
    let mut expected = before.clone();
    expected
        .commit(WriteSet {
            meta: Some(after.meta().unwrap()),
            ..WriteSet::default()
        })
        .unwrap();
    assert!(
        expected.dump() == after.dump(),
        "the command wrote more than the metadata"
    );
}

#[test]
#[should_panic(expected = "wrote more than the metadata")]
fn the_unchanged_check_sees_writes() {
    let mut h = region("r1", &["acme"]);
    let command = h.claim_command(&key("acme", "k1"), BODY_A, "w1");
    apply_writes_nothing(&mut h, command);
}

// ---------------------------------------------------------------------------------------
// The cluster configuration (global group)
// ---------------------------------------------------------------------------------------

#[test]
fn default_placement_is_global_and_admits_everyone() {
    let h = H::new(MemoryStore::new());
    let p = placement(&h);
    assert_eq!(p, Placement::default());
    assert_eq!(p.cluster.mode, Mode::Global);
    assert_eq!(p.cluster.version, 0);
    assert!(p.admits("acme"));
    assert!(p.failover().is_none());
}

#[test]
fn set_mode_switches_and_repeats_are_no_ops() {
    let mut h = H::new(MemoryStore::new());
    let p = placed(cluster(&mut h, set_mode(Mode::RegionAffinity)));
    assert_eq!(
        (p.cluster.mode, p.cluster.version),
        (Mode::RegionAffinity, 1)
    );
    assert_eq!(placement(&h), p);

    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Cluster(set_mode(Mode::RegionAffinity)),
    ));
    assert_eq!(again, p);

    let p = placed(cluster(&mut h, set_mode(Mode::Global)));
    assert_eq!((p.cluster.mode, p.cluster.version), (Mode::Global, 2));
    // Global to global: nothing to do.
    placed(apply_writes_nothing(
        &mut h,
        Command::Cluster(set_mode(Mode::Global)),
    ));
    assert_eq!(placement(&h).cluster.version, 2);
}

#[test]
fn regions_get_group_ids_in_order_and_repeats_are_no_ops() {
    let mut h = H::new(MemoryStore::new());
    // Regions may be defined in global mode already.
    let p = placed(cluster(&mut h, add_region("eu-west")));
    assert_eq!(p.cluster.mode, Mode::Global);
    assert_eq!(p.cluster.regions.get("eu-west"), Some(&1));
    assert_eq!(p.cluster.version, 1);
    let p = placed(cluster(&mut h, add_region("us-east")));
    assert_eq!(p.cluster.regions.get("us-east"), Some(&2));
    let p = placed(cluster(&mut h, add_region("ap-south")));
    assert_eq!(p.cluster.regions.get("ap-south"), Some(&3));
    assert_eq!(p.cluster.version, 3);

    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Cluster(add_region("us-east")),
    ));
    assert_eq!(again, p);
    assert_eq!(again.cluster.region_of(2), Some("us-east"));
    assert_eq!(again.cluster.region_of(GLOBAL_GROUP), None);
    assert_eq!(again.cluster.region_of(9), None);
}

#[test]
fn at_most_max_regions() {
    let mut h = H::new(MemoryStore::new());
    for i in 0..MAX_REGIONS {
        let p = placed(cluster(&mut h, add_region(&format!("r{i}"))));
        assert_eq!(p.cluster.regions.len(), i + 1);
        assert_eq!(p.cluster.regions[&format!("r{i}")], i as u64 + 1);
    }
    let version = placement(&h).cluster.version;
    let before = h.store.clone();
    let refusal = rejected(
        cluster(&mut h, add_region("one-too-many")),
        "PLACEMENT_CONFLICT",
    );
    assert!(refusal.to_string().contains(&MAX_REGIONS.to_string()));
    assert_unchanged(&before, &h.store);
    // An existing region is still a no-op, not a refusal.
    placed(cluster(&mut h, add_region("r3")));
    assert_eq!(placement(&h).cluster.version, version);
}

#[test]
fn region_names_are_validated() {
    let mut h = H::new(MemoryStore::new());
    let long = "r".repeat(65);
    for bad in ["", "eu west", "eu/west", "eu:west", "é", long.as_str()] {
        let outcome = apply_writes_nothing(&mut h, Command::Cluster(add_region(bad)));
        let refusal = rejected(outcome, "INVALID_ARGUMENT");
        assert!(
            matches!(refusal, Rejection::Invalid { field, .. } if field == idem_core::Field::Region),
            "{bad:?}: {refusal:?}"
        );
    }
    let outcome = apply_writes_nothing(&mut h, Command::Cluster(bind("bad tenant", "r1")));
    rejected(outcome, "INVALID_SCOPE");
    assert_eq!(placement(&h), Placement::default());
    // Node region names (the same rule) are accepted as they are.
    let p = placed(cluster(&mut h, add_region("EU-West.1")));
    assert_eq!(p.cluster.regions.get("EU-West.1"), Some(&1));
}

#[test]
fn bind_needs_region_affinity_mode() {
    let mut h = H::new(MemoryStore::new());
    placed(cluster(&mut h, add_region("r1")));
    let outcome = apply_writes_nothing(&mut h, Command::Cluster(bind("acme", "r1")));
    let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
    assert!(refusal.to_string().contains("region-affinity"), "{refusal}");
}

#[test]
fn bind_to_an_unknown_region_is_refused() {
    let mut h = global();
    let outcome = apply_writes_nothing(&mut h, Command::Cluster(bind("acme", "mars")));
    assert_eq!(
        rejected(outcome, "UNKNOWN_REGION"),
        Rejection::UnknownRegion {
            region: "mars".into()
        }
    );
}

#[test]
fn bind_makes_the_region_home_and_repeats_are_no_ops() {
    let mut h = global();
    let version = placement(&h).cluster.version;
    let p = placed(cluster(&mut h, bind("acme", "r1")));
    assert_eq!(p.cluster.homes.get("acme").map(String::as_str), Some("r1"));
    assert_eq!(p.cluster.version, version + 1);
    assert_eq!(p.cluster.group_of("acme"), 1);
    assert_eq!(p.cluster.group_of("other"), GLOBAL_GROUP);
    assert!(!p.admits("acme"), "the global group stops deciding acme");
    assert!(p.admits("other"));

    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Cluster(bind("acme", "r1")),
    ));
    assert_eq!(again, p);

    // A move between regions (the proposer released it from r1 first).
    let p = placed(cluster(&mut h, bind("acme", "r2")));
    assert_eq!(p.cluster.homes["acme"], "r2");
    assert_eq!(p.cluster.group_of("acme"), 2);
    assert_eq!(p.cluster.version, version + 2);
}

#[test]
fn bind_is_refused_once_the_tenant_has_records_in_the_global_group() {
    let mut h = global();
    h.acquire(&key("acme", "k1"), "w1");
    let outcome = apply_writes_nothing(&mut h, Command::Cluster(bind("acme", "r1")));
    assert_eq!(
        rejected(outcome, "TENANT_HOME_IMMUTABLE"),
        Rejection::TenantHomeImmutable {
            tenant: "acme".into()
        }
    );
    assert!(placement(&h).admits("acme"));
    // Tenants whose names share a prefix with acme are other tenants.
    placed(cluster(&mut h, bind("acm", "r1")));
    placed(cluster(&mut h, bind("acme2", "r1")));
    placed(cluster(&mut h, bind("acme-eu", "r2")));
    assert!(placement(&h).admits("acme"));
}

#[test]
fn a_tenant_whose_records_all_expired_may_be_bound() {
    let mut h = global();
    h.policy.retention = Duration::from_secs(1);
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    h.complete(&k, fence, H::result("ch_1"));
    // Terminal records count: the home stays.
    rejected(cluster(&mut h, bind("acme", "r1")), "TENANT_HOME_IMMUTABLE");
    h.advance(Duration::from_secs(2));
    let expired = h.apply(Command::Expire(idem_core::command::Expire { limit: 10 }));
    assert!(matches!(expired, Outcome::Expired { ref operation_ids } if operation_ids.len() == 1));
    placed(cluster(&mut h, bind("acme", "r1")));
}

#[test]
fn unbind_gives_the_tenant_back_to_the_global_group() {
    let mut h = global();
    placed(cluster(&mut h, bind("acme", "r1")));
    let version = placement(&h).cluster.version;
    let p = placed(cluster(&mut h, unbind("acme")));
    assert!(p.cluster.homes.is_empty());
    assert_eq!(p.cluster.version, version + 1);
    assert!(p.admits("acme"));
    assert_eq!(p.cluster.group_of("acme"), GLOBAL_GROUP);
    // Unbinding an unbound tenant changes nothing.
    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Cluster(unbind("acme")),
    ));
    assert_eq!(again, p);
}

#[test]
fn global_mode_is_refused_while_tenants_have_homes() {
    let mut h = global();
    placed(cluster(&mut h, bind("acme", "r1")));
    placed(cluster(&mut h, bind("globex", "r2")));
    let outcome = apply_writes_nothing(&mut h, Command::Cluster(set_mode(Mode::Global)));
    let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
    assert!(refusal.to_string().starts_with("2 tenant(s)"), "{refusal}");
    placed(cluster(&mut h, unbind("acme")));
    rejected(
        cluster(&mut h, set_mode(Mode::Global)),
        "PLACEMENT_CONFLICT",
    );
    placed(cluster(&mut h, unbind("globex")));
    let p = placed(cluster(&mut h, set_mode(Mode::Global)));
    assert_eq!(p.cluster.mode, Mode::Global);
    // The regions stay defined.
    assert_eq!(p.cluster.regions.len(), 2);
}

#[test]
fn group_of_follows_the_mode() {
    let mut config = ClusterConfig::default();
    config.regions.insert("r1".into(), 1);
    config.homes.insert("acme".into(), "r1".into());
    assert_eq!(config.group_of("acme"), GLOBAL_GROUP, "global mode");
    config.mode = Mode::RegionAffinity;
    assert_eq!(config.group_of("acme"), 1);
    // A home naming a region that is not defined (never written by apply) falls back.
    config.homes.insert("odd".into(), "r9".into());
    assert_eq!(config.group_of("odd"), GLOBAL_GROUP);
}

#[test]
fn the_global_group_refuses_claims_of_homed_tenants_and_writes_nothing() {
    let mut h = global();
    h.acquire(&key("other", "k1"), "w1");
    placed(cluster(&mut h, bind("acme", "r1")));
    let command = h.claim_command(&key("acme", "k1"), BODY_A, "w1");
    let outcome = apply_writes_nothing(&mut h, command);
    assert_eq!(rejected(outcome, "WRONG_GROUP"), Rejection::WrongGroup);
    assert!(h.record(&key("acme", "k1")).is_none());
    // Other tenants are still decided here.
    h.claim_expect(&key("other", "k2"), BODY_A, "w1", ClaimKind::Acquired);
}

#[test]
fn cluster_changes_are_refused_in_a_region_group() {
    let mut h = region("r1", &[]);
    for change in [
        set_mode(Mode::RegionAffinity),
        add_region("r2"),
        bind("acme", "r1"),
        unbind("acme"),
    ] {
        let outcome = apply_writes_nothing(&mut h, Command::Cluster(change));
        let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
        assert!(refusal.to_string().contains("global group"), "{refusal}");
    }
}

// ---------------------------------------------------------------------------------------
// A region group's own state
// ---------------------------------------------------------------------------------------

#[test]
fn init_makes_a_region_group_and_repeats_are_no_ops() {
    let mut h = H::new(MemoryStore::new());
    let p = placed(group(&mut h, init("r1")));
    let g = p.group.clone().unwrap();
    assert_eq!(g, RegionGroup::new("r1".into()));
    assert_eq!(
        (g.region.as_str(), g.home.as_str(), g.epoch),
        ("r1", "r1", 1)
    );
    assert!(g.admitted.is_empty());
    assert!(g.failover.is_none());
    // A region group decides only tenants it admitted.
    assert!(!p.admits("acme"));

    let again = placed(apply_writes_nothing(&mut h, Command::Group(init("r1"))));
    assert_eq!(again, p);
}

#[test]
fn init_for_another_region_is_a_conflict() {
    let mut h = region("r1", &["acme"]);
    let outcome = apply_writes_nothing(&mut h, Command::Group(init("r2")));
    let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
    assert!(refusal.to_string().contains("r1"), "{refusal}");
    assert_eq!(region_group(&h).region, "r1");
}

#[test]
fn init_is_refused_on_a_configured_global_group() {
    let mut h = global();
    let outcome = apply_writes_nothing(&mut h, Command::Group(init("r1")));
    let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
    assert!(refusal.to_string().contains("global group"), "{refusal}");
    assert!(placement(&h).group.is_none());
}

#[test]
fn group_changes_need_init() {
    let mut h = H::new(MemoryStore::new());
    for change in [
        admit("acme"),
        release("acme"),
        enter_failover(2, "r2"),
        GroupChange::EndFailover { leader_id: 1 },
        confirm_home("r2"),
    ] {
        let outcome = apply_writes_nothing(&mut h, Command::Group(change));
        let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
        assert!(refusal.to_string().contains("Init"), "{refusal}");
    }
}

#[test]
fn admit_and_release_are_idempotent() {
    let mut h = region("r1", &[]);
    let p = placed(group(&mut h, admit("acme")));
    assert!(p.admits("acme"));
    assert!(!p.admits("globex"));
    // Admission changes no epoch, and a repeat changes nothing.
    assert_eq!(p.group.as_ref().unwrap().epoch, 1);
    let again = placed(apply_writes_nothing(&mut h, Command::Group(admit("acme"))));
    assert_eq!(again, p);

    let p = placed(group(&mut h, release("acme")));
    assert!(!p.admits("acme"));
    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Group(release("acme")),
    ));
    assert_eq!(again, p);
}

#[test]
fn release_is_refused_once_the_tenant_has_records_here() {
    let mut h = region("r1", &["acme", "acme2"]);
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    let outcome = apply_writes_nothing(&mut h, Command::Group(release("acme")));
    assert_eq!(
        rejected(outcome, "TENANT_HOME_IMMUTABLE"),
        Rejection::TenantHomeImmutable {
            tenant: "acme".into()
        }
    );
    assert!(placement(&h).admits("acme"));
    // Also once the record is terminal.
    h.complete(&k, fence, H::result("ch_1"));
    rejected(group(&mut h, release("acme")), "TENANT_HOME_IMMUTABLE");
    // acme's records do not pin acme2.
    assert!(!placed(group(&mut h, release("acme2"))).admits("acme2"));
}

#[test]
fn a_region_group_refuses_claims_of_tenants_it_did_not_admit() {
    let mut h = region("r1", &["acme"]);
    h.acquire(&key("acme", "k1"), "w1");
    for risk in [Risk::Low, Risk::Normal, Risk::High] {
        h.policy.risk = risk;
        let command = h.claim_command(&key("globex", "k1"), BODY_A, "w1");
        let outcome = apply_writes_nothing(&mut h, command);
        assert_eq!(rejected(outcome, "WRONG_GROUP"), Rejection::WrongGroup);
    }
    // A released tenant is refused too.
    placed(group(&mut h, admit("initech")));
    placed(group(&mut h, release("initech")));
    let command = h.claim_command(&key("initech", "k1"), BODY_A, "w1");
    rejected(apply_writes_nothing(&mut h, command), "WRONG_GROUP");
}

/// Every command that names a tenant is refused by a group that does not decide it, even
/// when the record is there (a state the protocol never produces; built here by hand to
/// show that the placement check comes first).
#[test]
fn every_command_naming_a_tenant_is_refused_when_not_admitted() {
    let mut h = region("r1", &["acme"]);
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    let operation_id = h.record(&k).unwrap().operation_id;
    // Withdraw the admission behind apply's back.
    let mut p = placement(&h);
    p.group.as_mut().unwrap().admitted.clear();
    h.store
        .commit(WriteSet {
            placement: Some(p),
            ..WriteSet::default()
        })
        .unwrap();

    let owner = Fenced {
        target: k.clone(),
        fence,
    };
    let commands = [
        h.claim_command(&k, BODY_A, "w1"),
        Command::Start(owner.clone()),
        Command::RecordExternalCall(RecordExternalCall {
            owner: owner.clone(),
            call: ExternalCall::Calling,
        }),
        Command::RecordExternalCall(RecordExternalCall {
            owner: owner.clone(),
            call: ExternalCall::RemoteConfirmed {
                remote_ref: "ch_1".into(),
            },
        }),
        Command::Renew(Renew {
            owner: owner.clone(),
            lease: None,
        }),
        Command::Complete(Complete {
            owner: owner.clone(),
            result: H::result("ch_1"),
        }),
        Command::Fail(Fail {
            owner: owner.clone(),
            retryable: true,
            error: H::error("boom"),
        }),
        Command::Release(owner.clone()),
        Command::Cancel(owner),
        Command::PurgeSubject(PurgeSubject {
            tenant: "acme".into(),
            actor: "user-1".into(),
            reason: "GDPR-1".into(),
            admin: "alice".into(),
            after: None,
            limit: 10,
        }),
    ];
    for command in commands {
        let name = command.name();
        let outcome = apply_writes_nothing(&mut h, command);
        assert!(
            matches!(outcome, Outcome::Rejected(Rejection::WrongGroup)),
            "{name}: {outcome:?}"
        );
    }
    // Commands that name no tenant are not placement-checked.
    let outcome = h.apply(Command::Reconcile(idem_core::command::Reconcile {
        operation_id,
        expected_version: 1,
        target: idem_core::command::ReconcileTarget::RetryableFailure(H::error("stuck")),
        reason: "INC-1".into(),
        admin: "alice".into(),
    }));
    assert!(matches!(outcome, Outcome::Record(_)), "{outcome:?}");
}

#[test]
fn invalid_commands_are_refused_before_placement() {
    let mut h = region("r1", &[]);
    let mut command = h.claim_command(&key("acme", "k1"), BODY_A, "w1");
    if let Command::Claim(claim) = &mut command {
        claim.fingerprints.clear();
    }
    rejected(apply_writes_nothing(&mut h, command), "INVALID_FINGERPRINT");
}

// ---------------------------------------------------------------------------------------
// Failover
// ---------------------------------------------------------------------------------------

/// r1's group, admitting acme, in failover since now with leader 4 in r2.
fn in_failover(h: &mut H) -> u64 {
    let p = placed(group(h, enter_failover(4, "r2")));
    p.group.unwrap().epoch
}

#[test]
fn enter_failover_records_the_leader_and_bumps_the_epoch() {
    let mut h = region("r1", &["acme"]);
    h.advance(Duration::from_secs(5));
    let now = h.now;
    let p = placed(group(&mut h, enter_failover(4, "r2")));
    let g = p.group.clone().unwrap();
    assert_eq!(g.epoch, 2);
    let failover = g.failover.clone().unwrap();
    assert_eq!(failover.since, Timestamp(now));
    assert_eq!(failover.leader_id, 4);
    assert_eq!(failover.leader_region, "r2");
    assert_eq!(p.failover(), Some(&failover));
    // Tenants stay admitted.
    assert!(p.admits("acme"));

    // A second report (another leader, later) keeps the first: same epoch, same since.
    h.advance(Duration::from_secs(5));
    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Group(enter_failover(5, "r3")),
    ));
    assert_eq!(again, p);
}

#[test]
fn a_leader_in_the_home_region_is_no_failover() {
    let mut h = region("r1", &[]);
    let outcome = apply_writes_nothing(&mut h, Command::Group(enter_failover(1, "r1")));
    let refusal = rejected(outcome, "PLACEMENT_CONFLICT");
    assert!(refusal.to_string().contains("home region"), "{refusal}");
    let outcome = apply_writes_nothing(&mut h, Command::Group(enter_failover(1, "R 1")));
    rejected(outcome, "INVALID_ARGUMENT");
}

#[test]
fn normal_and_low_risk_claims_continue_during_failover() {
    let mut h = region("r1", &["acme"]);
    let k = key("acme", "old");
    h.acquire(&k, "w1");
    in_failover(&mut h);
    for (risk, name) in [(Risk::Low, "low"), (Risk::Normal, "normal")] {
        h.policy.risk = risk;
        let out = h.claim_expect(&key("acme", name), BODY_A, "w1", ClaimKind::Acquired);
        assert_eq!(out.record.policy.risk, risk);
    }
    // A NORMAL takeover of an expired lease too.
    h.advance(PAST_LEASE);
    let out = h.claim_expect(&k, BODY_A, "w2", ClaimKind::TakenOver);
    assert_eq!(out.record.fence, 2);
}

#[test]
fn high_risk_new_claims_are_refused_with_retry_after() {
    let mut h = region("r1", &["acme"]);
    in_failover(&mut h);
    h.policy.risk = Risk::High;
    let command = h.claim_command(&key("acme", "k1"), BODY_A, "w1");
    let outcome = apply_writes_nothing(&mut h, command);
    let refusal = rejected(outcome, "REGION_FAILOVER");
    assert_eq!(
        refusal,
        Rejection::RegionFailover {
            retry_after: FAILOVER_RETRY_AFTER
        }
    );
    assert!(h.record(&key("acme", "k1")).is_none());
}

#[test]
fn high_risk_takeover_is_refused_and_nothing_is_written() {
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    h.start(&k, fence);
    let stored = h.record(&k).unwrap();
    in_failover(&mut h);
    h.advance(PAST_LEASE);
    // Whatever the new claim says its risk is: the record's risk decides.
    h.policy.risk = Risk::Low;
    let command = h.claim_command(&k, BODY_A, "w2");
    let outcome = apply_writes_nothing(&mut h, command);
    rejected(outcome, "REGION_FAILOVER");
    assert_eq!(h.record(&k).unwrap(), stored);
    // The old owner still holds its fence: it may finish (its lease lapsed, nobody took over).
    let record = match h.complete(&k, fence, H::result("ch_1")) {
        Outcome::Record(record) => record,
        other => panic!("{other:?}"),
    };
    assert_eq!(record.state, State::Completed);
}

#[test]
fn high_risk_takeover_of_a_retryable_failure_is_refused() {
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    h.fail(&k, fence, true);
    in_failover(&mut h);
    let command = h.claim_command(&k, BODY_A, "w2");
    rejected(apply_writes_nothing(&mut h, command), "REGION_FAILOVER");
}

#[test]
fn a_redelivered_high_risk_claim_is_still_answered() {
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    let k = key("acme", "k1");
    let first = h.claim_expect(&k, BODY_A, "w1", ClaimKind::Acquired);
    in_failover(&mut h);
    let command = h.claim_command(&k, BODY_A, "w1");
    let again = claimed(apply_writes_nothing(&mut h, command));
    assert_eq!(again.kind, ClaimKind::Acquired);
    assert!(again.redelivered);
    assert_eq!(again.record, first.record);

    // A takeover made before the failover is redelivered to its taker as well.
    let k2 = key("acme", "k2");
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    h.acquire(&k2, "w1");
    h.advance(PAST_LEASE);
    let taken = h.claim_expect(&k2, BODY_A, "w2", ClaimKind::TakenOver);
    in_failover(&mut h);
    let command = h.claim_command(&k2, BODY_A, "w2");
    let again = claimed(apply_writes_nothing(&mut h, command));
    assert_eq!(
        (again.kind, again.redelivered),
        (ClaimKind::TakenOver, true)
    );
    assert_eq!(again.record.fence, taken.record.fence);
    // Someone else meanwhile learns IN_PROGRESS, as always.
    h.claim_expect(&k2, BODY_A, "w3", ClaimKind::InProgress);
}

#[test]
fn terminal_high_risk_records_are_still_replayed() {
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    let done = key("acme", "done");
    let fence = h.acquire(&done, "w1");
    h.complete(&done, fence, H::result("ch_1"));
    let declined = key("acme", "declined");
    let fence = h.acquire(&declined, "w1");
    h.fail(&declined, fence, false);
    let cancelled = key("acme", "cancelled");
    let fence = h.acquire(&cancelled, "w1");
    h.cancel(&cancelled, fence);
    in_failover(&mut h);

    let cases = [
        (&done, BODY_A, ClaimKind::Completed),
        (&done, BODY_B, ClaimKind::FingerprintMismatch),
        (&declined, BODY_A, ClaimKind::Failed),
        (&cancelled, BODY_A, ClaimKind::Failed),
    ];
    for (k, body, kind) in cases {
        let command = h.claim_command(k, body, "w9");
        let out = claimed(apply_writes_nothing(&mut h, command));
        assert_eq!(out.kind, kind, "{k:?}");
    }
    let out = h.claim(&done, BODY_A, "w9");
    assert_eq!(out.record.result, Some(H::result("ch_1")));
}

#[test]
fn an_in_flight_high_risk_call_still_escalates_during_failover() {
    // Not a takeover: nobody runs the side effect, an operator decides.
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    h.calling(&k, fence);
    in_failover(&mut h);
    h.advance(PAST_LEASE);
    let out = h.claim_expect(&k, BODY_A, "w2", ClaimKind::NeedsReconciliation);
    assert_eq!(out.record.state, State::NeedsReconciliation);
    assert_eq!(out.record.fence, fence);
}

#[test]
fn end_failover_bumps_the_epoch_and_reopens_high_risk_claims() {
    let mut h = region("r1", &["acme"]);
    let epoch = in_failover(&mut h);
    let p = placed(group(&mut h, GroupChange::EndFailover { leader_id: 1 }));
    let g = p.group.unwrap();
    assert_eq!(g.epoch, epoch + 1);
    assert!(g.failover.is_none());
    assert_eq!(g.home, "r1");
    // Ending a failover that is not there changes nothing.
    let again = placed(apply_writes_nothing(
        &mut h,
        Command::Group(GroupChange::EndFailover { leader_id: 1 }),
    ));
    assert_eq!(again.group.unwrap().epoch, epoch + 1);

    h.policy.risk = Risk::High;
    h.claim_expect(&key("acme", "k1"), BODY_A, "w1", ClaimKind::Acquired);
    // And a second failover is a new epoch.
    assert_eq!(in_failover(&mut h), epoch + 2);
}

#[test]
fn confirm_home_is_audited_and_ends_the_failover() {
    let mut h = region("r1", &["acme"]);
    let epoch = in_failover(&mut h);
    h.advance(Duration::from_secs(60));
    let now = h.now;
    let p = placed(group(&mut h, confirm_home("r2")));
    let g = p.group.unwrap();
    assert_eq!(g.home, "r2");
    assert_eq!(g.region, "r1", "the group keeps its name");
    assert_eq!(g.epoch, epoch + 1);
    assert!(g.failover.is_none());
    assert!(g.admitted.contains("acme"));

    let audit = h.store.audit(0, 10).unwrap();
    assert_eq!(audit.len(), 1);
    let entry = &audit[0];
    assert_eq!(entry.seq, 1);
    assert_eq!(entry.at, Timestamp(now));
    assert_eq!(entry.admin, "alice");
    assert_eq!(entry.reason, "INC-42: eu-west lost");
    assert_eq!(
        entry.action,
        AuditAction::ConfirmHome {
            group_region: "r1".into(),
            from: "r1".into(),
            to: "r2".into(),
            epoch: epoch + 1,
        }
    );

    // HIGH-risk claims are open again.
    h.policy.risk = Risk::High;
    h.claim_expect(&key("acme", "k1"), BODY_A, "w1", ClaimKind::Acquired);
    // r2 is home now: a leader there is no failover, a leader back in r1 is.
    rejected(group(&mut h, enter_failover(4, "r2")), "PLACEMENT_CONFLICT");
    let p = placed(group(&mut h, enter_failover(1, "r1")));
    assert_eq!(p.group.unwrap().epoch, epoch + 2);
}

#[test]
fn confirm_home_needs_a_failover() {
    let mut h = region("r1", &["acme"]);
    let outcome = apply_writes_nothing(&mut h, Command::Group(confirm_home("r2")));
    assert_eq!(
        rejected(outcome, "NOT_IN_FAILOVER"),
        Rejection::NotInFailover
    );
    assert!(h.store.audit(0, 10).unwrap().is_empty());
    assert_eq!(region_group(&h).epoch, 1);
}

#[test]
fn confirm_home_needs_a_reason_and_an_admin() {
    let mut h = region("r1", &["acme"]);
    in_failover(&mut h);
    for (reason, admin, field) in [("", "alice", "reason"), ("INC-1", "", "admin")] {
        let change = GroupChange::ConfirmHome {
            new_home: "r2".into(),
            reason: reason.into(),
            admin: admin.into(),
        };
        let outcome = apply_writes_nothing(&mut h, Command::Group(change));
        let refusal = rejected(outcome, "INVALID_ARGUMENT");
        assert!(refusal.to_string().contains(field), "{refusal}");
    }
    assert!(placement(&h).failover().is_some());
}

#[test]
fn audit_sequence_continues_across_confirmations() {
    let mut h = region("r1", &["acme"]);
    in_failover(&mut h);
    placed(group(&mut h, confirm_home("r2")));
    placed(group(&mut h, enter_failover(7, "r3")));
    placed(group(&mut h, confirm_home("r3")));
    let audit = h.store.audit(0, 10).unwrap();
    assert_eq!(
        audit.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2],
        "{audit:?}"
    );
    assert!(
        matches!(&audit[1].action, AuditAction::ConfirmHome { from, to, .. } if from == "r2" && to == "r3")
    );
    assert_eq!(region_group(&h).epoch, 5);
}

// ---------------------------------------------------------------------------------------
// Local replays
// ---------------------------------------------------------------------------------------

/// A fingerprint of another algorithm or schema version.
fn foreign(algorithm: &str, schema_version: u32, body: u8) -> Fingerprint {
    Fingerprint {
        algorithm: algorithm.into(),
        schema_version,
        digest: vec![body; 32],
    }
}

/// A store holding one record of `key` in `state`.
fn record_in(state: State, risk: Risk) -> (H, RecordKey) {
    let mut h = H::new(MemoryStore::new());
    h.policy.risk = risk;
    let k = H::target("k1");
    let fence = h.acquire(&k, "w1");
    match state {
        State::Pending => {}
        State::InProgress => {
            h.start(&k, fence);
        }
        State::Completed => {
            h.complete(&k, fence, H::result("ch_1"));
        }
        State::RetryableFailure => {
            h.fail(&k, fence, true);
        }
        State::TerminalFailure => {
            h.fail(&k, fence, false);
        }
        State::Cancelled => {
            h.cancel(&k, fence);
        }
        State::NeedsReconciliation => {
            h.calling(&k, fence);
            h.advance(PAST_LEASE);
            h.claim_expect(&k, BODY_A, "w2", ClaimKind::NeedsReconciliation);
        }
    }
    assert_eq!(h.record(&k).unwrap().state, state);
    (h, k)
}

fn offers() -> Vec<(&'static str, Vec<Fingerprint>)> {
    vec![
        ("same", vec![H::fingerprint(BODY_A)]),
        ("different", vec![H::fingerprint(BODY_B)]),
        ("other algorithm", vec![foreign("blake3/v1", 1, BODY_A)]),
        ("other schema", vec![foreign("jcs-sha256/v1", 2, BODY_A)]),
        (
            "same among others",
            vec![foreign("blake3/v1", 1, BODY_B), H::fingerprint(BODY_A)],
        ),
        (
            "different among others",
            vec![foreign("blake3/v1", 1, BODY_A), H::fingerprint(BODY_B)],
        ),
    ]
}

/// The claim command of `offered` fingerprints by a new holder.
fn claim_with(h: &mut H, k: &RecordKey, offered: &[Fingerprint]) -> Command {
    let mut command = h.claim_command(k, BODY_A, "w-replay");
    if let Command::Claim(claim) = &mut command {
        claim.fingerprints = offered.to_vec();
    }
    command
}

#[test]
fn replay_agrees_with_apply_for_every_terminal_state_and_fingerprint() {
    let expected_kind = |state: State, offer: &str| match offer {
        "different" | "different among others" => ClaimKind::FingerprintMismatch,
        "other algorithm" | "other schema" => ClaimKind::FingerprintUnverifiable,
        _ if state == State::Completed => ClaimKind::Completed,
        _ => ClaimKind::Failed,
    };
    for risk in [Risk::Normal, Risk::High] {
        for state in [State::Completed, State::TerminalFailure, State::Cancelled] {
            let (mut h, k) = record_in(state, risk);
            let record = h.record(&k).unwrap();
            for (offer, fingerprints) in offers() {
                let local = replay(&record, &fingerprints)
                    .unwrap_or_else(|| panic!("{state:?}/{offer}: no local answer"));
                let command = claim_with(&mut h, &k, &fingerprints);
                let applied = claimed(apply_writes_nothing(&mut h, command));
                assert_eq!(local, applied, "{risk:?}/{state:?}/{offer}");
                assert_eq!(local.kind, expected_kind(state, offer), "{state:?}/{offer}");
                assert_eq!(local.record, record);
                assert!(!local.redelivered && local.retry_after.is_none());
            }
        }
    }
}

#[test]
fn replay_agrees_with_apply_during_failover() {
    let mut h = region("r1", &["acme"]);
    h.policy.risk = Risk::High;
    let k = key("acme", "k1");
    let fence = h.acquire(&k, "w1");
    h.complete(&k, fence, H::result("ch_1"));
    in_failover(&mut h);
    let record = h.record(&k).unwrap();
    for (offer, fingerprints) in offers() {
        let local = replay(&record, &fingerprints).unwrap();
        let command = claim_with(&mut h, &k, &fingerprints);
        let applied = claimed(apply_writes_nothing(&mut h, command));
        assert_eq!(local, applied, "{offer}");
    }
}

#[test]
fn replay_leaves_records_that_may_change_to_the_leader() {
    for state in [
        State::Pending,
        State::InProgress,
        State::RetryableFailure,
        State::NeedsReconciliation,
    ] {
        let (h, k) = record_in(state, Risk::High);
        let record: Record = h.record(&k).unwrap();
        for (offer, fingerprints) in offers() {
            assert_eq!(replay(&record, &fingerprints), None, "{state:?}/{offer}");
        }
    }
}

#[test]
fn replay_of_a_purged_record_is_the_tombstone() {
    let (mut h, k) = record_in(State::Completed, Risk::Normal);
    h.apply(Command::PurgeSubject(PurgeSubject {
        tenant: "acme".into(),
        actor: "user-1".into(),
        reason: "GDPR-1".into(),
        admin: "alice".into(),
        after: None,
        limit: 10,
    }));
    let record = h.record(&k).unwrap();
    assert!(record.result.as_ref().unwrap().purged);
    let local = replay(&record, &[H::fingerprint(BODY_A)]).unwrap();
    let command = claim_with(&mut h, &k, &[H::fingerprint(BODY_A)]);
    assert_eq!(claimed(h.apply(command)), local);
    assert_eq!(local.kind, ClaimKind::Completed);
    assert_eq!(local.record.stage, Stage::LocalDone);
}
