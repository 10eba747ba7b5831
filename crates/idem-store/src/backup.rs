//! Online backups: the applied state of a group as one self-checking file, taken from a live
//! node without stopping it.
//!
//! Why not the Raft snapshot: a Raft snapshot is the group's own business (when it is built,
//! which file is current, when it is deleted), and its Raft position travels beside it in
//! openraft's `SnapshotMeta`. A backup must carry that position inside the file (a restore
//! needs the last log id, and an operator needs to know what the file reflects) and must not
//! disturb the group's snapshots. So a backup takes its own consistent cut (a RocksDB
//! snapshot, in which the state and its applied log id were written by the same batches)
//! and writes it with the snapshot format of the `blob` module, inside an envelope:
//!
//! ```text
//! "IDEMBKUP" | version: u32 BE (= 1) | header_len: u32 BE | header (bincode BackupHeader)
//! snapshot   : the `blob` format ("IDEMSNAP" ... its own SHA-256)
//! digest     : SHA-256 of every byte of the file before it
//! ```
//!
//! The whole file is written as a stream (memory stays bounded by one frame), so the server
//! can send it as it is produced. [`crate::BackupFile`] reads and checks one;
//! [`crate::restore`] seeds a new data directory from it.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::backup_error::BackupError;
use crate::blob::{self, Hashing, DIGEST_LEN};
use crate::codec::{self, INSTALLING};
use crate::db::Cf;
use crate::error::StoreError;
use crate::reader::StateReader;
use crate::snapshot::read_meta;
use crate::types::{LogId, StoredMembership};

/// The first bytes of a backup file.
pub const BACKUP_MAGIC: &[u8; 8] = b"IDEMBKUP";
/// The backup format this build writes and reads.
pub const BACKUP_VERSION: u32 = 1;
/// The largest header a reader accepts (a membership of a few nodes is a few hundred bytes).
pub(crate) const MAX_HEADER: u32 = 1 << 20;

/// What a backup reflects: stored at the start of the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    /// The Raft group backed up (0: the global group).
    pub group: u64,
    /// The node that took it.
    pub node_id: u64,
    /// The last log entry applied to the backed-up state.
    pub last_log_id: LogId,
    /// The group's membership at that entry.
    pub membership: StoredMembership,
    /// When the cut was taken (the node's clock, Unix milliseconds).
    pub taken_at_ms: i64,
}

impl BackupHeader {
    /// The index of the last applied entry.
    pub fn index(&self) -> u64 {
        self.last_log_id.index()
    }

    /// The term of the last applied entry.
    pub fn term(&self) -> u64 {
        self.last_log_id.committed_leader_id().term
    }
}

/// A backup written: its header, length and digest (the file's last bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupSummary {
    /// What the backup reflects.
    pub header: BackupHeader,
    /// Bytes written, digest included.
    pub length: u64,
    /// SHA-256 of every byte before the digest.
    pub digest: [u8; DIGEST_LEN],
}

/// Who takes a backup and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupOrigin {
    /// The group backed up.
    pub group: u64,
    /// This node's id.
    pub node_id: u64,
    /// Now, Unix milliseconds.
    pub taken_at_ms: i64,
}

/// A consistent cut of a group's applied state, ready to be written as a backup file.
///
/// Holding it pins a RocksDB snapshot (old versions are kept while it lives), so write it
/// out and drop it.
pub struct BackupCut<'r> {
    reader: &'r StateReader,
    view: rocksdb::Snapshot<'r>,
    header: BackupHeader,
}

impl StateReader {
    /// Takes a consistent cut of the applied state, as of now. Refused while a snapshot
    /// from the leader is being installed here (the state is incomplete then) and before
    /// anything was applied.
    pub fn backup_cut(&self, origin: BackupOrigin) -> Result<BackupCut<'_>, BackupError> {
        let db = self.db();
        let view = db.raw().snapshot();
        // The marker is written before the state column families are cleared and removed
        // with the install's final batch: a cut without it is the old or the new state.
        let installing = view.get_cf(db.cf(Cf::SmMeta), INSTALLING);
        if installing.map_err(StoreError::from)?.is_some() {
            return Err(BackupError::Installing);
        }
        let meta = read_meta(db, &view)?;
        let last_log_id = meta.last_log_id.ok_or(BackupError::NothingApplied)?;
        let header = BackupHeader {
            group: origin.group,
            node_id: origin.node_id,
            last_log_id,
            membership: meta.last_membership,
            taken_at_ms: origin.taken_at_ms,
        };
        Ok(BackupCut {
            reader: self,
            view,
            header,
        })
    }
}

impl BackupCut<'_> {
    /// What the backup reflects.
    pub fn header(&self) -> &BackupHeader {
        &self.header
    }

    /// Writes the backup file to `out` (buffer it), streaming; blocks on RocksDB reads, so
    /// run it on the blocking pool.
    pub fn write(self, out: impl Write) -> Result<BackupSummary, BackupError> {
        let encoded = codec::encode(&self.header)?;
        let header_len = u32::try_from(encoded.len())
            .ok()
            .filter(|len| *len <= MAX_HEADER)
            .ok_or_else(|| BackupError::Format("header larger than 1 MiB".into()))?;
        let mut out = Hashing::new(out);
        out.write_all(BACKUP_MAGIC)?;
        out.write_all(&BACKUP_VERSION.to_be_bytes())?;
        out.write_all(&header_len.to_be_bytes())?;
        out.write_all(&encoded)?;
        blob::dump(self.reader.db(), &self.view, &mut out)?;
        let (mut out, digest, len) = out.finish();
        out.write_all(&digest)?;
        out.flush()?;
        Ok(BackupSummary {
            header: self.header,
            length: len + DIGEST_LEN as u64,
            digest,
        })
    }
}

/// A digest as lowercase hex.
pub fn hex_digest(digest: &[u8; DIGEST_LEN]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
