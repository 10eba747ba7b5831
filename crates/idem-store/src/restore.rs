//! Seeding a new data directory from a backup: the restored node starts as a cluster of one
//! with every record, result and fence of the backup.
//!
//! Why this shape: the backup's state is installed exactly as a snapshot from a leader would
//! be (checked whole, crash-safe, through the `install` module), at the backup's last log id,
//! but with a fresh membership of just the restored node. openraft then starts from it as
//! from any installed snapshot: the log is empty below that index (it purges up to it at
//! start), and the node, the only voter, elects itself and serves. Other nodes join it
//! with the usual join path and receive the state as a snapshot. The vote is set to the
//! backup's term, so the first election moves to a later term and every new entry sorts
//! after the restored ones.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use openraft::Membership;
use rocksdb::WriteBatch;

use crate::backup_error::BackupError;
use crate::backup_file::BackupFile;
use crate::codec::VOTE;
use crate::db::{self, Cf, Db};
use crate::snapshot::{self, SnapshotStore};
use crate::types::{NodeInfo, SnapshotMeta, StoredMembership, Vote};

/// Seeds `data_dir` (missing or empty) from `backup` for node `node_id` at `node`'s
/// addresses; returns the snapshot position the node will start from. The database is
/// closed when this returns.
pub fn restore(
    backup: &BackupFile,
    data_dir: &Path,
    node_id: u64,
    node: NodeInfo,
) -> Result<SnapshotMeta, BackupError> {
    ensure_empty(data_dir)?;
    crate::dirs::create_durable(data_dir)?;
    let db = Arc::new(Db::open(&db::db_dir(data_dir))?);
    let store = SnapshotStore::open(db.clone(), snapshot::dir_of(data_dir))?;
    let mut data = store.temporary()?;
    let mut out = BufWriter::new(&mut data);
    backup.copy_snapshot(&mut out)?;
    out.flush()?;
    drop(out);
    let last_log_id = backup.header().last_log_id;
    let membership = Membership::new(
        vec![BTreeSet::from([node_id])],
        BTreeMap::from([(node_id, node)]),
    )
    .map_err(|e| BackupError::Format(format!("membership of the restored node: {e}")))?;
    let meta = SnapshotMeta {
        last_log_id: Some(last_log_id),
        last_membership: StoredMembership::new(Some(last_log_id), membership),
    };
    store.install(&meta, data)?;
    let vote = Vote::new(backup.header().term(), node_id);
    let mut batch = WriteBatch::default();
    db.put(&mut batch, Cf::RaftMeta, VOTE, &vote)?;
    db.write(batch, true)?;
    Ok(meta)
}

/// Refuses a data directory that holds anything.
fn ensure_empty(dir: &Path) -> Result<(), BackupError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            Some(_) => Err(BackupError::NotEmpty(dir.to_path_buf())),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use futures::stream;
    use idem_core::testing::{Harness, BODY_A};
    use idem_core::{MemoryStore, Timestamp};
    use openraft::entry::RaftEntry;
    use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
    use tempfile::TempDir;

    use super::*;
    use crate::backup::BackupOrigin;
    use crate::types::{Entry, Request, TypeConfig};
    use crate::{StateMachine, StateReader};

    fn claims(n: usize) -> Vec<Entry> {
        let mut h = Harness::new(MemoryStore::new());
        (0..n)
            .map(|i| {
                let key = Harness::<MemoryStore>::target(&format!("k-{i}"));
                let request = Request {
                    stamp: Timestamp(1_000_000 + i as u64),
                    command: h.claim_command(&key, BODY_A, "w1"),
                };
                let log_id = openraft::testing::log_id::<TypeConfig>(3, 1, 1 + i as u64);
                Entry::new_normal(log_id, request)
            })
            .collect()
    }

    async fn apply(sm: &mut StateMachine, entries: Vec<Entry>) {
        let items = entries.into_iter().map(|e| Ok((e, None)));
        sm.apply(stream::iter(items)).await.unwrap();
    }

    fn everything(reader: &StateReader) -> impl PartialEq + std::fmt::Debug {
        (
            reader.scan(&[], None, usize::MAX).unwrap(),
            reader.audit(0, usize::MAX).unwrap(),
            reader.meta().unwrap(),
        )
    }

    fn node(addr: &str) -> NodeInfo {
        NodeInfo {
            raft_addr: addr.into(),
            ..NodeInfo::default()
        }
    }

    /// A backup restores to the same state at the same log id, with a membership of the
    /// restored node alone and a vote at the backup's term; a flipped byte is refused.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_backup_restores_the_state_as_a_cluster_of_one() {
        let dir = TempDir::new().unwrap();
        let (_log, mut sm, reader) = crate::open(&dir.path().join("old")).unwrap();
        apply(&mut sm, claims(120)).await;
        let file = dir.path().join("backup");
        let origin = BackupOrigin {
            group: 0,
            node_id: 1,
            taken_at_ms: 7,
        };
        let cut = reader.backup_cut(origin).unwrap();
        let summary = cut
            .write(std::io::BufWriter::new(
                std::fs::File::create(&file).unwrap(),
            ))
            .unwrap();
        let backup = BackupFile::open(&file).unwrap();
        assert_eq!(backup.header(), &summary.header);
        assert_eq!(backup.len(), summary.length);
        assert_eq!((backup.header().index(), backup.header().term()), (120, 3));

        let target = dir.path().join("new");
        let meta = restore(&backup, &target, 5, node("10.0.0.5:7410")).unwrap();
        assert_eq!(meta.last_log_id, Some(backup.header().last_log_id));
        assert!(matches!(
            restore(&backup, &target, 5, node("10.0.0.5:7410")),
            Err(BackupError::NotEmpty(_))
        ));
        let (mut log, mut restored, restored_reader) = crate::open(&target).unwrap();
        assert_eq!(everything(&restored_reader), everything(&reader));
        assert_eq!(restored_reader.applied().unwrap(), meta.last_log_id);
        let membership = restored_reader.membership().unwrap();
        let voters: Vec<u64> = membership.membership().voter_ids().collect();
        assert_eq!(voters, vec![5]);
        let vote = log
            .get_log_reader()
            .await
            .read_vote()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(vote, Vote::new(3, 5));
        let current = restored.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, meta);

        let mut bytes = std::fs::read(&file).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x80;
        let damaged = dir.path().join("damaged");
        std::fs::write(&damaged, &bytes).unwrap();
        assert!(matches!(
            BackupFile::open(&damaged),
            Err(BackupError::Digest { .. })
        ));
    }
}
