//! Fuzzing the snapshot and backup readers.
//!
//! A snapshot arrives from the leader (`InstallSnapshot`) and a backup file from an
//! operator; both can be damaged in transit or on disk, or forged. Reading one must end in
//! an installed state or an error that changes nothing — never a panic, and never an
//! allocation sized by a length the file merely claims. Each case mutates a real snapshot
//! (or backup): a byte flipped, a slice deleted, repeated or replaced, a length prefix set
//! huge, the file cut short. Half the cases then recompute the trailing SHA-256, as a forger
//! (or a bug on the sending side) would, so the frame and header decoders behind the digest
//! check see the damage too. Failing cases are kept in `proptest-regressions/`.

use crate::common;

use std::io::Write as _;

use common::{apply, dump, entries, receive, snapshotted, workload};
use idem_store::{BackupFile, BackupOrigin, NodeInfo};
use idem_testkit::mutation::{mutated, LengthPrefix, Mutation, MutationSpace};
use openraft::storage::RaftStateMachine;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

/// Length of the trailing digest of both formats.
const DIGEST: usize = 32;

/// The mutations drawn for these encodings.
const SPACE: MutationSpace = MutationSpace {
    max_span: 32,
    max_insert: 16,
    length_prefix: Some(LengthPrefix::U32Be),
};

/// `original` damaged by `mutations`, with its digest recomputed when `redigest`.
fn damage(original: &[u8], mutations: &[Mutation], redigest: bool) -> Vec<u8> {
    let mut bytes = mutated(original, mutations);
    if redigest && bytes.len() >= DIGEST {
        let body = bytes.len() - DIGEST;
        let digest = Sha256::digest(&bytes[..body]);
        bytes[body..].copy_from_slice(&digest);
    }
    bytes
}

fn case() -> impl Strategy<Value = (Vec<Mutation>, bool)> {
    (SPACE.mutations(1..4), any::<bool>())
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        // Failures are kept in proptest-regressions/, as the proptest! macro does.
        source_file: Some(file!()),
        ..Config::default()
    })
}

/// A damaged snapshot is refused and leaves the state as it was, or is installed whole.
#[tokio::test(flavor = "multi_thread")]
async fn damaged_snapshots_are_refused_without_a_trace() {
    let dir = TempDir::new().unwrap();
    let (_log, sm, reader, meta, original) = snapshotted(dir.path()).await;
    let before = dump(&reader);
    let handle = tokio::runtime::Handle::current();
    let sm = std::sync::Mutex::new(sm);
    tokio::task::block_in_place(|| {
        runner(200)
            .run(&case(), |(mutations, redigest)| {
                let bytes = damage(&original, &mutations, redigest);
                let mut sm = sm.lock().unwrap();
                let received = receive(&sm, &bytes);
                let installed = handle.block_on(sm.install_snapshot(&meta, received));
                if installed.is_err() {
                    prop_assert!(
                        dump(&reader) == before,
                        "a refused snapshot changed the state"
                    );
                } else {
                    // Only a byte-identical snapshot can pass both the frame checks and the
                    // digest; put the original back for the next case otherwise.
                    let received = receive(&sm, &original);
                    handle
                        .block_on(sm.install_snapshot(&meta, received))
                        .unwrap();
                }
                Ok(())
            })
            .unwrap();
    });
}

/// A backup of `groups` groups (the global group and region groups 1, 2, ...), each with a
/// small workload applied; the stores live under `dir`.
async fn backup_of(dir: &std::path::Path, groups: u64) -> Vec<u8> {
    let mut stores = Vec::new();
    for group in 0..groups {
        let (log, mut sm, reader) = idem_store::open(&dir.join(format!("group-{group}"))).unwrap();
        apply(&mut sm, entries(1, 1, &workload(4))).await;
        stores.push((log, sm, reader, group));
    }
    let cuts = stores
        .iter()
        .map(|(_, _, reader, group)| {
            let origin = BackupOrigin {
                group: *group,
                node_id: 1,
                taken_at_ms: 7,
            };
            reader.backup_cut(origin).unwrap()
        })
        .collect();
    let mut original = Vec::new();
    idem_store::write_backup(cuts, &mut original).unwrap();
    original
}

/// Damaged copies of `original` are refused by `BackupFile::open` or `restore`, never panic;
/// a refused restore leaves its directory empty.
fn fuzz_backup(dir: &std::path::Path, original: &[u8]) {
    let file = dir.join("backup");
    let count = std::cell::Cell::new(0);
    tokio::task::block_in_place(|| {
        runner(100)
            .run(&case(), |(mutations, redigest)| {
                let bytes = damage(original, &mutations, redigest);
                let mut out = std::fs::File::create(&file).unwrap();
                out.write_all(&bytes).unwrap();
                drop(out);
                let Ok(backup) = BackupFile::open(&file) else {
                    return Ok(());
                };
                count.set(count.get() + 1);
                let target = dir.join(format!("restored-{}", count.get()));
                let node = NodeInfo {
                    raft_addr: "10.0.0.5:7410".into(),
                    ..NodeInfo::default()
                };
                if idem_store::restore(&backup, &target, 5, node).is_err() {
                    let left = std::fs::read_dir(&target).map_or(0, |d| d.count());
                    prop_assert_eq!(left, 0, "a refused restore left files behind");
                }
                let _ = std::fs::remove_dir_all(&target);
                Ok(())
            })
            .unwrap();
    });
}

/// A damaged backup of one group (format version 1) is refused, never panics.
#[tokio::test(flavor = "multi_thread")]
async fn damaged_backups_are_refused() {
    let dir = TempDir::new().unwrap();
    let original = backup_of(dir.path(), 1).await;
    fuzz_backup(dir.path(), &original);
}

/// A damaged backup of several groups (format version 2: a header per group, a table of
/// lengths) is refused, never panics.
#[tokio::test(flavor = "multi_thread")]
async fn damaged_backups_of_several_groups_are_refused() {
    let dir = TempDir::new().unwrap();
    let original = backup_of(dir.path(), 3).await;
    assert_eq!(&original[8..12], &idem_store::BACKUP_VERSION.to_be_bytes());
    fuzz_backup(dir.path(), &original);
}
