//! Memory of snapshot build, transfer and install stays bounded whatever the state size.
//!
//! A measurement, not a test (ignored by default; run it with
//! `cargo test --release -p idem-store --test store snapshot_memory:: -- --ignored --nocapture`): it
//! fills a store with `IDEM_SNAPSHOT_MEMORY_RECORDS` claimed records (default 200 000), then
//! reports how far the process's peak RSS (`VmHWM`, reset through `/proc/self/clear_refs`)
//! rises above its RSS while a snapshot is built, and while it is copied chunk by chunk into
//! another store (as the network does) and installed there. The old in-memory snapshots rose
//! by at least twice the snapshot's size; file-backed ones by buffers and RocksDB's own
//! bounded memory (block cache, memtables), whatever the state size: compare two sizes.

use futures::stream;
use idem_core::testing::{Harness, BODY_A};
use idem_core::{MemoryStore, Timestamp};
use idem_store::{Entry, Request, StateMachine, TypeConfig};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use tempfile::TempDir;

/// Starts a measurement: resets the process's peak RSS to its current RSS (where the kernel
/// allows it); returns the current RSS in KiB.
fn start_measuring() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:")
}

/// A `/proc/self/status` field in kB.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn fill(sm: &mut StateMachine, records: u64) {
    let mut h = Harness::new(MemoryStore::new());
    let mut index = 1;
    while index <= records {
        let end = (index + 1024).min(records + 1);
        let entries: Vec<Entry> = (index..end)
            .map(|i| {
                let key = Harness::<MemoryStore>::target(&format!("bulk-{i}"));
                let request = Request {
                    stamp: Timestamp(1_000_000 + i),
                    command: h.claim_command(&key, BODY_A, "w1").into(),
                };
                Entry::new_normal(openraft::testing::log_id::<TypeConfig>(1, 1, i), request)
            })
            .collect();
        let items = entries.into_iter().map(|e| Ok((e, None)));
        sm.apply(stream::iter(items)).await.unwrap();
        index = end;
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "measurement: run with --ignored --nocapture"]
async fn snapshot_build_and_install_take_bounded_memory() {
    let records: u64 = std::env::var("IDEM_SNAPSHOT_MEMORY_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let (leader_dir, follower_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let (_l_log, mut leader, _l_reader) = idem_store::open(leader_dir.path()).unwrap();
    fill(&mut leader, records).await;

    let before_build = start_measuring();
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let build_peak = status_kib("VmHWM:").saturating_sub(before_build);
    let size = snapshot.snapshot.len();

    let (_f_log, mut follower, f_reader) = idem_store::open(follower_dir.path()).unwrap();
    let before_install = start_measuring();
    let mut received = follower.begin_receiving_snapshot().unwrap();
    let mut offset = 0;
    while offset < size {
        let chunk = snapshot.snapshot.read_chunk(offset, 1 << 20).unwrap();
        offset += chunk.len() as u64;
        received.append(&chunk).unwrap();
    }
    follower
        .install_snapshot(&snapshot.meta, received)
        .await
        .unwrap();
    let install_peak = status_kib("VmHWM:").saturating_sub(before_install);

    assert_eq!(f_reader.applied().unwrap(), snapshot.meta.last_log_id);
    eprintln!(
        "snapshot memory: {records} records, snapshot {:.1} MiB; peak RSS above RSS before: \
         build +{:.1} MiB (from {:.0} MiB), transfer+install +{:.1} MiB (from {:.0} MiB)",
        mib(size),
        kib_to_mib(build_peak),
        kib_to_mib(before_build),
        kib_to_mib(install_peak),
        kib_to_mib(before_install),
    );
}
