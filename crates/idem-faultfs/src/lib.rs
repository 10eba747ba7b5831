//! idem-faultfs: a FUSE filesystem for disk-fault tests, after lazyfs.
//!
//! `kill -9` keeps the page cache, so a node that forgets an fsync passes every crash test
//! on a real disk. Mounted over a backing directory, this filesystem keeps each file's
//! written data in memory until the file is fsynced (readers see it at once), and on the
//! `clear-cache` command drops everything unsynced: kill the program, clear, restart, and
//! the program finds exactly what it made durable. It can also make fsync fail with `EIO`
//! and writes fail with `ENOSPC` or `EIO`, for the "stop serving after a failed fsync" and
//! "disk full" tests. In strict mode ([`Options::lose_unsynced_names`]) the power loss also
//! undoes creates, renames and removals whose directory was not fsynced after them.
//!
//! Control: write commands to the file [`CONTROL_FILE`] at the root of the mount (one per
//! line, see [`Command`]); read it for a report. [`control`] does both. The binary
//! `idem-faultfs` mounts (`mount`), sends commands (`ctl`), and flips bits in files for the
//! corruption tests (`bitflip`, see [`bitflip`]). docs/guarantees.md says what each fault
//! means and what idem promises under it.

mod bitflip;
mod error;
mod faults;
mod fs;
mod inodes;
mod namespace;
mod volatile;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub use bitflip::{bitflip, Flip};
pub use error::FaultfsError;
pub use faults::{Command, WriteFault};

/// The control file's name, at the root of the mount (not listed by `readdir`).
pub const CONTROL_FILE: &str = ".idem-faultfs";

/// How to mount.
#[derive(Clone, Debug)]
pub struct Options {
    /// Also fdatasync the backing file on each successful fsync (off: the simulated power
    /// loss is the only one this filesystem protects against, and tests run faster).
    pub sync_backing: bool,
    /// FUSE request threads.
    pub threads: usize,
    /// Strict namespace durability: a create, mkdir, symlink, rename, unlink or rmdir
    /// survives a power loss only if its directory was fsynced after it (POSIX's rule).
    /// Off: namespace operations are durable when they return.
    pub lose_unsynced_names: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync_backing: false,
            threads: 4,
            lose_unsynced_names: false,
        }
    }
}

/// A mounted faultfs served by background threads; dropping it unmounts.
pub struct Mount {
    /// The FUSE session.
    session: fuser::BackgroundSession,
    /// Where it is mounted.
    mountpoint: PathBuf,
}

impl Mount {
    /// Where the filesystem is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Runs one control command and returns the report that follows it.
    pub fn control(&self, command: &str) -> Result<String, FaultfsError> {
        control(&self.mountpoint, command)
    }

    /// Unmounts and waits for the request threads to finish.
    pub fn unmount(self) -> Result<(), FaultfsError> {
        let mountpoint = self.mountpoint;
        self.session
            .umount_and_join()
            .map_err(FaultfsError::io("unmount", &mountpoint))
    }
}

/// Mounts a faultfs of `backing` on `mountpoint` and serves it from background threads.
pub fn mount(backing: &Path, mountpoint: &Path, options: &Options) -> Result<Mount, FaultfsError> {
    let fs = filesystem(backing, options)?;
    let session = fuser::spawn_mount(fs, mountpoint, &config(options, false))
        .map_err(FaultfsError::io("mount", mountpoint))?;
    Ok(Mount {
        session,
        mountpoint: mountpoint.to_owned(),
    })
}

/// Mounts a faultfs of `backing` on `mountpoint` and serves it until it is unmounted
/// (`fusermount3 -u`); the mount also goes away when the process dies.
pub fn serve(backing: &Path, mountpoint: &Path, options: &Options) -> Result<(), FaultfsError> {
    let fs = filesystem(backing, options)?;
    fuser::mount(fs, mountpoint, &config(options, true))
        .map_err(FaultfsError::io("serve", mountpoint))
}

/// Sends `command` to the faultfs mounted on `mountpoint` and returns its report.
pub fn control(mountpoint: &Path, command: &str) -> Result<String, FaultfsError> {
    let path = mountpoint.join(CONTROL_FILE);
    command.parse::<Command>()?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(FaultfsError::io("open", &path))?;
    file.write_all(format!("{command}\n").as_bytes())
        .map_err(FaultfsError::io("control command to", &path))?;
    report(mountpoint)
}

/// The report of the faultfs mounted on `mountpoint`.
pub fn report(mountpoint: &Path) -> Result<String, FaultfsError> {
    let path = mountpoint.join(CONTROL_FILE);
    let mut report = String::new();
    std::fs::File::open(&path)
        .and_then(|mut file| file.read_to_string(&mut report))
        .map_err(FaultfsError::io("read", &path))?;
    Ok(report)
}

/// The session configuration: any user may use the mount (nodes may run as another user)
/// and the kernel checks permissions. With `auto_unmount` (the daemon), the mount dies with
/// the process; that goes through a `fusermount3` helper that lives as long as the mount,
/// which in-process mounts (tests) do without: they unmount on drop.
fn config(options: &Options, auto_unmount: bool) -> fuser::Config {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("idem-faultfs".into()),
        fuser::MountOption::Subtype("idem-faultfs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    if auto_unmount {
        config.mount_options.push(fuser::MountOption::AutoUnmount);
    }
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(options.threads.max(1));
    config
}

/// The filesystem over `backing`.
fn filesystem(backing: &Path, options: &Options) -> Result<fs::FaultFs, FaultfsError> {
    let root = absolute(backing)?;
    fs::FaultFs::new(
        root.clone(),
        options.sync_backing,
        options.lose_unsynced_names,
    )
    .map_err(FaultfsError::io("prepare the trash directory in", &root))
}

/// `path` made absolute (the daemon must not depend on its working directory).
fn absolute(path: &Path) -> Result<PathBuf, FaultfsError> {
    std::fs::canonicalize(path).map_err(FaultfsError::io("backing directory", path))
}
