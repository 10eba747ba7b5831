//! The placement a reader sees is published by the state machine (not read from RocksDB
//! per call): it must follow every apply that changes it, be visible no later than the
//! index that changed it, and survive a restart. A membership entry that fulfils a pending
//! membership intent (kept in the placement state) is audited in the same batch as the
//! applied membership.

use crate::common;

use std::collections::BTreeSet;

use common::{apply, entries, log_id, membership, NODE};
use idem_core::audit::{MembershipIntent, MembershipKind, MembershipNote};
use idem_core::command::Audited;
use idem_core::placement::{ClusterChange, Mode};
use idem_core::{AuditAction, Command, Timestamp};
use idem_store::{Entry, Request};
use openraft::entry::RaftEntry;
use openraft::Membership;
use tempfile::TempDir;

fn change(change: ClusterChange, stamp: u64) -> Request {
    Request {
        stamp: Timestamp(stamp),
        command: Command::Cluster(change).into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn applied_placement_is_published_before_the_index_and_survives_restart() {
    let dir = TempDir::new().unwrap();
    {
        let (_log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
        assert_eq!(reader.placement().cluster.mode, Mode::Global);
        let mut applied = reader.subscribe();
        let requests = [
            change(ClusterChange::SetMode(Mode::RegionAffinity), 1_000),
            change(ClusterChange::AddRegion { name: "eu".into() }, 2_000),
        ];
        let mut all = vec![membership(1, 1, &[NODE])];
        all.extend(entries(1, 2, &requests));
        apply(&mut sm, all).await;
        // Whoever sees the new index sees the placement that index produced.
        assert_eq!(*applied.borrow_and_update(), 3);
        let placement = reader.placement();
        assert_eq!(placement.cluster.mode, Mode::RegionAffinity);
        assert!(placement.cluster.regions.contains_key("eu"));

        // An entry that does not touch placement leaves the published value alone.
        let other = change(ClusterChange::SetMode(Mode::RegionAffinity), 3_000);
        apply(&mut sm, entries(1, 4, &[other])).await;
        assert!(reader.placement().cluster.regions.contains_key("eu"));
    }
    let (_log, _sm, reader) = idem_store::open(dir.path()).unwrap();
    let placement = reader.placement();
    assert_eq!(placement.cluster.mode, Mode::RegionAffinity);
    assert!(placement.cluster.regions.contains_key("eu"));
}

/// A membership entry of `configs` (two: a joint membership) and `learners`.
fn members(index: u64, configs: &[&[u64]], learners: &[u64]) -> Entry {
    let configs = configs
        .iter()
        .map(|c| c.iter().copied().collect::<BTreeSet<u64>>())
        .collect();
    let learners = learners.iter().copied().collect::<BTreeSet<u64>>();
    Entry::new_membership(
        log_id(1, index),
        Membership::new_with_defaults(configs, learners),
    )
}

fn intent(index: u64, kind: MembershipKind, member: u64) -> Entry {
    let intent = MembershipIntent { kind, member };
    let request = Request {
        stamp: Timestamp(1_000 * index),
        command: Command::MembershipIntent(Audited::new(intent, "alice", "CHG-9")).into(),
    };
    Entry::new_normal(log_id(1, index), request)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_membership_entry_is_audited_in_the_batch_that_applies_it() {
    let dir = TempDir::new().unwrap();
    {
        let (_log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
        // The first membership has no intent: no entry. Then an intent and its change.
        let first = vec![
            membership(1, 1, &[1, 2, 3]),
            intent(2, MembershipKind::Add, 4),
        ];
        apply(&mut sm, first).await;
        assert!(reader.audit(0, 10).unwrap().is_empty());
        assert_eq!(reader.placement().membership_intents.len(), 1);
        apply(&mut sm, vec![members(3, &[&[1, 2, 3]], &[4])]).await;
        let log = reader.audit(0, 10).unwrap();
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(
            (log[0].admin.as_str(), log[0].reason.as_str()),
            ("alice", "CHG-9")
        );
        let added = MembershipNote {
            kind: MembershipKind::Add,
            member: 4,
            voters: vec![1, 2, 3],
            learners: vec![4],
        };
        let expected = AuditAction::MembershipChange {
            note: added,
            index: 3,
        };
        assert_eq!(log[0].action, expected);
        assert_eq!(reader.membership().unwrap().log_id(), &Some(log_id(1, 3)));
        assert!(reader.placement().membership_intents.is_empty());

        // A promote goes through a joint membership, which is not audited: one entry, for
        // the membership it results in, applied in one batch with the intent.
        let promote = vec![
            intent(4, MembershipKind::Promote, 4),
            members(5, &[&[1, 2, 3], &[1, 2, 3, 4]], &[]),
            members(6, &[&[1, 2, 3, 4]], &[]),
        ];
        apply(&mut sm, promote).await;
        let log = reader.audit(0, 10).unwrap();
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(matches!(
            &log[1].action,
            AuditAction::MembershipChange { index: 6, note } if note.voters == [1, 2, 3, 4]
        ));
    }
    // Both entries were written with the memberships they audit.
    let (_log, _sm, reader) = idem_store::open(dir.path()).unwrap();
    assert_eq!(reader.audit(0, 10).unwrap().len(), 2);
    assert_eq!(reader.membership().unwrap().log_id(), &Some(log_id(1, 6)));
}
