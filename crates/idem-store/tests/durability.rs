//! The state machine against the reference store, restart durability, and snapshot
//! transfer between two stores.

use crate::common;

use common::{
    append, apply, dump, entries, log_id, membership, receive, reference, snapshotted, workload,
    NODE,
};
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
use tempfile::TempDir;

/// Applied in batches through Raft, the state equals the reference store's after applying
/// the same commands one at a time; the applied index is published to readers.
#[tokio::test(flavor = "multi_thread")]
async fn batched_apply_matches_reference_store() {
    let dir = TempDir::new().unwrap();
    let (_log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
    let requests = workload(12);
    let mut watch = reader.subscribe();
    let mut all = vec![membership(1, 1, &[NODE])];
    all.extend(entries(1, 2, &requests));
    let last = all.len() as u64;
    for chunk in all.chunks(7) {
        apply(&mut sm, chunk.to_vec()).await;
    }
    assert_eq!(dump(&reader), reference(&requests));
    assert!(
        !dump(&reader).audit.is_empty(),
        "the workload writes an audit entry"
    );
    assert_eq!(reader.applied().unwrap(), Some(log_id(1, last)));
    assert_eq!(*watch.borrow_and_update(), last);
    let (applied, members) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(1, last)));
    assert_eq!(members.log_id(), &Some(log_id(1, 1)));
}

/// Operation-id lookups go through the index to the record.
#[tokio::test(flavor = "multi_thread")]
async fn reader_finds_records_by_operation_id() {
    let dir = TempDir::new().unwrap();
    let (_log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
    apply(&mut sm, entries(1, 1, &workload(3))).await;
    let records = reader.scan(&[], None, 100).unwrap();
    assert!(!records.is_empty());
    for record in records {
        assert_eq!(
            reader.operation(&record.operation_id).unwrap(),
            Some(record.clone())
        );
        assert_eq!(reader.record(&record.key).unwrap(), Some(record));
    }
}

/// Everything survives a close and reopen: log, vote, committed, applied state, records
/// and the current snapshot.
#[tokio::test(flavor = "multi_thread")]
async fn reopen_keeps_log_vote_state_and_snapshot() {
    let dir = TempDir::new().unwrap();
    let requests = workload(5);
    let mut all = vec![membership(1, 1, &[NODE])];
    all.extend(entries(1, 2, &requests));
    let last = log_id(1, all.len() as u64);
    let vote = idem_store::Vote::new_committed(1, NODE);
    let (before, snapshot_meta) = {
        let (mut log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
        append(&mut log, all.clone()).await;
        log.save_vote(&vote).await.unwrap();
        log.save_committed(Some(last)).await.unwrap();
        apply(&mut sm, all[..4].to_vec()).await;
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        apply(&mut sm, all[4..].to_vec()).await;
        (dump(&reader), snapshot.meta)
    };
    let (mut log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(last));
    assert_eq!(log.try_get_log_entries(..).await.unwrap().len(), all.len());
    assert_eq!(log.read_vote().await.unwrap(), Some(vote));
    assert_eq!(log.read_committed().await.unwrap(), Some(last));
    assert_eq!(dump(&reader), before);
    assert_eq!(dump(&reader), reference(&requests));
    assert_eq!(reader.applied().unwrap(), Some(last));
    assert_eq!(*reader.subscribe().borrow(), last.index);
    let current = sm
        .get_current_snapshot()
        .await
        .unwrap()
        .expect("snapshot survives");
    assert_eq!(current.meta, snapshot_meta);
    assert_eq!(current.meta.last_log_id, Some(log_id(1, 4)));
}

/// A snapshot built on one store and installed on another (that had different state)
/// reproduces the state exactly, survives a restart, and rebuilds to the same bytes.
#[tokio::test(flavor = "multi_thread")]
async fn snapshot_install_replaces_state() {
    let (leader_dir, follower_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let (_l_log, mut leader, leader_reader) = idem_store::open(leader_dir.path()).unwrap();
    let requests = workload(8);
    let mut all = vec![membership(2, 1, &[NODE, 2, 3])];
    all.extend(entries(2, 2, &requests));
    apply(&mut leader, all).await;
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let bytes = std::fs::read(snapshot.snapshot.path()).unwrap();
    assert_eq!(bytes.len() as u64, snapshot.snapshot.len());

    let installed_dump = {
        let (_f_log, mut follower, follower_reader) =
            idem_store::open(follower_dir.path()).unwrap();
        // Stale, different state that the snapshot must wipe out.
        apply(&mut follower, entries(1, 1, &workload(20)[40..])).await;
        assert_ne!(dump(&follower_reader), dump(&leader_reader));
        let watch = follower_reader.subscribe();
        let received = receive(&follower, &bytes);
        follower
            .install_snapshot(&snapshot.meta, received)
            .await
            .unwrap();
        assert_eq!(dump(&follower_reader), dump(&leader_reader));
        assert_eq!(
            follower_reader.applied().unwrap(),
            snapshot.meta.last_log_id
        );
        assert_eq!(
            follower_reader.membership().unwrap(),
            snapshot.meta.last_membership
        );
        assert!(watch.has_changed().unwrap());
        dump(&follower_reader)
    };

    let (_f_log, mut follower, follower_reader) = idem_store::open(follower_dir.path()).unwrap();
    assert_eq!(dump(&follower_reader), installed_dump);
    let current = follower.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snapshot.meta);
    assert_eq!(std::fs::read(current.snapshot.path()).unwrap(), bytes);
    let rebuilt = follower
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(rebuilt.snapshot.path()).unwrap(),
        bytes,
        "same state, same bytes"
    );
}

/// The leader's own snapshot file (not one received into this store) can be installed:
/// it is copied, and the original is left alone.
#[tokio::test(flavor = "multi_thread")]
async fn snapshot_of_another_store_is_copied_on_install() {
    let (leader_dir, follower_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let (_l_log, mut leader, leader_reader) = idem_store::open(leader_dir.path()).unwrap();
    apply(&mut leader, entries(1, 1, &workload(5))).await;
    let snapshot = leader.get_current_snapshot().await.unwrap();
    assert!(snapshot.is_none());
    let built = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let original = built.snapshot.path().to_owned();
    let (_f_log, mut follower, follower_reader) = idem_store::open(follower_dir.path()).unwrap();
    follower
        .install_snapshot(&built.meta, built.snapshot)
        .await
        .unwrap();
    assert_eq!(dump(&follower_reader), dump(&leader_reader));
    assert!(original.exists(), "the leader's snapshot is still there");
}

/// A damaged snapshot is refused as a whole, the state is left untouched, and the
/// received file is deleted.
#[tokio::test(flavor = "multi_thread")]
async fn corrupt_snapshot_is_refused() {
    let dir = TempDir::new().unwrap();
    let (_log, mut sm, reader, meta, bytes) = snapshotted(dir.path()).await;
    let before = dump(&reader);
    let mut damaged = bytes.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let received = receive(&sm, &damaged);
    assert!(sm.install_snapshot(&meta, received).await.is_err());
    let truncated = &bytes[..bytes.len() - 1];
    let received = receive(&sm, truncated);
    assert!(sm.install_snapshot(&meta, received).await.is_err());
    let mut foreign = bytes.clone();
    foreign[..8].copy_from_slice(b"NOTIDEM!");
    let received = receive(&sm, &foreign);
    assert!(sm.install_snapshot(&meta, received).await.is_err());
    assert_eq!(dump(&reader), before);
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(std::fs::read(current.snapshot.path()).unwrap(), bytes);
    let partial = dir.path().join("snapshots").join("partial");
    assert_eq!(
        std::fs::read_dir(partial).unwrap().count(),
        0,
        "refused files are deleted"
    );
}
