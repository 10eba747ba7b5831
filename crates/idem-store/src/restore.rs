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
//!
//! A backup of several groups restores each into its directory ([`crate::group_dir`]: the
//! data directory for the global group, `groups/<id>` below it for a region group), each as
//! a group of one at its own backup index. When the node starts, the restored global
//! group's configuration names the regions, so the node opens those groups, finds them
//! initialized and leads them; nodes that join are added to every group. A restore that
//! fails half-way removes what it wrote, so the directory is as empty as it was.

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
/// addresses: every group of the backup; returns the snapshot position each group will
/// start from (in [`BackupFile::headers`]' order). The databases are closed when this
/// returns.
pub fn restore(
    backup: &BackupFile,
    data_dir: &Path,
    node_id: u64,
    node: NodeInfo,
) -> Result<Vec<SnapshotMeta>, BackupError> {
    ensure_empty(data_dir)?;
    crate::dirs::create_durable(data_dir)?;
    let restored = backup
        .headers()
        .iter()
        .enumerate()
        .map(|(i, header)| {
            let dir = crate::group_dir(data_dir, header.group);
            restore_group(backup, i, &dir, node_id, node.clone())
        })
        .collect::<Result<Vec<_>, _>>();
    if restored.is_err() {
        empty(data_dir);
    }
    restored
}

/// Seeds `dir` with the `group`-th group of `backup`, as a group of `node_id` alone.
fn restore_group(
    backup: &BackupFile,
    group: usize,
    dir: &Path,
    node_id: u64,
    node: NodeInfo,
) -> Result<SnapshotMeta, BackupError> {
    crate::dirs::create_durable(dir)?;
    let db = Arc::new(Db::open(&db::db_dir(dir))?);
    let store = SnapshotStore::open(db.clone(), snapshot::dir_of(dir))?;
    let mut data = store.temporary()?;
    let mut out = BufWriter::new(&mut data);
    backup.copy_snapshot(group, &mut out)?;
    out.flush()?;
    drop(out);
    let header = &backup.headers()[group];
    let last_log_id = header.last_log_id;
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
    let vote = Vote::new(header.term(), node_id);
    let mut batch = WriteBatch::default();
    db.put(&mut batch, Cf::RaftMeta, VOTE, &vote)?;
    db.write(batch, true)?;
    Ok(meta)
}

/// Removes everything inside `dir` (a failed restore's output; the directory was empty).
fn empty(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if let Err(error) = removed {
            tracing::warn!(path = %path.display(), %error, "removing a failed restore's files");
        }
    }
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
    use crate::backup::{write_backup, BackupOrigin, BackupSummary};
    use crate::types::{Entry, Request, TypeConfig};
    use crate::{StateMachine, StateReader};

    fn claims(n: usize) -> Vec<Entry> {
        let mut h = Harness::new(MemoryStore::new());
        (0..n)
            .map(|i| {
                let key = Harness::<MemoryStore>::target(&format!("k-{i}"));
                let request = Request {
                    stamp: Timestamp(1_000_000 + i as u64),
                    command: h.claim_command(&key, BODY_A, "w1").into(),
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

    /// Writes a backup of `groups` (a reader and its group id each) to `file`.
    fn back_up(groups: &[(&StateReader, u64)], file: &Path) -> BackupSummary {
        let cuts = groups
            .iter()
            .map(|(reader, group)| {
                let origin = BackupOrigin {
                    group: *group,
                    node_id: 1,
                    taken_at_ms: 7,
                };
                reader.backup_cut(origin).unwrap()
            })
            .collect();
        let out = std::io::BufWriter::new(std::fs::File::create(file).unwrap());
        write_backup(cuts, out).unwrap()
    }

    /// A backup restores to the same state at the same log id, with a membership of the
    /// restored node alone and a vote at the backup's term; a flipped byte is refused.
    /// One group is written in version 1, the format of earlier releases.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_backup_restores_the_state_as_a_cluster_of_one() {
        let dir = TempDir::new().unwrap();
        let (_log, mut sm, reader) = crate::open(&dir.path().join("old")).unwrap();
        apply(&mut sm, claims(120)).await;
        let file = dir.path().join("backup");
        let summary = back_up(&[(&reader, 0)], &file);
        assert_eq!(summary.version, crate::BACKUP_VERSION_SINGLE);
        let backup = BackupFile::open(&file).unwrap();
        assert_eq!(backup.headers(), summary.headers.as_slice());
        assert_eq!(backup.version(), 1);
        assert_eq!(backup.len(), summary.length);
        assert_eq!((backup.header().index(), backup.header().term()), (120, 3));

        let target = dir.path().join("new");
        let meta = restore(&backup, &target, 5, node("10.0.0.5:7410")).unwrap();
        assert_eq!(meta.len(), 1);
        let meta = meta.into_iter().next().unwrap();
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

    /// A backup of several groups (version 2) restores each group into its own directory
    /// at its own index; groups out of order are refused when writing.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_backup_of_several_groups_restores_each_into_its_directory() {
        let dir = TempDir::new().unwrap();
        let (_g, mut global_sm, global) = crate::open(&dir.path().join("global")).unwrap();
        let (_r, mut region_sm, region) = crate::open(&dir.path().join("region")).unwrap();
        apply(&mut global_sm, claims(40)).await;
        apply(&mut region_sm, claims(75)).await;
        let file = dir.path().join("backup");
        let summary = back_up(&[(&global, 0), (&region, 2)], &file);
        assert_eq!(summary.version, crate::BACKUP_VERSION);
        let backup = BackupFile::open(&file).unwrap();
        assert_eq!(backup.version(), 2);
        assert_eq!(backup.headers(), summary.headers.as_slice());
        let indexes: Vec<(u64, u64)> = backup
            .headers()
            .iter()
            .map(|h| (h.group, h.index()))
            .collect();
        assert_eq!(indexes, vec![(0, 40), (2, 75)]);

        let target = dir.path().join("new");
        let metas = restore(&backup, &target, 5, node("10.0.0.5:7410")).unwrap();
        assert_eq!(metas.len(), 2);
        for (reader, group, meta) in [(&global, 0, &metas[0]), (&region, 2, &metas[1])] {
            let (_log, _sm, restored) = crate::open(&crate::group_dir(&target, group)).unwrap();
            assert_eq!(everything(&restored), everything(reader), "group {group}");
            assert_eq!(restored.applied().unwrap(), meta.last_log_id);
        }

        let unordered = [(&region, 2), (&global, 0)].map(|(reader, group)| {
            reader
                .backup_cut(BackupOrigin {
                    group,
                    node_id: 1,
                    taken_at_ms: 7,
                })
                .unwrap()
        });
        assert!(matches!(
            write_backup(unordered.into(), std::io::sink()),
            Err(BackupError::Format(_))
        ));
    }
}
