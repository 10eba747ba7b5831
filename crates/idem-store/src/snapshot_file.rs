//! The data of a snapshot as openraft passes it around: an open file, never bytes in
//! memory.
//!
//! Why a file handle: a snapshot is a dump of the whole state (gigabytes at millions of
//! records). openraft hands the snapshot data from the state machine to the network
//! (sending to a lagging follower) and from the network back to the state machine
//! (installing what a leader sent); every one of those steps reads or writes the file a
//! bounded chunk at a time. Reads and writes are positional (`pread`/`pwrite`), so a
//! shared handle has no cursor to race on.
//!
//! A file is either *published* (the current snapshot of a store, named by its pointer;
//! dropping the handle leaves it alone) or *temporary* (being built or received, under
//! the snapshot directory's `partial/`; dropping the handle deletes it, so a transfer that
//! openraft abandons leaves nothing behind). Installing a temporary file adopts it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// An open snapshot file (openraft's `SnapshotData` for idem).
pub struct SnapshotFile {
    file: File,
    path: PathBuf,
    len: u64,
    temporary: bool,
}

impl SnapshotFile {
    /// Creates an empty temporary file at `path` (truncating one left there), deleted on drop
    /// unless a store adopts it.
    pub fn create_temporary(path: PathBuf) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(SnapshotFile {
            file,
            path,
            len: 0,
            temporary: true,
        })
    }

    /// Opens the published file at `path` for reading.
    pub(crate) fn open_published(path: PathBuf) -> io::Result<Self> {
        let file = File::open(&path)?;
        let len = file.metadata()?.len();
        Ok(SnapshotFile {
            file,
            path,
            len,
            temporary: false,
        })
    }

    /// The size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the file is (a temporary file moves when a store adopts it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Up to `max` bytes from `offset` (fewer only at the end of the file).
    pub fn read_chunk(&self, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let want = usize::try_from(self.len.saturating_sub(offset)).map_or(max, |n| n.min(max));
        let mut buf = vec![0; want];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// Appends `bytes` at the end.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.len)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// A sequential reader from the start (positional reads: readers do not interfere).
    pub(crate) fn reader(&self) -> ReadAt<'_> {
        ReadAt {
            file: &self.file,
            offset: 0,
        }
    }

    /// True while the file is temporary (deleted on drop).
    pub(crate) fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// Makes durable what was written, then renames the file to `to` (same file system),
    /// which it is from then on, published: no longer deleted on drop.
    pub(crate) fn publish_as(&mut self, to: PathBuf) -> io::Result<()> {
        self.file.sync_all()?;
        std::fs::rename(&self.path, &to)?;
        self.path = to;
        self.temporary = false;
        Ok(())
    }
}

/// Writing appends (see [`SnapshotFile::append`]); wrap it in a `BufWriter`.
impl Write for SnapshotFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.append(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if !self.temporary {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(file = ?self.path, error = %e, "cannot remove a temporary snapshot file");
            }
        }
    }
}

impl fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("temporary", &self.temporary)
            .finish()
    }
}

/// Sequential reads of a shared handle through positional reads.
pub(crate) struct ReadAt<'f> {
    file: &'f File,
    offset: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}
