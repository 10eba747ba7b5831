//! The volatile layer of one file: what was written since the last fsync.
//!
//! This is the page cache the filesystem simulates. Writes land in whole pages held in
//! memory (filled from the backing file where they were not written), a truncate moves the
//! logical size and remembers the lowest cut, and readers see the result at once. Only
//! [`Volatile::flush`] (an fsync) writes the pages and the size to the backing file, so
//! dropping a `Volatile` is exactly a power loss for this file: the backing file still holds
//! what the last successful fsync left there.
//!
//! A failed fsync follows Linux rather than a forgiving model: the pages it should have
//! written are marked lost. They stay readable until the power loss (as dirty pages stay in
//! the page cache after a writeback error), but no later fsync writes them, so a program
//! that retries the fsync and trusts its success ("fsyncgate") loses the data.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Size of a cached page (the granularity of writes to the backing file).
pub(crate) const PAGE: u64 = 4096;

/// One cached page.
struct Page {
    /// The page's bytes, `PAGE` long.
    bytes: Box<[u8]>,
    /// Dropped from the write-back path by a failed fsync: readable, never persisted.
    lost: bool,
}

/// The unsynced state of one file.
pub(crate) struct Volatile {
    /// The backing file, opened for reading and writing.
    file: Arc<File>,
    /// Pages written since the last fsync, by page index.
    pages: BTreeMap<u64, Page>,
    /// The size readers see.
    size: u64,
    /// The lowest size a truncate set since the last fsync: backing bytes at or past it are
    /// gone for readers (they read zeros once the file grows again).
    cut: Option<u64>,
}

impl Volatile {
    /// A clean layer over `file`: nothing cached, the size is the backing file's.
    pub(crate) fn new(file: Arc<File>) -> io::Result<Self> {
        let size = file.metadata()?.len();
        Ok(Volatile {
            file,
            pages: BTreeMap::new(),
            size,
            cut: None,
        })
    }

    /// The size readers see.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes held in memory (whole pages), for reports.
    pub(crate) fn cached_bytes(&self) -> u64 {
        self.pages.len() as u64 * PAGE
    }

    /// Whether a power loss would change nothing: no page, no pending truncate or growth.
    pub(crate) fn is_clean(&self) -> io::Result<bool> {
        Ok(self.pages.is_empty() && self.cut.is_none() && self.size == self.file.metadata()?.len())
    }

    /// Up to `len` bytes at `offset`, as a reader of the file sees them.
    pub(crate) fn read(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let end = offset.saturating_add(len).min(self.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut out = vec![0; (end - offset) as usize];
        let mut at = offset;
        while at < end {
            let index = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = ((PAGE - at % PAGE).min(end - at)) as usize;
            let dst = &mut out[(at - offset) as usize..][..take];
            match self.pages.get(&index) {
                Some(page) => dst.copy_from_slice(&page.bytes[within..within + take]),
                None => self.read_backing(at, dst)?,
            }
            at += take as u64;
        }
        Ok(out)
    }

    /// Writes `data` at `offset` into the cache.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let within = (at % PAGE) as usize;
            let take = (PAGE as usize - within).min(data.len() - done);
            let page = self.page_mut(at / PAGE)?;
            page.bytes[within..within + take].copy_from_slice(&data[done..done + take]);
            page.lost = false;
            done += take;
        }
        self.size = self.size.max(offset + data.len() as u64);
        Ok(())
    }

    /// Sets the size readers see: shrinking forgets the bytes past `size` (they read as
    /// zeros if the file grows again), growing adds zeros.
    pub(crate) fn truncate(&mut self, size: u64) {
        if size < self.size {
            let first_gone = size.div_ceil(PAGE);
            self.pages.retain(|&index, _| index < first_gone);
            if !size.is_multiple_of(PAGE) {
                if let Some(page) = self.pages.get_mut(&(size / PAGE)) {
                    page.bytes[(size % PAGE) as usize..].fill(0);
                }
            }
            self.cut = Some(self.cut.map_or(size, |cut| cut.min(size)));
        }
        self.size = size;
    }

    /// Grows the size to at least `size` (an allocating `fallocate`).
    pub(crate) fn extend(&mut self, size: u64) {
        if size > self.size {
            self.size = size;
        }
    }

    /// Persists the cache to the backing file (pending truncate, pages, size), optionally
    /// fdatasyncs it, and forgets what it wrote. Lost pages are kept and not written.
    pub(crate) fn flush(&mut self, sync_backing: bool) -> io::Result<()> {
        if let Some(cut) = self.cut {
            self.file.set_len(cut)?;
        }
        let mut lost = false;
        for (&index, page) in &self.pages {
            let start = index * PAGE;
            if page.lost {
                lost = true;
                continue;
            }
            if start >= self.size {
                continue;
            }
            let len = PAGE.min(self.size - start) as usize;
            self.file.write_all_at(&page.bytes[..len], start)?;
        }
        if !lost {
            self.file.set_len(self.size)?;
        }
        if sync_backing {
            self.file.sync_data()?;
        }
        self.pages.retain(|_, page| page.lost);
        self.cut = None;
        Ok(())
    }

    /// A failed fsync: every cached page leaves the write-back path (see the module docs).
    pub(crate) fn lose(&mut self) {
        for page in self.pages.values_mut() {
            page.lost = true;
        }
    }

    /// The cached page `index`, read from the backing file on first use.
    fn page_mut(&mut self, index: u64) -> io::Result<&mut Page> {
        if !self.pages.contains_key(&index) {
            let mut bytes = vec![0; PAGE as usize].into_boxed_slice();
            self.read_backing(index * PAGE, &mut bytes)?;
            self.pages.insert(index, Page { bytes, lost: false });
        }
        Ok(self.pages.get_mut(&index).expect("inserted above"))
    }

    /// Fills `buf` from the backing file at `offset`: zeros past its end and past the cut.
    fn read_backing(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(0);
        let limit = self.cut.unwrap_or(u64::MAX);
        if offset >= limit {
            return Ok(());
        }
        let wanted = (buf.len() as u64).min(limit - offset) as usize;
        read_full_at(&self.file, &mut buf[..wanted], offset).map(drop)
    }
}

/// Reads into `buf` at `offset` until it is full or the file ends (the rest stays as it was);
/// returns how many bytes were read.
pub(crate) fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn layer(initial: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, Volatile) {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, initial).unwrap();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let v = Volatile::new(Arc::new(file)).unwrap();
        (dir, path, v)
    }

    #[test]
    fn writes_are_visible_but_reach_the_backing_file_only_on_flush() {
        let (_dir, path, mut v) = layer(b"hello world");
        v.write(6, b"there, friend").unwrap();
        assert_eq!(v.read(0, 100).unwrap(), b"hello there, friend");
        assert_eq!(std::fs::read(&path).unwrap(), b"hello world");
        assert!(!v.is_clean().unwrap());
        v.flush(false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"hello there, friend");
        assert!(v.is_clean().unwrap());
    }

    #[test]
    fn writes_across_pages_and_holes_read_back_exactly() {
        let (_dir, path, mut v) = layer(&[7u8; 5000]);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        v.write(3000, &data).unwrap();
        v.write(20_000, b"tail").unwrap();
        let mut expected = vec![7u8; 3000];
        expected.extend_from_slice(&data);
        expected.resize(20_000, 0);
        expected.extend_from_slice(b"tail");
        assert_eq!(v.read(0, 1 << 20).unwrap(), expected);
        assert_eq!(v.read(2990, 20).unwrap(), expected[2990..3010]);
        v.flush(false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn truncate_then_grow_reads_zeros_not_old_bytes() {
        let (_dir, path, mut v) = layer(&[9u8; 9000]);
        v.truncate(100);
        assert_eq!(v.read(0, 1 << 20).unwrap(), vec![9u8; 100]);
        v.write(8000, b"x").unwrap();
        let mut expected = vec![9u8; 100];
        expected.resize(8000, 0);
        expected.push(b'x');
        assert_eq!(v.read(0, 1 << 20).unwrap(), expected);
        assert_eq!(std::fs::read(&path).unwrap(), vec![9u8; 9000]);
        v.flush(false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn lost_pages_stay_readable_but_are_never_written() {
        let (_dir, path, mut v) = layer(b"old");
        v.write(0, b"new data").unwrap();
        v.lose();
        assert_eq!(v.read(0, 100).unwrap(), b"new data");
        v.flush(false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(v.read(0, 100).unwrap(), b"new data");
        v.write(0, b"NEW").unwrap();
        v.flush(false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"NEW data");
    }
}
