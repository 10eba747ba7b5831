//! A node's disk that can lose power: its data directory on an idem-faultfs mount.
//!
//! `kill -9` leaves the kernel's page cache alone, so a node that acknowledges before its
//! fsync passes every kill test. With `power-loss` in the nemesis, each node's data
//! directory (`nodes/nN/data`) is an idem-faultfs mount over `nodes/nN/disk`: written data
//! stays in the filesystem's memory until fsynced, and [`FaultDisk::power_loss`] drops
//! everything unsynced — after the node was killed, that is the crash of its machine. The
//! mount is strict about names too (`lose_unsynced_names`): a file or directory whose parent
//! was not fsynced after its creation disappears with the power, as POSIX allows.
//!
//! The harness serves the mounts from its own threads: it never opens the nodes' files
//! itself (a process that died with files open on a mount it serves would hang in its own
//! `close`). The mount goes away when this value is dropped, which [`super::Cluster`] does
//! after killing the nodes.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The report line that counts the unsynced bytes dropped so far.
const DROPPED: &str = "dropped-bytes";

/// A mounted faultfs holding one node's data directory.
pub struct FaultDisk {
    mount: Option<idem_faultfs::Mount>,
    mountpoint: PathBuf,
    backing: PathBuf,
}

impl std::fmt::Debug for FaultDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultDisk")
            .field("mountpoint", &self.mountpoint)
            .field("backing", &self.backing)
            .finish()
    }
}

impl FaultDisk {
    /// Mounts a strict faultfs over `backing` (created) on `mountpoint` (created).
    pub fn mount(backing: &Path, mountpoint: &Path) -> anyhow::Result<FaultDisk> {
        if !Path::new("/dev/fuse").exists() {
            anyhow::bail!(
                "the power-loss nemesis needs FUSE: /dev/fuse is absent (modprobe fuse; in a container, pass --device /dev/fuse)"
            );
        }
        for dir in [backing, mountpoint] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let options = idem_faultfs::Options {
            lose_unsynced_names: true,
            ..idem_faultfs::Options::default()
        };
        let mount = idem_faultfs::mount(backing, mountpoint, &options)
            .with_context(|| format!("mounting idem-faultfs on {}", mountpoint.display()))?;
        Ok(FaultDisk {
            mount: Some(mount),
            mountpoint: mountpoint.to_path_buf(),
            backing: backing.to_path_buf(),
        })
    }

    /// The power goes out: every write not yet fsynced is dropped (the node must have been
    /// killed first). Returns the bytes dropped by this call.
    pub fn power_loss(&self) -> anyhow::Result<u64> {
        let before = self.dropped_bytes()?;
        idem_faultfs::control(&self.mountpoint, "clear-cache")
            .with_context(|| format!("clear-cache on {}", self.mountpoint.display()))?;
        Ok(self.dropped_bytes()?.saturating_sub(before))
    }

    fn dropped_bytes(&self) -> anyhow::Result<u64> {
        let report = idem_faultfs::report(&self.mountpoint)
            .with_context(|| format!("reading the report of {}", self.mountpoint.display()))?;
        Ok(report_counter(&report, DROPPED).unwrap_or(0))
    }

    /// Unmounts (idempotent); the node must not be running.
    pub fn unmount(&mut self) {
        if let Some(mount) = self.mount.take() {
            if let Err(e) = mount.unmount() {
                eprintln!("unmounting {}: {e}", self.mountpoint.display());
            }
        }
    }
}

impl Drop for FaultDisk {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// One `name value` counter of a faultfs report.
pub fn report_counter(report: &str, name: &str) -> Option<u64> {
    report
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_counters_of_a_report() {
        let report = "fail-fsync off\ndirty-files 2\ndropped-bytes 4096\n";
        assert_eq!(report_counter(report, "dropped-bytes"), Some(4096));
        assert_eq!(report_counter(report, "dirty-files"), Some(2));
        assert_eq!(report_counter(report, "dropped"), None);
        assert_eq!(report_counter(report, "fail-fsync"), None);
    }
}
