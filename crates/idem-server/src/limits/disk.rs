//! The disk guard: writes are refused (`DISK_FULL`) while the data directory's filesystem
//! has less free space than the reserve (`limits.disk_reserve`).
//!
//! Why a guard in front of RocksDB rather than RocksDB's own out-of-space path: the
//! RocksDB a node links (Debian's 7.8 build, assertions on) aborts the process on a failed
//! WAL write (`sync_without_flush_called_`) instead of returning the error, so a node that
//! fills its disk would stop serving reads and replays too. The reserve is the room a node
//! keeps for what it cannot refuse: entries already proposed or sent by the leader, the
//! memtable flushes and compactions that free the WAL, a snapshot. CockroachDB's ballast
//! file and etcd's backend quota are the same idea.
//!
//! Only commands that add data are refused: claims and worker mutations. Reads, local
//! replays of finished keys, the expiry sweep and subject purges (they free space),
//! membership and administration go on. The leader checks its own disk for every write it
//! proposes (forwarded ones too), and the node a client called checks its own before
//! forwarding, so a client hears `DISK_FULL` from whichever is short. The free space is
//! sampled at most every [`SAMPLE_EVERY`] (a `statvfs`), so service resumes by itself
//! within that time once space is freed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::Command;
use idem_proto::reason;

use crate::backend::RequestError;
use crate::metrics::Metrics;

/// How long a sample of the free space is used before the next `statvfs`.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(200);
/// The retry hint sent with `DISK_FULL`.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The free space of a node's data directory against its reserve.
pub struct DiskGuard {
    /// The data directory (any path on the filesystem to watch).
    dir: PathBuf,
    /// Bytes that must stay free; 0 turns the guard off.
    reserve: u64,
    /// The last sample, in bytes available to this (unprivileged) process.
    free: AtomicU64,
    /// When it was taken, in milliseconds since `epoch` plus one (0: never).
    sampled_at: AtomicU64,
    epoch: Instant,
    metrics: Arc<Metrics>,
}

impl DiskGuard {
    /// A guard keeping `reserve` bytes free on the filesystem of `dir`.
    pub fn new(dir: PathBuf, reserve: u64, metrics: Arc<Metrics>) -> Self {
        metrics.disk_reserve_bytes.set(saturating(reserve));
        DiskGuard {
            dir,
            reserve,
            free: AtomicU64::new(u64::MAX),
            sampled_at: AtomicU64::new(0),
            epoch: Instant::now(),
            metrics,
        }
    }

    /// `DISK_FULL` if `command` adds data and the disk is below the reserve.
    pub fn admit(&self, command: &Command) -> Result<(), RequestError> {
        if !adds_data(command) || !self.is_full() {
            return Ok(());
        }
        self.metrics
            .limit_refusals
            .with_label_values(&[reason::DISK_FULL, command.name()])
            .inc();
        Err(RequestError::exhausted(
            reason::DISK_FULL,
            format!(
                "{}: the node's disk has {} bytes free, below its reserve of {} \
                 (limits.disk_reserve); writes resume once space is freed",
                command.name(),
                self.free.load(Ordering::Relaxed),
                self.reserve
            ),
            Some(RETRY_AFTER),
        ))
    }

    /// Whether the free space is below the reserve, from a sample at most
    /// [`SAMPLE_EVERY`] old.
    pub fn is_full(&self) -> bool {
        self.reserve > 0 && self.free_bytes() < self.reserve
    }

    /// Bytes free on the data directory's filesystem (a fresh enough sample).
    pub fn free_bytes(&self) -> u64 {
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        let last = self.sampled_at.load(Ordering::Acquire);
        let stale = last == 0 || now.saturating_sub(last) >= SAMPLE_EVERY.as_millis() as u64;
        // One caller refreshes; the others use the previous sample meanwhile.
        if stale
            && self
                .sampled_at
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.sample();
        }
        self.free.load(Ordering::Acquire)
    }

    /// The reserve, in bytes.
    pub fn reserve(&self) -> u64 {
        self.reserve
    }

    fn sample(&self) {
        match rustix::fs::statvfs(self.dir.as_path()) {
            Ok(stat) => {
                let free = stat.f_bavail.saturating_mul(stat.f_frsize);
                self.free.store(free, Ordering::Release);
                self.metrics.disk_free_bytes.set(saturating(free));
                self.metrics
                    .disk_full
                    .set(i64::from(self.reserve > 0 && free < self.reserve));
            }
            // Keep the previous sample: a failing statvfs says nothing about the space.
            Err(e) => tracing::warn!(dir = %self.dir.display(), error = %e, "statvfs failed"),
        }
    }
}

/// Whether the disk guard refuses `command` on a full disk: the commands clients send to
/// create or change records. The sweep's expiry and subject purges free space;
/// administration, membership and reconciliation must stay possible to repair the node.
fn adds_data(command: &Command) -> bool {
    command.tenant().is_some() && !matches!(command, Command::PurgeSubject(_))
}

fn saturating(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(reserve: u64) -> DiskGuard {
        let dir = std::env::temp_dir();
        DiskGuard::new(dir, reserve, Arc::new(Metrics::new()))
    }

    #[test]
    fn no_reserve_never_refuses_and_a_huge_one_always_does() {
        assert!(!guard(0).is_full());
        let full = guard(u64::MAX);
        assert!(full.is_full());
        assert!(full.free_bytes() > 0 && full.free_bytes() < u64::MAX);
        assert_eq!(full.metrics.disk_full.get(), 1);
    }
}
