//! The snapshot data format: a self-checking, length-prefixed dump of the state column
//! families and the core metadata.
//!
//! ```text
//! "IDEMSNAP" | version: u32 BE (= 1)
//! frame*     : tag: u8 (1..=6) | key_len: u32 BE | key | value_len: u32 BE | value
//! end        : tag 0 | frame count: u64 BE | SHA-256 of every byte before the digest
//! ```
//!
//! Tags: 1 `records`, 2 `operations`, 3 `expiry`, 4 `audit`, 5 the core `Meta` (empty key),
//! 6 the group's `Placement` (empty key).
//! Keys and values are copied byte for byte from RocksDB (see the `db` module for their
//! encodings), so building is a scan and installing is a batch of puts; the same state
//! dumps to the same bytes on every replica. The Raft position (last log id, membership)
//! travels beside the data in openraft's `SnapshotMeta`, not inside it. Installing checks
//! the digest and decodes every frame before anything is written: a truncated, corrupted
//! or foreign blob is refused as a whole.

use idem_core::store::{ExpiryKey, Meta};
use idem_core::{AuditEntry, Placement, Record, RecordKey};
use rocksdb::{IteratorMode, WriteBatch};
use sha2::{Digest, Sha256};

use crate::codec::{self, CORE_META, PLACEMENT};
use crate::db::{Cf, Db};
use crate::error::StoreError;

const MAGIC: &[u8; 8] = b"IDEMSNAP";
const VERSION: u32 = 2;
const DIGEST_LEN: usize = 32;
const END: u8 = 0;
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

/// Dumps the state as seen by `view` (a RocksDB snapshot, for a consistent cut).
pub(crate) fn dump(db: &Db, view: &rocksdb::Snapshot<'_>) -> Result<Vec<u8>, StoreError> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_be_bytes());
    let mut frames = 0u64;
    for cf in Cf::STATE {
        for item in view.iterator_cf(db.cf(cf), IteratorMode::Start) {
            let (key, value) = item?;
            push_frame(&mut out, tag_of(cf), &key, &value)?;
            frames += 1;
        }
    }
    for (tag, key) in [(META_TAG, CORE_META), (PLACEMENT_TAG, PLACEMENT)] {
        if let Some(value) = view.get_cf(db.cf(Cf::SmMeta), key)? {
            push_frame(&mut out, tag, &[], &value)?;
            frames += 1;
        }
    }
    out.push(END);
    out.extend_from_slice(&frames.to_be_bytes());
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    Ok(out)
}

fn push_frame(out: &mut Vec<u8>, tag: u8, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
    out.push(tag);
    for part in [key, value] {
        let len = u32::try_from(part.len())
            .map_err(|_| StoreError::corrupt("snapshot frame", "longer than 4 GiB"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(part);
    }
    Ok(())
}

/// Checks `data` and adds its frames to `batch` as puts (the caller clears the state
/// first, in the same batch).
pub(crate) fn load(db: &Db, data: &[u8], batch: &mut WriteBatch) -> Result<(), StoreError> {
    let mut reader = Reader::new(verify(data)?);
    let mut frames = 0u64;
    loop {
        let tag = reader.u8()?;
        if tag == END {
            break;
        }
        let key = reader.part()?;
        let value = reader.part()?;
        let cf = check_frame(tag, key, value)?;
        let key = match tag {
            META_TAG => CORE_META,
            PLACEMENT_TAG => PLACEMENT,
            _ => key,
        };
        batch.put_cf(db.cf(cf), key, value);
        frames += 1;
    }
    let expected = u64::from_be_bytes(reader.array()?);
    if expected != frames || !reader.is_done() {
        return Err(StoreError::corrupt(
            "snapshot",
            "frame count or length mismatch",
        ));
    }
    Ok(())
}

/// Checks magic, version and digest; returns the bytes after the header, before the digest.
fn verify(data: &[u8]) -> Result<&[u8], StoreError> {
    let header = MAGIC.len() + 4;
    if data.len() < header + DIGEST_LEN || &data[..MAGIC.len()] != MAGIC {
        return Err(StoreError::corrupt("snapshot", "not an idem snapshot"));
    }
    let (body, digest) = data.split_at(data.len() - DIGEST_LEN);
    if Sha256::digest(body).as_slice() != digest {
        return Err(StoreError::corrupt("snapshot", "digest mismatch"));
    }
    let version = u32::from_be_bytes(data[MAGIC.len()..header].try_into().unwrap_or_default());
    if version != VERSION {
        return Err(StoreError::corrupt(
            "snapshot",
            format!("format version {version}, this build reads {VERSION}"),
        ));
    }
    Ok(&body[header..])
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
            codec::decode::<Placement>(value)?;
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

/// A cursor over the frames.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(rest: &'a [u8]) -> Self {
        Reader { rest }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if self.rest.len() < n {
            return Err(StoreError::corrupt("snapshot", "truncated"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], StoreError> {
        let bytes = self.take(N)?;
        Ok(bytes.try_into().unwrap_or([0; N]))
    }

    fn u8(&mut self) -> Result<u8, StoreError> {
        Ok(self.array::<1>()?[0])
    }

    fn part(&mut self) -> Result<&'a [u8], StoreError> {
        let len = u32::from_be_bytes(self.array()?);
        self.take(usize::try_from(len).unwrap_or(usize::MAX))
    }

    fn is_done(&self) -> bool {
        self.rest.is_empty()
    }
}
