//! The faults a test switches on, the control commands that switch them, and the counters
//! the report shows.
//!
//! Commands arrive as text written to the control file (`.idem-faultfs` at the root of the
//! mount), one per line, so a nemesis needs nothing but `echo`: see [`Command`] for the
//! grammar. Reading the control file returns the report ([`Stats`] and the switches).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use crate::error::FaultfsError;

/// What `write` (and size-growing calls) answer while a write fault is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteFault {
    /// Writes succeed.
    Off,
    /// Writes fail with `ENOSPC` (a full disk).
    Enospc,
    /// Writes fail with `EIO` (a failing disk).
    Eio,
}

impl WriteFault {
    /// The control-file spelling.
    fn name(self) -> &'static str {
        match self {
            WriteFault::Off => "off",
            WriteFault::Enospc => "enospc",
            WriteFault::Eio => "eio",
        }
    }
}

/// One control command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `clear-cache`: drop every unsynced write (the power loss).
    ClearCache,
    /// `checkpoint`: persist every unsynced write, as if each file were fsynced.
    Checkpoint,
    /// `fail-fsync on|off`: fsync and fdatasync (of files and directories) fail with `EIO`.
    FailFsync(bool),
    /// `fail-write enospc|eio|off`: writes, growing truncates and fallocate fail.
    FailWrite(WriteFault),
}

impl FromStr for Command {
    type Err = FaultfsError;

    fn from_str(line: &str) -> Result<Self, Self::Err> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let command = match words.as_slice() {
            ["clear-cache"] => Command::ClearCache,
            ["checkpoint"] => Command::Checkpoint,
            ["fail-fsync", "on"] => Command::FailFsync(true),
            ["fail-fsync", "off"] => Command::FailFsync(false),
            ["fail-write", "enospc"] => Command::FailWrite(WriteFault::Enospc),
            ["fail-write", "eio"] => Command::FailWrite(WriteFault::Eio),
            ["fail-write", "off"] => Command::FailWrite(WriteFault::Off),
            _ => return Err(FaultfsError::UnknownCommand(line.trim().to_owned())),
        };
        Ok(command)
    }
}

/// The switches, shared by every request thread.
#[derive(Default)]
pub(crate) struct Switches {
    /// fsync fails.
    fail_fsync: AtomicBool,
    /// 0 off, 1 ENOSPC, 2 EIO.
    fail_write: AtomicU8,
}

impl Switches {
    /// Whether fsync fails.
    pub(crate) fn fail_fsync(&self) -> bool {
        self.fail_fsync.load(Ordering::SeqCst)
    }

    /// The write fault in force.
    pub(crate) fn fail_write(&self) -> WriteFault {
        match self.fail_write.load(Ordering::SeqCst) {
            1 => WriteFault::Enospc,
            2 => WriteFault::Eio,
            _ => WriteFault::Off,
        }
    }

    /// Sets the fsync fault.
    pub(crate) fn set_fail_fsync(&self, on: bool) {
        self.fail_fsync.store(on, Ordering::SeqCst);
    }

    /// Sets the write fault.
    pub(crate) fn set_fail_write(&self, fault: WriteFault) {
        let code = match fault {
            WriteFault::Off => 0,
            WriteFault::Enospc => 1,
            WriteFault::Eio => 2,
        };
        self.fail_write.store(code, Ordering::SeqCst);
    }
}

/// Counters since the mount.
#[derive(Default)]
pub(crate) struct Stats {
    /// Successful fsyncs of files.
    pub(crate) fsyncs: AtomicU64,
    /// Successful fsyncs of directories.
    pub(crate) dir_fsyncs: AtomicU64,
    /// fsyncs (files and directories) failed on purpose.
    pub(crate) failed_fsyncs: AtomicU64,
    /// Writes (and fallocates, growing truncates) failed on purpose.
    pub(crate) failed_writes: AtomicU64,
    /// `clear-cache` commands run.
    pub(crate) clears: AtomicU64,
    /// Cached bytes (whole pages) that clears dropped.
    pub(crate) dropped_bytes: AtomicU64,
}

impl Stats {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The report the control file reads as: one `name value` per line.
pub(crate) struct Report<'a> {
    /// The switches.
    pub(crate) switches: &'a Switches,
    /// The counters.
    pub(crate) stats: &'a Stats,
    /// Files with unsynced data right now.
    pub(crate) dirty_files: u64,
    /// Their cached bytes.
    pub(crate) dirty_bytes: u64,
    /// Namespace operations waiting for a directory fsync (strict mode), or `None`.
    pub(crate) unsynced_names: Option<usize>,
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let s = self.stats;
        let fsync = if self.switches.fail_fsync() {
            "on"
        } else {
            "off"
        };
        writeln!(f, "fail-fsync {fsync}")?;
        writeln!(f, "fail-write {}", self.switches.fail_write().name())?;
        writeln!(f, "dirty-files {}", self.dirty_files)?;
        writeln!(f, "dirty-bytes {}", self.dirty_bytes)?;
        match self.unsynced_names {
            Some(names) => writeln!(f, "unsynced-names {names}")?,
            None => writeln!(f, "unsynced-names off")?,
        }
        writeln!(f, "fsyncs {}", load(&s.fsyncs))?;
        writeln!(f, "dir-fsyncs {}", load(&s.dir_fsyncs))?;
        writeln!(f, "failed-fsyncs {}", load(&s.failed_fsyncs))?;
        writeln!(f, "failed-writes {}", load(&s.failed_writes))?;
        writeln!(f, "clears {}", load(&s.clears))?;
        writeln!(f, "dropped-bytes {}", load(&s.dropped_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_garbage_is_refused() {
        assert_eq!(
            "clear-cache\n".parse::<Command>().unwrap(),
            Command::ClearCache
        );
        assert_eq!(
            " fail-fsync  on ".parse::<Command>().unwrap(),
            Command::FailFsync(true)
        );
        assert_eq!(
            "fail-write enospc".parse::<Command>().unwrap(),
            Command::FailWrite(WriteFault::Enospc)
        );
        for bad in ["", "fail-fsync", "fail-write full", "clear-cache now"] {
            assert!(bad.parse::<Command>().is_err(), "{bad:?}");
        }
    }
}
