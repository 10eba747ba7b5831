//! Per-node clock skew through libfaketime.
//!
//! idem's leader stamps every command with its wall clock (`SystemTime::now()`), and lease
//! expiry is decided on those stamps: a leader whose clock runs ahead expires leases early,
//! one that runs behind keeps them too long. To test that, each node runs with libfaketime
//! preloaded and reads its offset from a per-node file (`FAKETIME_TIMESTAMP_FILE`), re-read
//! every second (`FAKETIME_CACHE_DURATION=1`), so the nemesis can move a running node's clock.
//! By default only the realtime clock is faked (`DONT_FAKE_MONOTONIC=1`): tokio's timers, Raft
//! election timeouts and heartbeats keep running on the true monotonic clock, as they would on
//! a host whose NTP is off. [`FakeClock::with_monotonic`] fakes `CLOCK_MONOTONIC` too (the
//! libfaketime 0.9.10 of Debian 12 does, for a running process, forwards and backwards): every
//! offset then moves both clocks together — timers fire early on a jump ahead and stall on a
//! jump back, and Rust's `Instant` goes backwards, which the kernel's monotonic clock never
//! does (std saturates such differences to zero).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Where Debian and others install the multi-threaded libfaketime.
const LIBRARY_CANDIDATES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
];

/// The installed libfaketime (multi-threaded variant), if any.
pub fn find_library() -> Option<PathBuf> {
    LIBRARY_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The fake clock of one node: a file holding its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeClock {
    library: PathBuf,
    file: PathBuf,
    monotonic: bool,
}

impl FakeClock {
    /// A clock controlled through `file` (created with offset 0).
    pub fn create(library: &Path, file: &Path) -> anyhow::Result<FakeClock> {
        let clock = FakeClock {
            library: library.to_path_buf(),
            file: file.to_path_buf(),
            monotonic: false,
        };
        clock.set_offset_ms(0)?;
        Ok(clock)
    }

    /// The same clock moving `CLOCK_MONOTONIC` with the realtime clock when `monotonic`.
    pub fn with_monotonic(mut self, monotonic: bool) -> FakeClock {
        self.monotonic = monotonic;
        self
    }

    /// The environment that makes a process use this clock.
    pub fn env(&self) -> Vec<(String, String)> {
        // libfaketime 0.9.10 reads DONT_FAKE_MONOTONIC; later releases
        // FAKETIME_DONT_FAKE_MONOTONIC.
        let dont = if self.monotonic { "0" } else { "1" };
        vec![
            (
                "LD_PRELOAD".into(),
                self.library.to_string_lossy().into_owned(),
            ),
            (
                "FAKETIME_TIMESTAMP_FILE".into(),
                self.file.to_string_lossy().into_owned(),
            ),
            ("FAKETIME_CACHE_DURATION".into(), "1".into()),
            ("DONT_FAKE_MONOTONIC".into(), dont.into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), dont.into()),
        ]
    }

    /// Moves the node's realtime clock `ms` milliseconds away from the true time.
    pub fn set_offset_ms(&self, ms: i64) -> anyhow::Result<()> {
        std::fs::write(&self.file, offset_spec(ms))
            .with_context(|| format!("writing {}", self.file.display()))
    }
}

/// libfaketime's relative offset syntax: `+1.500s`, `-2.000s`.
pub fn offset_spec(ms: i64) -> String {
    let sign = if ms < 0 { '-' } else { '+' };
    let abs = ms.unsigned_abs();
    format!("{sign}{}.{:03}s\n", abs / 1000, abs % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_in_faketime_syntax() {
        assert_eq!(offset_spec(0), "+0.000s\n");
        assert_eq!(offset_spec(1500), "+1.500s\n");
        assert_eq!(offset_spec(-20_007), "-20.007s\n");
    }

    #[test]
    fn skew_moves_system_time_of_a_child_process() {
        let Some(lib) = find_library() else {
            eprintln!("libfaketime not installed; skipped");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let clock = FakeClock::create(&lib, &dir.path().join("clock")).unwrap();
        clock.set_offset_ms(-3_600_000).unwrap();
        let mut cmd = std::process::Command::new("date");
        cmd.arg("+%s").envs(clock.env());
        let faked: i64 = String::from_utf8(cmd.output().unwrap().stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((now - faked - 3600).abs() < 5, "now {now}, faked {faked}");
    }

    #[test]
    fn a_monotonic_clock_moves_only_when_asked() {
        let Some(lib) = find_library() else {
            eprintln!("libfaketime not installed; skipped");
            return;
        };
        if std::process::Command::new("python3")
            .arg("-V")
            .output()
            .is_err()
        {
            eprintln!("python3 not installed; skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // /proc/uptime is not faked: the true monotonic clock, near enough.
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let monotonic_of = |clock: &FakeClock| -> f64 {
            let mut cmd = std::process::Command::new("python3");
            cmd.args(["-c", "import time; print(time.monotonic())"])
                .envs(clock.env());
            let out = cmd.output().unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        let realtime = FakeClock::create(&lib, &dir.path().join("a")).unwrap();
        realtime.set_offset_ms(-3_600_000).unwrap();
        assert!((monotonic_of(&realtime) - uptime).abs() < 60.0);
        let both = FakeClock::create(&lib, &dir.path().join("b"))
            .unwrap()
            .with_monotonic(true);
        let before = monotonic_of(&both);
        both.set_offset_ms(3_600_000).unwrap();
        let after = monotonic_of(&both);
        assert!(
            (after - before - 3600.0).abs() < 60.0,
            "{before} -> {after}"
        );
    }
}
