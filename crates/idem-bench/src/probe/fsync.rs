//! Disk floor: write a block and `fdatasync` it, as RocksDB syncs its WAL.
//!
//! RocksDB preallocates its WAL files, so a WAL sync flushes data blocks without changing the
//! file size, which on ext4 and xfs avoids a journal commit per sync. The probe does the same
//! by default: it fills the file first, then overwrites it block by block, syncing each
//! block. `--append` measures the slower case of a file growing with every write.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use super::Probe;
use crate::error::BenchError;
use crate::stats::latency_of;

/// Writes `size` bytes and syncs, `count` times, in a fresh file under `dir` (removed after):
/// over a preallocated file, or appending when `append`.
pub fn fsync_probe(
    dir: &Path,
    count: usize,
    size: usize,
    append: bool,
) -> Result<Probe, BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let path = dir.join(format!(".idem-bench-fsync-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(|e| BenchError::io(&path, e))?;
    let block = vec![0x5a_u8; size.max(1)];
    let result = measure(&mut file, &block, count, append);
    let _ = std::fs::remove_file(&path);
    let samples = result.map_err(|e| BenchError::io(&path, e))?;
    let how = if append {
        "append"
    } else {
        "overwrite in a preallocated file"
    };
    Ok(Probe {
        name: "fsync".into(),
        what: format!("{how}: {} B + fdatasync in {}", block.len(), dir.display()),
        latency: latency_of(samples),
    })
}

fn measure(
    file: &mut File,
    block: &[u8],
    count: usize,
    append: bool,
) -> std::io::Result<Vec<std::time::Duration>> {
    if !append {
        for _ in 0..count {
            file.write_all(block)?;
        }
        file.sync_all()?;
    }
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let t = Instant::now();
        if append {
            file.write_all(block)?;
        } else {
            file.write_all_at(block, (i * block.len()) as u64)?;
        }
        file.sync_data()?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_every_iteration_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        for append in [false, true] {
            let probe = fsync_probe(dir.path(), 5, 512, append).unwrap();
            assert_eq!(probe.latency.count, 5);
            assert!(probe.line().starts_with("fsync p50="));
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
