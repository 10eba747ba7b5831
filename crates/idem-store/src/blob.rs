//! The snapshot data format: a self-checking, length-prefixed dump of the state column
//! families and the core metadata.
//!
//! ```text
//! "IDEMSNAP" | version: u32 BE (= 2)
//! frame*     : tag: u8 (1..=6) | key_len: u32 BE | key | value_len: u32 BE | value
//! end        : tag 0 | frame count: u64 BE | SHA-256 of every byte before the digest
//! ```
//!
//! Tags: 1 `records`, 2 `operations`, 3 `expiry`, 4 `audit`, 5 the core `Meta` (empty key),
//! 6 the group's `Placement` (empty key).
//! Keys and values are copied byte for byte from RocksDB (see the `db` module for their
//! encodings), so building is a scan and installing is a sequence of puts; the same state
//! dumps to the same bytes on every replica. The Raft position (last log id, membership)
//! travels beside the data in openraft's `SnapshotMeta`, not inside it.
//!
//! Both directions stream: [`dump`] writes frame by frame into a buffered file while the
//! digest is computed incrementally, and `FrameReader` (the `frames` module) reads frames
//! back one at a time. Installing reads the whole file once to check the digest and decode
//! every frame before anything is written (a truncated, corrupted or foreign blob is
//! refused as a whole), then a second time to load it. Memory stays bounded by a buffer
//! and the largest frame, whatever the size of the state.

use std::io::{self, Write};

use idem_core::store::{ExpiryKey, Meta};
use idem_core::{AuditEntry, Placement, Record, RecordKey};
use rocksdb::IteratorMode;
use sha2::{Digest, Sha256};

use crate::codec::{self, CORE_META, PLACEMENT};
use crate::db::{Cf, Db};
use crate::error::StoreError;

pub(crate) const MAGIC: &[u8; 8] = b"IDEMSNAP";
pub(crate) const VERSION: u32 = 2;
pub(crate) const DIGEST_LEN: usize = 32;
pub(crate) const END: u8 = 0;
const META_TAG: u8 = 5;
const PLACEMENT_TAG: u8 = 6;

/// The frame tag of a state column family.
fn tag_of(cf: Cf) -> u8 {
    match cf {
        Cf::Records => 1,
        Cf::Operations => 2,
        Cf::Expiry => 3,
        Cf::Audit => 4,
        _ => unreachable!("only state column families are dumped"),
    }
}

/// Writes the state as seen by `view` (a RocksDB snapshot, for a consistent cut) to `out`,
/// one frame at a time (the caller buffers `out`); returns the number of bytes written.
pub(crate) fn dump(
    db: &Db,
    view: &rocksdb::Snapshot<'_>,
    out: impl Write,
) -> Result<u64, StoreError> {
    let mut out = Hashing::new(out);
    out.write_all(MAGIC)?;
    out.write_all(&VERSION.to_be_bytes())?;
    let mut frames = 0u64;
    for cf in Cf::STATE {
        for item in view.iterator_cf(db.cf(cf), IteratorMode::Start) {
            let (key, value) = item?;
            write_frame(&mut out, tag_of(cf), &key, &value)?;
            frames += 1;
        }
    }
    for (tag, key) in [(META_TAG, CORE_META), (PLACEMENT_TAG, PLACEMENT)] {
        if let Some(value) = view.get_cf(db.cf(Cf::SmMeta), key)? {
            write_frame(&mut out, tag, &[], &value)?;
            frames += 1;
        }
    }
    out.write_all(&[END])?;
    out.write_all(&frames.to_be_bytes())?;
    let (mut out, digest, len) = out.finish();
    out.write_all(&digest)?;
    out.flush()?;
    Ok(len + DIGEST_LEN as u64)
}

fn write_frame(out: &mut impl Write, tag: u8, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
    out.write_all(&[tag])?;
    for part in [key, value] {
        let len = u32::try_from(part.len())
            .map_err(|_| StoreError::corrupt("snapshot frame", "longer than 4 GiB"))?;
        out.write_all(&len.to_be_bytes())?;
        out.write_all(part)?;
    }
    Ok(())
}

/// Where a checked frame goes: its column family and key.
pub(crate) fn target<'a>(
    tag: u8,
    key: &'a [u8],
    value: &[u8],
) -> Result<(Cf, &'a [u8]), StoreError> {
    let cf = check_frame(tag, key, value)?;
    let key = match tag {
        META_TAG => CORE_META,
        PLACEMENT_TAG => PLACEMENT,
        _ => key,
    };
    Ok((cf, key))
}

/// Decodes one frame fully; returns the column family it goes to.
fn check_frame(tag: u8, key: &[u8], value: &[u8]) -> Result<Cf, StoreError> {
    match tag {
        1 => {
            let record: Record = codec::decode(value)?;
            same_key(record.key.encode() == key)?;
            Ok(Cf::Records)
        }
        2 => {
            same_key(key.len() == 16)?;
            RecordKey::decode(value)?;
            Ok(Cf::Operations)
        }
        3 => {
            ExpiryKey::decode(key).ok_or_else(|| StoreError::corrupt("snapshot", "expiry key"))?;
            RecordKey::decode(value)?;
            Ok(Cf::Expiry)
        }
        4 => {
            let entry: AuditEntry = codec::decode(value)?;
            same_key(codec::key_u64(key, "audit key")? == entry.seq)?;
            Ok(Cf::Audit)
        }
        META_TAG => {
            codec::decode::<Meta>(value)?;
            Ok(Cf::SmMeta)
        }
        PLACEMENT_TAG => {
            Placement::decode(value)?;
            Ok(Cf::SmMeta)
        }
        other => Err(StoreError::corrupt(
            "snapshot",
            format!("unknown frame tag {other}"),
        )),
    }
}

fn same_key(ok: bool) -> Result<(), StoreError> {
    if ok {
        Ok(())
    } else {
        Err(StoreError::corrupt(
            "snapshot",
            "frame key does not match its value",
        ))
    }
}

/// A writer that hashes and counts what goes through it.
pub(crate) struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> Hashing<W> {
    pub(crate) fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }

    /// The inner writer, the digest of everything written and its length.
    pub(crate) fn finish(self) -> (W, [u8; DIGEST_LEN], u64) {
        (self.inner, self.hasher.finalize().into(), self.len)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
