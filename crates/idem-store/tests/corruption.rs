//! Damaged files of a stopped node (a bit flipped in a write-ahead log, a table file, the
//! MANIFEST or the snapshot file): the store refuses to open, naming the file, instead of
//! serving what the damage left (docs/guarantees.md, "Corrupt data").

use crate::common;

use std::path::{Path, PathBuf};

use common::{append, apply, entries, workload};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use tempfile::TempDir;

/// A closed store with every kind of file: table files (the first run's, flushed when it
/// closed: its state was written without the WAL), a write-ahead log holding the second
/// run's log entries (appended one by one, so one record each, and not applied, so that
/// closing flushes nothing), a MANIFEST, and a snapshot.
async fn stopped_store(dir: &Path) {
    let first = workload(40);
    {
        let (mut log, mut sm, _reader) = idem_store::open(dir).unwrap();
        append(&mut log, entries(1, 1, &first)).await;
        apply(&mut sm, entries(1, 1, &first)).await;
        sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
    }
    let (mut log, _sm, _reader) = idem_store::open(dir).unwrap();
    let next = first.len() as u64 + 1;
    for entry in entries(1, next, &workload(20)) {
        append(&mut log, vec![entry]).await;
    }
}

/// Copies the directory tree `from` to `to`.
fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The non-empty files of `dir`/`sub` whose name satisfies `kind` (RocksDB leaves an empty
/// write-ahead log behind when a close flushed everything).
fn files(dir: &Path, sub: &str, kind: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join(sub))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && kind(p.file_name().unwrap().to_str().unwrap()))
        .filter(|p| p.metadata().unwrap().len() > 0)
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no such file in {sub}");
    found
}

/// Flips one bit at each of `offsets` (fractions of the file) of every file of a kind, in
/// a fresh copy of `good` each time, and expects the store to refuse to open naming it.
fn refused_at(good: &Path, scratch: &Path, sub: &str, kind: impl Fn(&str) -> bool, at: &[f64]) {
    for file in files(good, sub, &kind) {
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let len = std::fs::metadata(&file).unwrap().len() as usize;
        for fraction in at {
            let offset = (len as f64 * fraction) as usize;
            let dir = scratch.join(format!("{name}-{offset}"));
            copy(good, &dir);
            let target = dir.join(sub).join(&name);
            let mut bytes = std::fs::read(&target).unwrap();
            bytes[offset] ^= 0x08;
            std::fs::write(&target, bytes).unwrap();
            match idem_store::open(&dir) {
                Ok(_) => panic!("{sub}/{name} with a bit flipped at {offset} of {len} opened"),
                Err(error) => assert!(
                    error.to_string().contains(&name),
                    "{sub}/{name} at {offset}: the error does not name the file: {error}"
                ),
            }
        }
    }
}

/// Spread over each file, avoiding its last 5 % (the last record of a log is
/// indistinguishable from a torn write; a table's footer padding is not read).
const SPREAD: &[f64] = &[0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9];

/// Writes a store, stops it, and checks that copies of it with the files `under/` that
/// `pick` selects damaged at each point of `spread` are refused (see [`refused_at`]).
async fn damaged_copies_refused(under: &str, pick: fn(&str) -> bool, spread: &[f64]) {
    let scratch = TempDir::new().unwrap();
    let good = scratch.path().join("good");
    stopped_store(&good).await;
    refused_at(&good, scratch.path(), under, pick, spread);
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_write_ahead_log_is_refused() {
    damaged_copies_refused("db", |n| n.ends_with(".log"), SPREAD).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_table_file_is_refused() {
    // Data blocks: the front of each table (filter and index blocks follow them).
    damaged_copies_refused("db", |n| n.ends_with(".sst"), &[0.0, 0.1, 0.2]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_manifest_is_refused() {
    damaged_copies_refused("db", |n| n.starts_with("MANIFEST-"), SPREAD).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_snapshot_file_is_refused() {
    let every = &[0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.99];
    damaged_copies_refused("snapshots", |n| n.ends_with(".bin"), every).await;
}

/// The undamaged copy opens: the checks refuse damage, not this layout.
#[tokio::test(flavor = "multi_thread")]
async fn undamaged_store_opens() {
    let scratch = TempDir::new().unwrap();
    let good = scratch.path().join("good");
    stopped_store(&good).await;
    let copied = scratch.path().join("copy");
    copy(&good, &copied);
    idem_store::open(&copied).unwrap();
}
