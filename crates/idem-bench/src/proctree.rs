//! A server process together with all its descendants, read from `/proc` (`--node-tree`).
//!
//! PostgreSQL runs one process per connection, forked by the postmaster, plus helpers (WAL
//! writer, checkpointer, background writer, autovacuum workers), so the work of a claim is
//! spread over many processes, most of which live only as long as their connection: watching
//! the postmaster alone would miss nearly all of it. A tree is the root and every process
//! whose chain of parents leads to it, found by reading the parent id of every `/proc/*/stat`.
//!
//! CPU: the sum over the members of `utime + stime + cutime + cstime`. The last two are the
//! CPU of a member's children that exited and were waited for, so a backend that exits during
//! a window moves its time into the postmaster's `cutime` and the tree's total never drops:
//! its difference over a window is what the whole server used in it. (A member that exits
//! while the scan is between its parent's line and its own is missed, or counted twice, in
//! that one reading; the benchmark opens and closes connections outside its windows.)
//!
//! Memory: shared memory (Postgres's shared buffers) is resident in every process that
//! touched it, so a sum of RSS would count it once per connection. The tree's resident set
//! is the sum of its members' PSS (`/proc/<pid>/smaps_rollup`: each shared page divided among
//! the processes that map it; RSS where that file cannot be read), its peak the largest
//! `VmHWM` of any member.

use std::collections::HashMap;

use crate::node::{self, stat_field, stat_tail};

/// A process and its descendants at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessTree {
    /// The members, the root first.
    pids: Vec<u32>,
    /// CPU ticks of the members and of their waited-for children, summed.
    ticks: u64,
}

/// Every live process but `root`, by parent: `(pid, ticks)` of its children.
type Children = HashMap<u32, Vec<(u32, u64)>>;

/// `(parent id, utime + stime + cutime + cstime)` of `pid`.
fn parent_and_ticks(pid: u32) -> Option<(u32, u64)> {
    let tail = stat_tail(pid)?;
    let parent = u32::try_from(stat_field(&tail, 4)?).ok()?;
    let ticks = (14..=17)
        .map(|n| stat_field(&tail, n))
        .sum::<Option<u64>>()?;
    Some((parent, ticks))
}

/// The children of every process on the machine.
fn children() -> Children {
    let mut children = Children::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return children;
    };
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if let Some((parent, ticks)) = parent_and_ticks(pid) {
            children.entry(parent).or_default().push((pid, ticks));
        }
    }
    children
}

/// The tree under `root` (whose own ticks are `root_ticks`) in `children`.
fn descend(root: u32, root_ticks: u64, mut children: Children) -> ProcessTree {
    let mut tree = ProcessTree {
        pids: vec![root],
        ticks: root_ticks,
    };
    let mut next = 0;
    while let Some(&pid) = tree.pids.get(next) {
        for (child, ticks) in children.remove(&pid).unwrap_or_default() {
            tree.pids.push(child);
            tree.ticks += ticks;
        }
        next += 1;
    }
    tree
}

/// The PSS of `pid` in KiB, from `/proc/<pid>/smaps_rollup`.
fn pss_kib(pid: u32) -> Option<f64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = rollup.lines().find(|l| l.starts_with("Pss:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

impl ProcessTree {
    /// The tree under `root` now; `None` once the root is gone.
    pub fn scan(root: u32) -> Option<ProcessTree> {
        let (_, root_ticks) = parent_and_ticks(root)?;
        let mut children = children();
        // A pid reused by a process the root's descendants started cannot loop the walk.
        for list in children.values_mut() {
            list.retain(|(pid, _)| *pid != root);
        }
        Some(descend(root, root_ticks, children))
    }

    /// CPU ticks (user + system) of the members and of their children that exited.
    pub fn cpu_ticks(&self) -> u64 {
        self.ticks
    }

    /// Context switches of every live thread of every member.
    pub fn ctx_switches(&self) -> u64 {
        self.pids
            .iter()
            .filter_map(|&p| node::ctx_switches(p))
            .sum()
    }

    /// `(sum of the members' PSS, largest VmHWM of a member)` in MiB; `None` when the root's
    /// memory cannot be read.
    pub fn memory_mib(&self) -> Option<(f64, f64)> {
        let (root_rss, root_peak) = node::memory_mib(self.pids[0])?;
        let mut pss = pss_kib(self.pids[0]).map_or(root_rss, |k| k / 1024.0);
        let mut peak = root_peak;
        for &pid in &self.pids[1..] {
            if let Some((rss, hwm)) = node::memory_mib(pid) {
                pss += pss_kib(pid).map_or(rss, |k| k / 1024.0);
                peak = peak.max(hwm);
            }
        }
        Some((pss, peak))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use rustix::process::{kill_process, Pid, Signal};

    #[test]
    fn descends_through_grandchildren_only() {
        let children: Children = [
            (1, vec![(2, 10), (3, 20)]),
            (2, vec![(4, 40)]),
            (9, vec![(5, 1000)]),
        ]
        .into();
        let tree = descend(1, 5, children);
        assert_eq!(tree.pids, [1, 2, 3, 4]);
        assert_eq!(tree.cpu_ticks(), 5 + 10 + 20 + 40);
    }

    /// Polls `check` every 20 ms for up to 30 s (the machine may be busy).
    fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn comm(pid: u32) -> String {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default()
    }

    #[test]
    fn sums_live_descendants_and_keeps_the_cpu_of_exited_ones() {
        // A shell whose child burns CPU for a while and exits (the shell waits for it, so its
        // CPU moves into the shell's cutime), then a sleeping child.
        let script = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done & wait; exec sleep 60";
        let mut root = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = root.id();
        let mut alive = 0;
        wait_for("the busy child's CPU", || {
            let tree = ProcessTree::scan(pid).unwrap();
            alive = tree.cpu_ticks();
            tree.pids.len() == 2 && alive > node::cpu_ticks(pid).unwrap() + 5
        });
        // `exec sleep` replaces the shell after the wait: the root is then `sleep`, with
        // the exited child's CPU in its cutime.
        wait_for("the busy child's exit", || comm(pid).trim() == "sleep");
        let tree = ProcessTree::scan(pid).unwrap();
        assert_eq!(tree.pids, [pid]);
        assert!(tree.cpu_ticks() >= alive, "{} < {alive}", tree.cpu_ticks());
        assert!(node::cpu_ticks(pid).unwrap() < alive);
        let (pss, peak) = tree.memory_mib().unwrap();
        assert!(pss > 0.0 && peak > 0.0);
        assert!(tree.ctx_switches() > 0);
        kill_process(Pid::from_raw(pid as i32).unwrap(), Signal::KILL).unwrap();
        root.wait().unwrap();
    }
}
