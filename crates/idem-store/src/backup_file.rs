//! Reading a backup file (format: the `backup` module): its header, and a check of its
//! digest over every byte before anything is trusted.
//!
//! Why check the whole file up front: a flipped bit in the header could change the log
//! index a restore starts from, and one in the state would restore a wrong record. The
//! trailing SHA-256 covers both, so [`BackupFile::open`] reads the file once, streaming,
//! and refuses it whole on a mismatch. (A restore checks the snapshot inside again, frame
//! by frame, as every snapshot install does.)

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::backup::{hex_digest, BackupHeader, BACKUP_MAGIC, BACKUP_VERSION, MAX_HEADER};
use crate::backup_error::BackupError;
use crate::blob::DIGEST_LEN;
use crate::codec;

/// Bytes before the header: magic, version, header length.
const PREAMBLE: u64 = 8 + 4 + 4;
/// Read buffer of the digest check and the copy.
const BUFFER: usize = 1 << 20;

/// An opened backup file whose digest has been checked.
#[derive(Debug)]
pub struct BackupFile {
    file: File,
    header: BackupHeader,
    snapshot_start: u64,
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
        if version != BACKUP_VERSION {
            return Err(BackupError::Format(format!(
                "format version {version}, this build reads {BACKUP_VERSION}"
            )));
        }
        let digest = check_digest(&file, len)?;
        let header_len = u32::from_be_bytes(preamble[12..16].try_into().expect("4 bytes"));
        let snapshot_start = PREAMBLE + u64::from(header_len);
        if header_len > MAX_HEADER || snapshot_start + DIGEST_LEN as u64 > len {
            return Err(BackupError::Format(format!("header of {header_len} bytes")));
        }
        let mut encoded = vec![0u8; header_len as usize];
        file.read_exact_at(&mut encoded, PREAMBLE)?;
        let header: BackupHeader = codec::decode(&encoded)?;
        Ok(BackupFile {
            file,
            header,
            snapshot_start,
            len,
            digest,
        })
    }

    /// What the backup reflects.
    pub fn header(&self) -> &BackupHeader {
        &self.header
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

    /// Copies the snapshot inside the file (the `blob` format) to `out`.
    pub(crate) fn copy_snapshot(&self, out: &mut impl Write) -> io::Result<u64> {
        let end = self.len - DIGEST_LEN as u64;
        let mut offset = self.snapshot_start;
        let mut buf = vec![0u8; BUFFER];
        while offset < end {
            let want = usize::try_from(end - offset).map_or(BUFFER, |n| n.min(BUFFER));
            self.file.read_exact_at(&mut buf[..want], offset)?;
            out.write_all(&buf[..want])?;
            offset += want as u64;
        }
        Ok(end - self.snapshot_start)
    }
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
