//! Reading a snapshot file (format: the `blob` module) one frame at a time, hashing as it
//! goes.
//!
//! Why streaming: a snapshot is as large as the state, so it is never read whole. The
//! reader holds one buffer and the current frame; lengths read from the file are checked
//! against what is left of it and against [`MAX_PART`] before anything is allocated, so a
//! corrupted length cannot make it allocate gigabytes.

use std::io::{self, BufReader, Read};

use sha2::{Digest, Sha256};

use crate::blob::{DIGEST_LEN, END, MAGIC, VERSION};
use crate::error::StoreError;
use crate::snapshot_file::{ReadAt, SnapshotFile};

/// Size of the read buffer.
const BUFFER: usize = 256 << 10;

/// Largest key or value a frame may carry: no record can be larger than a Raft message
/// (64 MiB by default), which carried the command that wrote it.
const MAX_PART: u32 = 64 << 20;

/// One frame, borrowed from the reader until the next call.
pub(crate) struct Frame<'a> {
    pub(crate) tag: u8,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
}

/// Reads the frames of a snapshot file from its start.
pub(crate) struct FrameReader<'f> {
    input: BufReader<ReadAt<'f>>,
    hasher: Sha256,
    remaining: u64,
    frames: u64,
    announced: Option<u64>,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl<'f> FrameReader<'f> {
    /// Starts reading `file` and checks its header.
    pub(crate) fn new(file: &'f SnapshotFile) -> Result<Self, StoreError> {
        let len = file.len();
        let mut reader = FrameReader {
            input: BufReader::with_capacity(BUFFER, file.reader()),
            hasher: Sha256::new(),
            remaining: len,
            frames: 0,
            announced: None,
            key: Vec::new(),
            value: Vec::new(),
        };
        let header = MAGIC.len() + 4;
        if len < (header + 1 + 8 + DIGEST_LEN) as u64 {
            return Err(StoreError::corrupt("snapshot", "not an idem snapshot"));
        }
        let magic: [u8; 8] = reader.array()?;
        if &magic != MAGIC {
            return Err(StoreError::corrupt("snapshot", "not an idem snapshot"));
        }
        let version = u32::from_be_bytes(reader.array()?);
        if version != VERSION {
            return Err(StoreError::corrupt(
                "snapshot",
                format!("format version {version}, this build reads {VERSION}"),
            ));
        }
        Ok(reader)
    }

    /// The next frame, or `None` after the end frame.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Frame<'_>>, StoreError> {
        if self.announced.is_some() {
            return Ok(None);
        }
        let [tag] = self.array::<1>()?;
        if tag == END {
            self.announced = Some(u64::from_be_bytes(self.array()?));
            return Ok(None);
        }
        let mut key = std::mem::take(&mut self.key);
        let mut value = std::mem::take(&mut self.value);
        self.part(&mut key)?;
        self.part(&mut value)?;
        self.key = key;
        self.value = value;
        self.frames += 1;
        Ok(Some(Frame {
            tag,
            key: &self.key,
            value: &self.value,
        }))
    }

    /// Checks the end: frame count, digest, nothing after it. Call after `next_frame`
    /// answered `None`.
    pub(crate) fn finish(mut self) -> Result<u64, StoreError> {
        let digest: [u8; DIGEST_LEN] = self.hasher.clone().finalize().into();
        let mut stored = [0; DIGEST_LEN];
        self.read(&mut stored)?;
        if stored != digest {
            return Err(StoreError::corrupt("snapshot", "digest mismatch"));
        }
        if self.announced != Some(self.frames) || self.remaining != 0 {
            return Err(StoreError::corrupt(
                "snapshot",
                "frame count or length mismatch",
            ));
        }
        Ok(self.frames)
    }

    /// Reads one length-prefixed part into `buf`.
    fn part(&mut self, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        let len = u32::from_be_bytes(self.array()?);
        if len > MAX_PART || u64::from(len) > self.remaining {
            return Err(StoreError::corrupt(
                "snapshot",
                "truncated or oversized frame",
            ));
        }
        buf.resize(len as usize, 0);
        self.read(buf)?;
        self.hasher.update(&buf[..]);
        Ok(())
    }

    /// Reads and hashes a fixed-size field.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], StoreError> {
        let mut bytes = [0; N];
        self.read(&mut bytes)?;
        self.hasher.update(bytes);
        Ok(bytes)
    }

    /// Reads exactly `buf.len()` bytes (not hashed).
    fn read(&mut self, buf: &mut [u8]) -> Result<(), StoreError> {
        if buf.len() as u64 > self.remaining {
            return Err(StoreError::corrupt("snapshot", "truncated"));
        }
        self.input.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => StoreError::corrupt("snapshot", "truncated"),
            _ => StoreError::Io(e),
        })?;
        self.remaining -= buf.len() as u64;
        Ok(())
    }
}
