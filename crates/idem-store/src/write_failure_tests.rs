//! A storage failure while a committed entry's effects are written leaves nothing
//! half-written (issue #23, a failure case of the seed documents).
//!
//! A `Complete` writes the record and its result (and its expiry entry); an audited admin
//! command such as `Reconcile` writes the record and the audit entry. Both go to RocksDB in
//! the apply's one batch with the applied index, so a failed write leaves neither: the apply
//! fails, and openraft stops the node on a failed apply (docs/design.md §6), so no caller is
//! answered; readers see nothing; after a restart openraft applies the entry again from the
//! log and writes both.
//!
//! The failure is injected below the state machine, at the batch write itself
//! ([`Db::fail_write`](crate::db::Db::fail_write), test builds only), on each write of the
//! apply in turn: an apply that split its effects over two writes would be caught with the
//! first half written.

use std::path::Path;

use futures::stream;
use idem_core::command::{
    Command, Complete, ExternalCall, Reconcile, ReconcileTarget, RecordExternalCall,
};
use idem_core::testing::{Harness, BODY_A};
use idem_core::{AuditEntry, MemoryStore, Record, State, Timestamp};
use openraft::entry::RaftEntry;
use openraft::storage::RaftStateMachine;

use crate::types::{Entry, LogId, Request, TypeConfig};
use crate::{StateMachine, StateReader};

type H = Harness<MemoryStore>;

fn log_id(index: u64) -> LogId {
    openraft::testing::log_id::<TypeConfig>(1, 1, index)
}

/// Entries for `commands` from index 1, stamps one second apart.
fn entries(commands: Vec<Command>) -> Vec<Entry> {
    commands
        .into_iter()
        .enumerate()
        .map(|(i, command)| {
            let index = i as u64 + 1;
            let request = Request {
                stamp: Timestamp(1_000_000 + index * 1_000),
                command: command.into(),
            };
            Entry::new_normal(log_id(index), request)
        })
        .collect()
}

async fn apply(sm: &mut StateMachine, entries: &[Entry]) -> std::io::Result<()> {
    let items = entries.iter().cloned().map(|e| Ok((e, None)));
    sm.apply(stream::iter(items)).await
}

/// What a failed write must leave unchanged, and a successful one change together.
#[derive(Debug, PartialEq)]
struct Seen {
    record: Option<Record>,
    audit: Vec<AuditEntry>,
    applied: Option<LogId>,
    published: u64,
}

fn seen(reader: &StateReader) -> Seen {
    let record = reader.scan(&[], None, 10).unwrap().into_iter().next();
    Seen {
        record,
        audit: reader.audit(0, 100).unwrap(),
        applied: reader.applied().unwrap(),
        published: *reader.subscribe().borrow(),
    }
}

/// A claim, start and CALLING of one key by worker w1 (fence 1), then `last`.
fn worker_at_calling(h: &mut H, last: impl FnOnce(&Record) -> Command) -> Vec<Command> {
    let key = H::target("order-1");
    let mut commands = vec![
        h.claim_command(&key, BODY_A, "w1"),
        Command::Start(H::owner(&key, 1)),
        Command::RecordExternalCall(RecordExternalCall {
            owner: H::owner(&key, 1),
            call: ExternalCall::Calling,
        }),
    ];
    for command in &commands {
        h.apply(command.clone());
    }
    commands.push(last(&h.record(&key).unwrap()));
    commands
}

/// Applies every entry but the last, then the last with each of its writes failing in turn
/// until it succeeds; each failure changes nothing, even after a restart. Answers the
/// state after the successful apply and before the last entry.
async fn fail_each_write(dir: &Path, entries: &[Entry]) -> (Seen, Seen) {
    let (setup, last) = entries.split_at(entries.len() - 1);
    let before = {
        let (_log, mut sm, reader) = crate::open(dir).unwrap();
        apply(&mut sm, setup).await.unwrap();
        seen(&reader)
    };
    for nth in 1.. {
        let (log, mut sm, reader) = crate::open(dir).unwrap();
        assert_eq!(seen(&reader), before, "restarted after write {}", nth - 1);
        reader.db().fail_write(nth);
        if apply(&mut sm, last).await.is_ok() {
            assert!(nth > 1, "the injected failure was never reached");
            let after = seen(&reader);
            drop((log, sm, reader));
            let (_log, _sm, reader) = crate::open(dir).unwrap();
            assert_eq!(seen(&reader), after, "after a restart");
            return (before, after);
        }
        assert_eq!(seen(&reader), before, "write {nth} failed: nothing changed");
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_write_leaves_neither_the_record_nor_its_result() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut h = H::new(MemoryStore::new());
    let commands = worker_at_calling(&mut h, |record| {
        Command::Complete(Complete {
            owner: H::owner(&record.key, 1),
            result: H::result("ch_1"),
        })
    });
    let (before, after) = fail_each_write(dir.path(), &entries(commands)).await;
    let record = before.record.unwrap();
    assert_eq!((record.state, record.result), (State::InProgress, None));
    let record = after.record.unwrap();
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.result, Some(H::result("ch_1")));
    assert_eq!(after.applied, Some(log_id(4)));
    assert_eq!(after.published, 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_write_leaves_neither_the_reconcile_nor_its_audit_entry() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut h = H::new(MemoryStore::new());
    let commands = worker_at_calling(&mut h, |record| {
        Command::Reconcile(Reconcile {
            operation_id: record.operation_id,
            expected_version: record.version,
            target: ReconcileTarget::Completed(H::result("psp_1")),
            reason: "the provider has psp_1".into(),
            admin: "ops@example".into(),
        })
    });
    let (before, after) = fail_each_write(dir.path(), &entries(commands)).await;
    assert!(before.audit.is_empty());
    let record = after.record.unwrap();
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.result, Some(H::result("psp_1")));
    assert_eq!(after.audit.len(), 1, "{:?}", after.audit);
    assert_eq!(after.applied, Some(log_id(4)));
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_failed_write_nothing_reaches_rocksdb_until_a_restart() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut h = H::new(MemoryStore::new());
    let commands = worker_at_calling(&mut h, |record| {
        Command::RecordExternalCall(RecordExternalCall {
            owner: H::owner(&record.key, 1),
            call: ExternalCall::RemoteConfirmed {
                remote_ref: "psp_1".into(),
            },
        })
    });
    let all = entries(commands);
    let (_log, mut sm, reader) = crate::open(dir.path()).unwrap();
    reader.db().fail_write(1);
    apply(&mut sm, &all).await.unwrap_err();
    // The injected failure is spent: only the latch refuses what follows.
    let again = apply(&mut sm, &all).await.unwrap_err();
    assert!(again.to_string().contains("an earlier write"), "{again}");
    let sync = reader.db().sync_wal().unwrap_err();
    assert!(matches!(sync, crate::StoreError::FailedBefore(_)), "{sync}");
    drop((_log, sm, reader));
    let (_log, mut sm, _reader) = crate::open(dir.path()).unwrap();
    apply(&mut sm, &all).await.unwrap();
}
