//! Open-time checks: a store whose files are damaged refuses to open, naming the file,
//! rather than serve what the damage left.
//!
//! RocksDB alone does not give that. Point-in-time WAL recovery (the mode the Raft log
//! needs: a write torn by a power loss ends the log, never a hole in it) stops at the first
//! record whose checksum fails and opens with everything after it silently dropped: a bit
//! flipped in the middle of a write-ahead log would cost a node Raft entries and votes it
//! had acknowledged. And a table file is checked only when a block of it is read, so a node
//! could start on a damaged one and find out later, on a read or a compaction.
//!
//! So, before RocksDB opens, [`logs`] reads every write-ahead log and MANIFEST (the same
//! record format; a damaged MANIFEST record can make RocksDB drop table files as silently)
//! the way RocksDB's reader does, and refuses a damaged record that has an intact record
//! after it, in the same file or a later one: that is damage, not a torn tail. What it
//! cannot tell from a write torn by a power loss is damage to the very last record, which
//! RocksDB drops as it would a torn one. After RocksDB opened (which checks every table's
//! footer and metadata blocks), [`tables`] reads every key of every column family with
//! block checksums verified, which names a damaged table file. The snapshot file is checked
//! whole by the snapshot store when it opens.

use std::fs;
use std::path::{Path, PathBuf};

use rocksdb::{IteratorMode, ReadOptions};

use crate::db::{Cf, Db};
use crate::error::StoreError;

/// RocksDB's WAL block size: records never cross a block boundary.
const BLOCK: usize = 32 * 1024;
/// A physical record's header: masked CRC32C (4), payload length (2), type (1).
const HEADER: usize = 7;
/// The record types a log written without recycling holds (full, first, middle, last).
const TYPES: std::ops::RangeInclusive<u8> = 1..=4;
/// Read-ahead of the table scan: it reads every table once, front to back.
const READAHEAD: usize = 2 << 20;

/// Refuses write-ahead logs and MANIFESTs under `db_dir` that hold damage followed by
/// intact records.
pub(crate) fn logs(db_dir: &Path) -> Result<(), StoreError> {
    for kind in [LogKind::Wal, LogKind::Manifest] {
        check_sequence(&log_files(db_dir, kind)?, kind)?;
    }
    Ok(())
}

/// Checks the logs of one kind, oldest first: damage may only be the end of the last.
fn check_sequence(paths: &[PathBuf], kind: LogKind) -> Result<(), StoreError> {
    let mut damaged: Option<(&Path, usize)> = None;
    for path in paths {
        let scan = scan(&fs::read(path)?);
        if let Some((first, offset)) = damaged {
            if scan.intact > 0 {
                return Err(damage(
                    kind,
                    first,
                    offset,
                    "a later file holds intact records",
                ));
            }
        }
        if let Some(bad) = scan.first_bad {
            if scan.intact_after_bad {
                return Err(damage(kind, path, bad, "intact records follow it"));
            }
            damaged.get_or_insert((path, bad));
        }
    }
    Ok(())
}

/// Reads every key of every column family with checksums verified.
pub(crate) fn tables(db: &Db) -> Result<(), StoreError> {
    for cf in Cf::ALL {
        let mut options = ReadOptions::default();
        options.set_verify_checksums(true);
        options.fill_cache(false);
        options.set_readahead_size(READAHEAD);
        let iter = db
            .raw()
            .iterator_cf_opt(db.cf(cf), options, IteratorMode::Start);
        for item in iter {
            item.map_err(|e| StoreError::corrupt("table file", e.to_string()))?;
        }
    }
    Ok(())
}

fn damage(kind: LogKind, path: &Path, offset: usize, why: &str) -> StoreError {
    StoreError::corrupt(
        kind.what(),
        format!(
            "{}: a record at byte {offset} fails its checksum and {why}; the node's data \
             is damaged (replace the node from its peers, see docs/guarantees.md)",
            path.display()
        ),
    )
}

/// The two kinds of files in RocksDB's log format.
#[derive(Clone, Copy)]
enum LogKind {
    /// `<n>.log`: the write-ahead log.
    Wal,
    /// `MANIFEST-<n>`: the table files of each version of the database.
    Manifest,
}

impl LogKind {
    /// The file number of `name` if it is a file of this kind.
    fn number(self, name: &str) -> Option<u64> {
        match self {
            LogKind::Wal => name.strip_suffix(".log"),
            LogKind::Manifest => name.strip_prefix("MANIFEST-"),
        }?
        .parse()
        .ok()
    }

    /// What the error calls it.
    fn what(self) -> &'static str {
        match self {
            LogKind::Wal => "write-ahead log",
            LogKind::Manifest => "MANIFEST",
        }
    }
}

/// The files of `kind` in `db_dir`, oldest (lowest number) first.
fn log_files(db_dir: &Path, kind: LogKind) -> Result<Vec<PathBuf>, StoreError> {
    let Ok(entries) = fs::read_dir(db_dir) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let number = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| kind.number(n));
        if let Some(number) = number {
            files.push((number, path));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, path)| path).collect())
}

/// What a scan of one log found.
#[derive(Debug, Default, PartialEq, Eq)]
struct Scan {
    /// Intact records.
    intact: usize,
    /// Where the first damaged record starts.
    first_bad: Option<usize>,
    /// Whether an intact record comes after it.
    intact_after_bad: bool,
}

/// Walks the records of one log. At a damaged record, RocksDB's reader drops the rest of
/// the block (the length may be the damaged part) and goes on at the next one; this walk
/// does the same, after searching the rest of that block, at every byte, for an intact
/// record (only damaged files pay for the search).
fn scan(bytes: &[u8]) -> Scan {
    let mut found = Scan::default();
    let mut at = 0;
    while at < bytes.len() {
        let block_end = (at / BLOCK + 1) * BLOCK;
        let end = block_end.min(bytes.len());
        match record(bytes, at, end) {
            Record::Intact(next) => {
                found.intact += 1;
                found.intact_after_bad |= found.first_bad.is_some();
                at = next;
            }
            Record::BlockEnd => at = block_end,
            Record::Damaged => {
                found.first_bad.get_or_insert(at);
                found.intact_after_bad |=
                    (at + 1..end).any(|p| matches!(record(bytes, p, end), Record::Intact(_)));
                at = block_end;
            }
        }
    }
    found
}

/// One physical record read at `at`.
enum Record {
    /// Checksum and type are right; the next record starts at the offset.
    Intact(usize),
    /// Padding or the block's zero-filled trailer: the block has no more records.
    BlockEnd,
    /// Damaged (or torn).
    Damaged,
}

fn record(bytes: &[u8], at: usize, end: usize) -> Record {
    if end - at < HEADER {
        return Record::BlockEnd;
    }
    let header = &bytes[at..at + HEADER];
    if header.iter().all(|&b| b == 0) {
        return Record::BlockEnd;
    }
    let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
    let next = at + HEADER + length;
    if next > end || !TYPES.contains(&header[6]) {
        return Record::Damaged;
    }
    let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    if stored == mask(crc32c(&bytes[at + HEADER - 1..next])) {
        Record::Intact(next)
    } else {
        Record::Damaged
    }
}

/// RocksDB's (and LevelDB's) masking of a stored CRC.
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// CRC-32C (Castagnoli), one table lookup per byte.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc = (crc >> 8) ^ CRC_TABLE[usize::from((crc as u8) ^ byte)];
    }
    !crc
}

/// The byte-at-a-time table of CRC-32C's reflected polynomial.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = (crc >> 1) ^ (0x82f6_3b78 & (crc & 1).wrapping_neg());
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of `records` full records of `len` bytes each, as RocksDB writes it.
    fn log(records: usize, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..records {
            let left = BLOCK - out.len() % BLOCK;
            if left < HEADER + len {
                out.resize(out.len() + left, 0);
            }
            let payload = vec![i as u8; len];
            let mut covered = vec![1u8];
            covered.extend_from_slice(&payload);
            out.extend_from_slice(&mask(crc32c(&covered)).to_le_bytes());
            out.extend_from_slice(&(len as u16).to_le_bytes());
            out.push(1);
            out.extend_from_slice(&payload);
        }
        out
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn an_intact_log_and_a_torn_tail_pass() {
        let whole = log(200, 1000);
        assert_eq!(scan(&whole).intact, 200);
        assert_eq!(scan(&whole).first_bad, None);
        let torn = &whole[..whole.len() - 10];
        let found = scan(torn);
        assert!(found.first_bad.is_some() && !found.intact_after_bad);
        let mut flipped_last = whole.clone();
        let last = flipped_last.len() - 5;
        flipped_last[last] ^= 4;
        assert!(!scan(&flipped_last).intact_after_bad);
    }

    #[test]
    fn damage_before_intact_records_is_found_wherever_it_is() {
        let whole = log(200, 1000);
        for offset in [
            0,
            3,
            5,
            6,
            7,
            500,
            32_768 + 100,
            whole.len() / 2,
            whole.len() - 2_000,
        ] {
            let mut damaged = whole.clone();
            damaged[offset] ^= 0x10;
            let found = scan(&damaged);
            assert!(found.intact_after_bad, "flip at {offset}: {found:?}");
        }
    }
}
