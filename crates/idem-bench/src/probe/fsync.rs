//! Disk floor: append a block to a file and `fdatasync` it, as RocksDB syncs its WAL.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use super::Probe;
use crate::error::BenchError;
use crate::stats::latency_of;

/// Appends `size` bytes and syncs, `count` times, in a fresh file under `dir` (removed after).
pub fn fsync_probe(dir: &Path, count: usize, size: usize) -> Result<Probe, BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let path = dir.join(format!(".idem-bench-fsync-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(|e| BenchError::io(&path, e))?;
    let block = vec![0x5a_u8; size.max(1)];
    let mut samples = Vec::with_capacity(count);
    let result = (|| {
        for _ in 0..count {
            let t = Instant::now();
            file.write_all(&block)?;
            file.sync_data()?;
            samples.push(t.elapsed());
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    result.map_err(|e| BenchError::io(&path, e))?;
    Ok(Probe {
        name: "fsync".into(),
        what: format!("append {size} B + fdatasync in {}", dir.display()),
        latency: latency_of(samples),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_every_iteration() {
        let dir = tempfile::tempdir().unwrap();
        let probe = fsync_probe(dir.path(), 5, 512).unwrap();
        assert_eq!(probe.latency.count, 5);
        assert!(probe.line().starts_with("fsync p50="));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
