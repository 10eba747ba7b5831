//! What a node occupies on its host: bytes on disk, bytes of snapshots, resident memory.
//!
//! Sampled when `/metrics` is scraped, never on the request path: an operator's alert on a
//! filling disk or a growing snapshot needs the number every scrape interval, not every
//! request. The walk covers the whole data directory (RocksDB files, each group's Raft log
//! and snapshots) so the number matches what `du` reports for the volume an operator sized;
//! snapshot bytes are the files under any `snapshots/` directory except transfers still in
//! `partial/`, i.e. the snapshots a lagging follower would be sent.

use std::fs;
use std::io;
use std::path::Path;

/// The directory every group keeps its snapshots in (see `idem_store`).
const SNAPSHOTS: &str = "snapshots";
/// Snapshots being built or received, not yet current.
const PARTIAL: &str = "partial";
/// How deep the walk goes: the data directory's layout is a few levels; a deeper tree is
/// not ours (a mount point inside the data directory) and is not counted.
const MAX_DEPTH: usize = 8;

/// One sample of a node's disk and memory use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of every regular file under the data directory.
    pub data_dir_bytes: u64,
    /// Bytes of the current snapshot files (every group's).
    pub snapshot_bytes: u64,
    /// Resident set size of this process; `None` where `/proc` is not available.
    pub resident_bytes: Option<u64>,
}

impl Usage {
    /// Measures `data_dir` and this process. Files that vanish during the walk (a
    /// compaction, a snapshot replaced) are skipped, not errors.
    pub fn sample(data_dir: &Path) -> Usage {
        let mut usage = Usage {
            resident_bytes: resident_bytes(),
            ..Usage::default()
        };
        usage.walk(data_dir, false, 0);
        usage
    }

    fn walk(&mut self, dir: &Path, in_snapshots: bool, depth: usize) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < MAX_DEPTH {
                let name = entry.file_name();
                let snapshots = if in_snapshots {
                    name != PARTIAL
                } else {
                    name == SNAPSHOTS
                };
                self.walk(&entry.path(), snapshots, depth + 1);
            } else if kind.is_file() {
                let bytes = entry.metadata().map_or(0, |m| m.len());
                self.data_dir_bytes += bytes;
                if in_snapshots {
                    self.snapshot_bytes += bytes;
                }
            }
        }
    }
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status).ok()
}

fn parse_vm_rss(status: &str) -> io::Result<u64> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_owned());
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| invalid("no VmRSS line"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .map_err(|_| invalid("VmRSS is not a number of kB"))?;
    Ok(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: usize) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, vec![7u8; bytes]).unwrap();
    }

    #[test]
    fn counts_every_file_and_current_snapshots_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("db/000012.sst"), 1000);
        write(&root.join("snapshots/snapshot-7"), 300);
        write(&root.join("snapshots/partial/incoming"), 50);
        write(&root.join("groups/2/db/000004.log"), 20);
        write(&root.join("groups/2/snapshots/snapshot-3"), 5);
        let usage = Usage::sample(root);
        assert_eq!(usage.data_dir_bytes, 1000 + 300 + 50 + 20 + 5);
        assert_eq!(usage.snapshot_bytes, 300 + 5);
    }

    #[test]
    fn a_missing_directory_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let usage = Usage::sample(&dir.path().join("absent"));
        assert_eq!((usage.data_dir_bytes, usage.snapshot_bytes), (0, 0));
    }

    #[test]
    fn resident_memory_is_read_from_proc_status() {
        let status = "Name:\tidemd\nVmPeak:\t  9000 kB\nVmRSS:\t  1234 kB\nThreads:\t4\n";
        assert_eq!(parse_vm_rss(status).unwrap(), 1234 * 1024);
        assert!(parse_vm_rss("Name:\tidemd\n").is_err());
        if cfg!(target_os = "linux") {
            assert!(resident_bytes().unwrap() > 0);
        }
    }
}
