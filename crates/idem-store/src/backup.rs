//! Online backups: the applied state of a cluster's groups as one self-checking file, taken
//! from a live node without stopping it.
//!
//! Why not the Raft snapshot: a Raft snapshot is the group's own business (when it is built,
//! which file is current, when it is deleted), and its Raft position travels beside it in
//! openraft's `SnapshotMeta`. A backup must carry that position inside the file (a restore
//! needs the last log id, and an operator needs to know what the file reflects) and must not
//! disturb the group's snapshots. So a backup takes its own consistent cut (a RocksDB
//! snapshot, in which the state and its applied log id were written by the same batches)
//! and writes it with the snapshot format of the `blob` module, inside an envelope. A cluster
//! with region groups has one cut per group (each consistent on its own, each with its own
//! applied log id); a file holds them all, the global group first:
//!
//! ```text
//! version 1 (one group, the global group):
//! "IDEMBKUP" | version: u32 BE (= 1) | header_len: u32 BE | header (bincode BackupHeader)
//! snapshot   : the `blob` format ("IDEMSNAP" ... its own SHA-256)
//! digest     : SHA-256 of every byte of the file before it
//!
//! version 2 (several groups):
//! "IDEMBKUP" | version: u32 BE (= 2) | header_len: u32 BE | header (bincode Vec<BackupHeader>,
//!                                                                   by group id, global first)
//! snapshots  : one `blob` per group, in the header's order
//! lengths    : u64 BE per group: the length of its snapshot, in the header's order
//! digest     : SHA-256 of every byte of the file before it
//! ```
//!
//! A single-group cluster still writes version 1, which earlier releases read; the lengths
//! come after the snapshots because each is known only once written. The whole file is
//! written as a stream (memory stays bounded by one frame), so the server can send it as it
//! is produced. [`crate::BackupFile`] reads and checks one; [`crate::restore`] seeds a new
//! data directory from it.

use std::io::Write;

use idem_core::placement::GLOBAL_GROUP;

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
/// The backup format of a single-group cluster (the global group alone).
pub const BACKUP_VERSION_SINGLE: u32 = 1;
/// The newest backup format this build writes and reads (several groups in one file).
pub const BACKUP_VERSION: u32 = 2;
/// The largest header a reader accepts (a membership of a few nodes is a few hundred bytes
/// per group).
pub(crate) const MAX_HEADER: u32 = 1 << 20;
/// The most groups a backup may hold (a cluster has one per region, plus the global group).
pub const MAX_GROUPS: usize = 256;

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

/// A backup written: its headers, format, length and digest (the file's last bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupSummary {
    /// What the backup reflects: one header per group, global group first.
    pub headers: Vec<BackupHeader>,
    /// The format version written.
    pub version: u32,
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
}

/// Writes the backup file of `cuts` (one per group, by group id, the global group first) to
/// `out` (buffer it), streaming; blocks on RocksDB reads, so run it on the blocking pool.
pub fn write_backup(
    cuts: Vec<BackupCut<'_>>,
    out: impl Write,
) -> Result<BackupSummary, BackupError> {
    let headers: Vec<BackupHeader> = cuts.iter().map(|cut| cut.header.clone()).collect();
    check_groups(&headers)?;
    let version = backup_version(headers.len());
    let encoded = match headers.as_slice() {
        [single] => codec::encode(single)?,
        several => codec::encode(&several)?,
    };
    let header_len = u32::try_from(encoded.len())
        .ok()
        .filter(|len| *len <= MAX_HEADER)
        .ok_or_else(|| BackupError::Format("header larger than 1 MiB".into()))?;
    let mut out = Hashing::new(out);
    out.write_all(BACKUP_MAGIC)?;
    out.write_all(&version.to_be_bytes())?;
    out.write_all(&header_len.to_be_bytes())?;
    out.write_all(&encoded)?;
    let mut lengths = Vec::with_capacity(cuts.len());
    for cut in &cuts {
        let mut counted = Counting {
            out: &mut out,
            bytes: 0,
        };
        blob::dump(cut.reader.db(), &cut.view, &mut counted)?;
        lengths.push(counted.bytes);
    }
    if version != BACKUP_VERSION_SINGLE {
        for length in lengths {
            out.write_all(&length.to_be_bytes())?;
        }
    }
    let (mut out, digest, len) = out.finish();
    out.write_all(&digest)?;
    out.flush()?;
    Ok(BackupSummary {
        headers,
        version,
        length: len + DIGEST_LEN as u64,
        digest,
    })
}

/// The format a backup of `groups` groups is written in: version 1 for the global group
/// alone (readable by earlier releases), version 2 for several.
pub fn backup_version(groups: usize) -> u32 {
    if groups == 1 {
        BACKUP_VERSION_SINGLE
    } else {
        BACKUP_VERSION
    }
}

/// Checks that `headers` name the global group first, then distinct groups in ascending
/// order, at most [`MAX_GROUPS`] of them: what the writer writes and the reader accepts.
pub(crate) fn check_groups(headers: &[BackupHeader]) -> Result<(), BackupError> {
    if headers.is_empty() || headers.len() > MAX_GROUPS {
        return Err(BackupError::Format(format!(
            "{} groups (1 to {MAX_GROUPS})",
            headers.len()
        )));
    }
    if headers[0].group != GLOBAL_GROUP {
        return Err(BackupError::Format(
            "the first group is not the global group".into(),
        ));
    }
    if headers
        .windows(2)
        .any(|pair| pair[0].group >= pair[1].group)
    {
        return Err(BackupError::Format(
            "groups out of order or repeated".into(),
        ));
    }
    Ok(())
}

/// A writer that counts the bytes it passes on.
struct Counting<'w, W> {
    out: &'w mut W,
    bytes: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(bytes)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A digest as lowercase hex.
pub fn hex_digest(digest: &[u8; DIGEST_LEN]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
