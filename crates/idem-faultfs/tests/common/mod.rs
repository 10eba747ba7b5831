//! A faultfs mounted on a temporary directory, or a skip where FUSE is missing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use idem_faultfs::{Mount, Options};
use tempfile::TempDir;

/// A mounted faultfs and its directories (unmounted on drop, before the directories go).
pub struct Fixture {
    /// The mount; `None` only after `unmount`.
    pub mount: Option<Mount>,
    /// The backing directory.
    pub backing: PathBuf,
    /// Holds the backing and mount directories.
    _dir: TempDir,
}

impl Fixture {
    /// Mounts a faultfs over a fresh directory; `None` (after saying why) without /dev/fuse.
    pub fn new() -> Option<Fixture> {
        Fixture::with(&Options::default())
    }

    /// The same, in strict namespace mode (`lose_unsynced_names`).
    pub fn strict() -> Option<Fixture> {
        Fixture::with(&Options {
            lose_unsynced_names: true,
            ..Options::default()
        })
    }

    /// Mounts with `options`.
    pub fn with(options: &Options) -> Option<Fixture> {
        if !Path::new("/dev/fuse").exists() {
            eprintln!("skipped: /dev/fuse is absent (the faultfs tests need FUSE and root)");
            return None;
        }
        let dir = TempDir::new().unwrap();
        let backing = dir.path().join("backing");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&backing).unwrap();
        std::fs::create_dir(&mnt).unwrap();
        let mount = idem_faultfs::mount(&backing, &mnt, options).unwrap();
        Some(Fixture {
            mount: Some(mount),
            backing,
            _dir: dir,
        })
    }

    /// The mountpoint.
    pub fn mnt(&self) -> &Path {
        self.mount.as_ref().unwrap().mountpoint()
    }

    /// A path in the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt().join(rel)
    }

    /// Runs a control command, returning the report.
    pub fn control(&self, command: &str) -> String {
        self.mount.as_ref().unwrap().control(command).unwrap()
    }

    /// One counter of the report.
    pub fn counter(&self, name: &str) -> u64 {
        let report = idem_faultfs::report(self.mnt()).unwrap();
        report
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name} in {report}"))
            .parse()
            .unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(mount) = self.mount.take() {
            let unmounted = mount.unmount();
            if !std::thread::panicking() {
                unmounted.unwrap();
            }
        }
    }
}
