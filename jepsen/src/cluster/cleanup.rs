//! Leaving the machine as it was: namespaces and the processes inside them.
//!
//! A test that dies must not leave five idemd processes and a bridge behind, and the next run
//! must not trip over them. Three layers:
//!
//! - [`NetnsGuard`] tears the namespaces down when dropped: on normal exit, on an error, and
//!   on a panic (unwinding). The runner drops it after a SIGINT/SIGTERM too.
//! - Teardown kills every process still inside each namespace (`ip netns pids`), whoever
//!   started it, except the harness itself (which lives in the hub namespace).
//! - At start, [`claim_prefix`] removes the leftovers of an earlier run with the same prefix
//!   whose owner process is gone (it was killed with SIGKILL, say), and refuses to touch a
//!   prefix whose owner is still alive. It also detaches the idem-faultfs mounts (nodes' data
//!   directories under the power-loss nemesis) whose serving process died with such a run:
//!   they answer every access with `ENOTCONN` and block `rm -rf` of the store. A mount whose
//!   server lives (another run's) answers, and is left alone.

use std::path::PathBuf;

use anyhow::bail;
use rustix::process::{kill_process, Pid, Signal};

use super::command::Cmd;
use super::netns::Topology;

/// Where the owner pid of each prefix is kept.
const OWNER_DIR: &str = "/run/idem-jepsen";

/// Deletes a set of namespaces (and kills what runs in them) when dropped.
#[derive(Debug)]
pub struct NetnsGuard {
    prefix: String,
    namespaces: Vec<String>,
    armed: bool,
}

impl NetnsGuard {
    /// A guard over `topology`'s namespaces.
    pub fn new(topology: &Topology) -> NetnsGuard {
        NetnsGuard {
            prefix: topology.prefix.clone(),
            namespaces: topology.all_ns(),
            armed: true,
        }
    }

    /// Tears down now (idempotent).
    pub fn teardown(&mut self) {
        if !self.armed {
            return;
        }
        for ns in &self.namespaces {
            teardown_ns(ns);
        }
        let _ = std::fs::remove_file(owner_file(&self.prefix));
        self.armed = false;
    }

    /// Keeps the namespaces after this guard is dropped (`cluster up`).
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Kills the processes in `ns` (except this one) and deletes it.
pub fn teardown_ns(ns: &str) {
    for pid in netns_pids(ns) {
        if pid != std::process::id() {
            if let Some(pid) = Pid::from_raw(pid as i32) {
                let _ = kill_process(pid, Signal::CONT);
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }
    Topology::delete_command(ns).run_quietly();
}

/// The pids of the processes inside `ns`.
pub fn netns_pids(ns: &str) -> Vec<u32> {
    Cmd::new(["ip", "netns", "pids", ns])
        .run()
        .map(|out| {
            out.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The namespaces that exist now whose name starts with `<prefix>-`.
pub fn existing_namespaces(prefix: &str) -> Vec<String> {
    let Ok(out) = Cmd::new(["ip", "netns", "list"]).run() else {
        return Vec::new();
    };
    let head = format!("{prefix}-");
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&head))
        .map(str::to_string)
        .collect()
}

fn owner_file(prefix: &str) -> PathBuf {
    PathBuf::from(OWNER_DIR).join(format!("{prefix}.pid"))
}

fn alive(pid: u32) -> bool {
    Pid::from_raw(pid as i32).is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// Makes this process the owner of `prefix`: refuses when a live process owns it, removes
/// the namespaces a dead owner left behind.
pub fn claim_prefix(prefix: &str) -> anyhow::Result<()> {
    let file = owner_file(prefix);
    if let Ok(text) = std::fs::read_to_string(&file) {
        if let Ok(pid) = text.trim().parse::<u32>() {
            if pid != std::process::id() && alive(pid) {
                bail!(
                    "prefix {prefix:?} is in use by running process {pid}; wait for it, or pass another --prefix"
                );
            }
        }
    }
    remove_leftovers(prefix);
    remove_dead_mounts();
    std::fs::create_dir_all(OWNER_DIR)?;
    std::fs::write(&file, format!("{}\n", std::process::id()))?;
    Ok(())
}

/// Tears down every namespace named `<prefix>-*`; returns how many there were.
pub fn remove_leftovers(prefix: &str) -> usize {
    let leftovers = existing_namespaces(prefix);
    for ns in &leftovers {
        eprintln!("cleanup: removing leftover namespace {ns}");
        teardown_ns(ns);
    }
    leftovers.len()
}

/// The file system type of idem-faultfs mounts in `/proc/self/mountinfo`.
const FAULTFS_TYPE: &str = "fuse.idem-faultfs";

/// Lazily unmounts every idem-faultfs mount whose server is gone; returns how many.
pub fn remove_dead_mounts() -> usize {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return 0;
    };
    let dead: Vec<String> = faultfs_mounts(&mountinfo)
        .into_iter()
        .filter(|mountpoint| {
            std::fs::metadata(mountpoint)
                .err()
                .and_then(|e| e.raw_os_error())
                == Some(rustix::io::Errno::NOTCONN.raw_os_error())
        })
        .collect();
    for mountpoint in &dead {
        eprintln!("cleanup: detaching the dead idem-faultfs mount {mountpoint}");
        Cmd::new(["umount", "-l", mountpoint.as_str()]).run_quietly();
    }
    dead.len()
}

/// The mount points of idem-faultfs mounts in a `mountinfo` text.
fn faultfs_mounts(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ...`
            let (head, tail) = line.split_once(" - ")?;
            let fstype = tail.split_whitespace().next()?;
            let mountpoint = head.split_whitespace().nth(4)?;
            (fstype == FAULTFS_TYPE).then(|| unescape(mountpoint))
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_faultfs_mount_points_are_read_with_escapes_undone() {
        let mountinfo = "\
22 1 0:21 / /proc rw,nosuid - proc proc rw
97 25 0:45 / /work/store/run\\0401/nodes/n1/data rw,nosuid shared:1 - fuse.idem-faultfs idem-faultfs rw,user_id=0
98 25 0:46 / /mnt/other rw - fuse.sshfs host:/ rw
";
        assert_eq!(
            faultfs_mounts(mountinfo),
            ["/work/store/run 1/nodes/n1/data"]
        );
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }
}
