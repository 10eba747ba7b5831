//! Shared helpers: a workload of real commands, log entries, and a full dump of the state.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;

use futures::stream;
use idem_core::command::{Command, PurgeSubject};
use idem_core::store::Meta;
use idem_core::testing::{Harness, BODY_A, BODY_B};
use idem_core::{AuditEntry, MemoryStore, Record, StateStore, Timestamp};
use idem_store::{
    Entry, LogId, LogStore, Request, SnapshotData, SnapshotMeta, StateMachine, StateReader,
    TypeConfig,
};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
use openraft::type_config::TypeConfigExt;
use openraft::Membership;

/// Node id used in test log ids.
pub const NODE: u64 = 1;

/// A log id of the test leader.
pub fn log_id(term: u64, index: u64) -> LogId {
    openraft::testing::log_id::<TypeConfig>(term, NODE, index)
}

/// A workload touching every column family: claims, completions (with expiry entries),
/// a mismatch, a takeover-free failure, and an audited purge; stamps advance by 1 s.
pub fn workload(keys: usize) -> Vec<Request> {
    let mut h = Harness::new(MemoryStore::new());
    let mut requests = Vec::new();
    let mut stamp = 1_000_000;
    let mut push = |command: Command, requests: &mut Vec<Request>| {
        stamp += 1_000;
        requests.push(Request {
            stamp: Timestamp(stamp),
            command: command.into(),
        });
    };
    for i in 0..keys {
        let key = Harness::<MemoryStore>::target(&format!("key-{i}"));
        push(h.claim_command(&key, BODY_A, "w1"), &mut requests);
        let finish = if i % 3 == 0 {
            Command::Fail(idem_core::command::Fail {
                owner: Harness::<MemoryStore>::owner(&key, 1),
                retryable: false,
                error: Harness::<MemoryStore>::error("declined"),
            })
        } else {
            Command::Complete(idem_core::command::Complete {
                owner: Harness::<MemoryStore>::owner(&key, 1),
                result: Harness::<MemoryStore>::result(&format!("ch_{i}")),
            })
        };
        push(finish, &mut requests);
        push(h.claim_command(&key, BODY_B, "w2"), &mut requests);
    }
    let other = Harness::<MemoryStore>::target_for("acme", "user-2", "k");
    push(h.claim_command(&other, BODY_A, "w3"), &mut requests);
    push(
        Command::PurgeSubject(PurgeSubject {
            tenant: "acme".into(),
            actor: "user-2".into(),
            reason: "gdpr erasure".into(),
            admin: "ops@example".into(),
            after: None,
            limit: 10,
        }),
        &mut requests,
    );
    requests
}

/// Normal entries for `requests`, starting at `first` in `term`.
pub fn entries(term: u64, first: u64, requests: &[Request]) -> Vec<Entry> {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| Entry::new_normal(log_id(term, first + i as u64), r.clone()))
        .collect()
}

/// A membership entry making `voters` the configuration.
pub fn membership(term: u64, index: u64, voters: &[u64]) -> Entry {
    let voters: BTreeSet<u64> = voters.iter().copied().collect();
    Entry::new_membership(
        log_id(term, index),
        Membership::new_with_defaults(vec![voters], []),
    )
}

/// Appends and waits until openraft would be told the entries are flushed.
pub async fn append(log: &mut LogStore, entries: Vec<Entry>) {
    let (tx, rx) = TypeConfig::oneshot();
    log.append(entries, IOFlushed::signal(tx)).await.unwrap();
    rx.await.unwrap().unwrap();
}

/// Applies entries (no client waiting) through the state machine.
pub async fn apply(sm: &mut StateMachine, entries: Vec<Entry>) {
    let items = entries.into_iter().map(|e| Ok((e, None)));
    sm.apply(stream::iter(items)).await.unwrap();
}

/// A store opened in `dir` with a four-key workload applied, and a snapshot built from it:
/// its meta and its file's bytes (the starting point of the damaged-snapshot tests).
pub async fn snapshotted(
    dir: &Path,
) -> (LogStore, StateMachine, StateReader, SnapshotMeta, Vec<u8>) {
    let (log, mut sm, reader) = idem_store::open(dir).unwrap();
    apply(&mut sm, entries(1, 1, &workload(4))).await;
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let bytes = std::fs::read(snapshot.snapshot.path()).unwrap();
    (log, sm, reader, snapshot.meta, bytes)
}

/// A snapshot file of `sm`'s store holding `bytes`, as the network receives one.
pub fn receive(sm: &StateMachine, bytes: &[u8]) -> SnapshotData {
    let mut file = sm.begin_receiving_snapshot().unwrap();
    for chunk in bytes.chunks(1000) {
        file.append(chunk).unwrap();
    }
    file
}

/// Everything a reader can see, for equality checks.
#[derive(Debug, PartialEq)]
pub struct Dump {
    pub records: Vec<Record>,
    pub audit: Vec<AuditEntry>,
    pub meta: Meta,
}

/// The whole replicated state seen through a reader.
pub fn dump(reader: &StateReader) -> Dump {
    Dump {
        records: reader.scan(&[], None, usize::MAX).unwrap(),
        audit: reader.audit(0, usize::MAX).unwrap(),
        meta: reader.meta().unwrap(),
    }
}

/// The same workload applied one command at a time to the reference store.
pub fn reference(requests: &[Request]) -> Dump {
    let mut store = MemoryStore::new();
    for r in requests {
        idem_core::apply(&mut store, &r.command, r.stamp).unwrap();
    }
    Dump {
        records: store.scan(&[], None, usize::MAX).unwrap(),
        audit: store.audit(0, usize::MAX).unwrap(),
        meta: store.meta().unwrap(),
    }
}
