//! Reading a backup file (format: the `backup` module): its header, and a check of its
//! digest over every byte before anything is trusted.
//!
//! Why check the whole file up front: a flipped bit in the header could change the log
//! index a restore starts from, and one in the state would restore a wrong record. The
//! trailing SHA-256 covers both, so [`BackupFile::open`] reads the file once, streaming,
//! and refuses it whole on a mismatch. (A restore checks the snapshot inside again, frame
//! by frame, as every snapshot install does.)
//!
//! Both formats are read: version 1 (one group) and version 2 (several groups, with a
//! table of their snapshots' lengths before the digest, which must add up to the bytes
//! between the header and the table exactly).

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::backup::{
    check_groups, hex_digest, BackupHeader, BACKUP_MAGIC, BACKUP_VERSION, BACKUP_VERSION_SINGLE,
    MAX_HEADER,
};
use crate::backup_error::BackupError;
use crate::blob::DIGEST_LEN;
use crate::codec;

/// Bytes before the header: magic, version, header length.
const PREAMBLE: u64 = 8 + 4 + 4;
/// Read buffer of the digest check and the copy.
const BUFFER: usize = 1 << 20;

/// Bytes of one entry of version 2's table of snapshot lengths.
const LENGTH_ENTRY: u64 = 8;

/// An opened backup file whose digest has been checked.
#[derive(Debug)]
pub struct BackupFile {
    file: File,
    version: u32,
    headers: Vec<BackupHeader>,
    /// Where each group's snapshot starts and how long it is, in the headers' order.
    sections: Vec<(u64, u64)>,
    len: u64,
    digest: [u8; DIGEST_LEN],
}

impl BackupFile {
    /// Opens `path`, reads the header and checks the digest of the whole file.
    pub fn open(path: &Path) -> Result<Self, BackupError> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len < PREAMBLE + DIGEST_LEN as u64 {
            return Err(BackupError::Format("too short".into()));
        }
        let mut preamble = [0u8; PREAMBLE as usize];
        file.read_exact_at(&mut preamble, 0)?;
        if &preamble[..8] != BACKUP_MAGIC {
            return Err(BackupError::Format("wrong magic bytes".into()));
        }
        let version = u32::from_be_bytes(preamble[8..12].try_into().expect("4 bytes"));
        if version != BACKUP_VERSION_SINGLE && version != BACKUP_VERSION {
            return Err(BackupError::Format(format!(
                "format version {version}, this build reads {BACKUP_VERSION_SINGLE} and \
                 {BACKUP_VERSION}"
            )));
        }
        let digest = check_digest(&file, len)?;
        let header_len = u32::from_be_bytes(preamble[12..16].try_into().expect("4 bytes"));
        let snapshot_start = PREAMBLE + u64::from(header_len);
        let body_end = len - DIGEST_LEN as u64;
        if header_len > MAX_HEADER || snapshot_start > body_end {
            return Err(BackupError::Format(format!("header of {header_len} bytes")));
        }
        let mut encoded = vec![0u8; header_len as usize];
        file.read_exact_at(&mut encoded, PREAMBLE)?;
        let (headers, sections) = if version == BACKUP_VERSION_SINGLE {
            let header: BackupHeader = codec::decode(&encoded)?;
            (
                vec![header],
                vec![(snapshot_start, body_end - snapshot_start)],
            )
        } else {
            let headers: Vec<BackupHeader> = codec::decode(&encoded)?;
            check_groups(&headers)?;
            let sections = read_sections(&file, snapshot_start, body_end, headers.len())?;
            (headers, sections)
        };
        Ok(BackupFile {
            file,
            version,
            headers,
            sections,
            len,
            digest,
        })
    }

    /// The global group's header (the first group of every backup).
    pub fn header(&self) -> &BackupHeader {
        &self.headers[0]
    }

    /// Every group's header, by group id, the global group first.
    pub fn headers(&self) -> &[BackupHeader] {
        &self.headers
    }

    /// The file's format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file (never, for a file that opened).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file's digest, hex.
    pub fn digest_hex(&self) -> String {
        hex_digest(&self.digest)
    }

    /// Copies the snapshot of the `group`-th group (in [`Self::headers`]' order; the `blob`
    /// format) to `out`.
    pub(crate) fn copy_snapshot(&self, group: usize, out: &mut impl Write) -> io::Result<u64> {
        let (start, length) = self.sections[group];
        let end = start + length;
        let mut offset = start;
        let mut buf = vec![0u8; BUFFER];
        while offset < end {
            let want = usize::try_from(end - offset).map_or(BUFFER, |n| n.min(BUFFER));
            self.file.read_exact_at(&mut buf[..want], offset)?;
            out.write_all(&buf[..want])?;
            offset += want as u64;
        }
        Ok(length)
    }
}

/// Reads version 2's table of `groups` snapshot lengths, which ends at `body_end`; the
/// snapshots must fill the bytes from `start` to the table exactly.
fn read_sections(
    file: &File,
    start: u64,
    body_end: u64,
    groups: usize,
) -> Result<Vec<(u64, u64)>, BackupError> {
    let table_len = LENGTH_ENTRY * groups as u64;
    let table_start = body_end
        .checked_sub(table_len)
        .filter(|table_start| *table_start >= start)
        .ok_or_else(|| BackupError::Format("no room for the table of lengths".into()))?;
    let mut table = vec![0u8; table_len as usize];
    file.read_exact_at(&mut table, table_start)?;
    let mut sections = Vec::with_capacity(groups);
    let mut offset = start;
    for entry in table.chunks_exact(LENGTH_ENTRY as usize) {
        let length = u64::from_be_bytes(entry.try_into().expect("8 bytes"));
        let end = offset
            .checked_add(length)
            .filter(|end| *end <= table_start)
            .ok_or_else(|| BackupError::Format("a snapshot runs past the table".into()))?;
        sections.push((offset, length));
        offset = end;
    }
    if offset != table_start {
        return Err(BackupError::Format(
            "bytes between the snapshots and the table".into(),
        ));
    }
    Ok(sections)
}

/// Hashes every byte of `file` before its last [`DIGEST_LEN`] and compares with them.
fn check_digest(file: &File, len: u64) -> Result<[u8; DIGEST_LEN], BackupError> {
    let body = len - DIGEST_LEN as u64;
    let mut input = BufReader::with_capacity(BUFFER, file.take(body));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let computed: [u8; DIGEST_LEN] = hasher.finalize().into();
    let mut recorded = [0u8; DIGEST_LEN];
    file.read_exact_at(&mut recorded, body)?;
    if computed != recorded {
        return Err(BackupError::Digest {
            recorded: hex_digest(&recorded),
            computed: hex_digest(&computed),
        });
    }
    Ok(recorded)
}
