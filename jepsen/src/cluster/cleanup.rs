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
//!   prefix whose owner is still alive.

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
