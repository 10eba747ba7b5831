//! CPU time and memory of the server processes, read from `/proc` around a measured run.
//!
//! Throughput alone hides efficiency: on a 2-core machine shared by three nodes and the load
//! generator, the store that burns less CPU per claim is the one that scales. Each node's
//! `utime + stime` (all threads, `/proc/<pid>/stat`) is read when the measurement window opens
//! and closes; its resident set (`VmRSS`) and peak (`VmHWM`) from `/proc/<pid>/status` at the end.
//! Its context switches (voluntary + involuntary, summed over the threads of
//! `/proc/<pid>/task`) are read around the same window: a task or thread hand-off costs a
//! switch when the receiver sleeps, so switches per operation count the hand-offs a write
//! pays (threads that exit within the window take their switches with them, which only
//! undercounts).
//!
//! A server with a process per connection (PostgreSQL) is watched as a tree (`--node-tree`):
//! the same figures summed over the process and all its descendants, see [`crate::proctree`].
//!
//! The whole machine's busy time (`/proc/stat`) and the load generator's own CPU are read over
//! the same window, so that a run disturbed by something else on the machine (another build, a
//! backup) says so in its results instead of silently moving the numbers.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::proctree::ProcessTree;

/// A server process to watch: `NAME=PID` on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// A label, e.g. `n1` or `etcd2`.
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// Watch the process with all its descendants (`--node-tree`).
    pub tree: bool,
}

impl NodeSpec {
    /// A `--node-tree` value: `NAME=PID`, watched with all its descendants.
    pub fn tree(s: &str) -> Result<NodeSpec, String> {
        Ok(NodeSpec {
            tree: true,
            ..s.parse()?
        })
    }
}

impl FromStr for NodeSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, pid) = s
            .split_once('=')
            .ok_or_else(|| format!("expected NAME=PID, got '{s}'"))?;
        let pid = pid
            .trim()
            .parse()
            .map_err(|e| format!("bad pid in '{s}': {e}"))?;
        Ok(NodeSpec {
            name: name.trim().to_owned(),
            pid,
            tree: false,
        })
    }
}

/// What one node used during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// The label.
    pub name: String,
    /// The process id.
    pub pid: u32,
    /// CPU time (user + system) in the measurement window, in milliseconds.
    pub cpu_ms: f64,
    /// That CPU time divided by the run's operations, in microseconds.
    pub cpu_us_per_op: f64,
    /// Resident set at the end, MiB.
    pub rss_mib: f64,
    /// Peak resident set since the process started, MiB.
    pub rss_peak_mib: f64,
    /// Context switches (voluntary + involuntary, all threads) in the window.
    #[serde(default)]
    pub ctx_switches: u64,
    /// Those switches divided by the run's operations.
    #[serde(default)]
    pub ctx_switches_per_op: f64,
}

/// `/proc/<pid>/stat` from its field 3 (the state) on; `None` once the process is gone. The
/// command name before it (field 2) may contain spaces: the line is cut after its last ')'.
pub fn stat_tail(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.get(stat.rfind(')')? + 2..)?.to_owned())
}

/// Field `n` of a [`stat_tail`], numbered as in proc(5) (4: parent id, 14: utime, ...).
pub fn stat_field(tail: &str, n: usize) -> Option<u64> {
    tail.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// CPU ticks (user + system, fields 14 and 15) of `pid` so far; `None` once it is gone.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let tail = stat_tail(pid)?;
    Some(stat_field(&tail, 14)? + stat_field(&tail, 15)?)
}

/// Context switches (voluntary + involuntary) of every live thread of `pid` so far; `None`
/// once it is gone.
pub fn ctx_switches(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let total = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok())
        .map(|status| switches_in(&status))
        .sum();
    Some(total)
}

/// `voluntary_ctxt_switches + nonvoluntary_ctxt_switches` of one `status` file.
fn switches_in(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches:")
                || l.starts_with("nonvoluntary_ctxt_switches:")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// `(VmRSS, VmHWM)` of `pid` in MiB.
pub fn memory_mib(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Milliseconds per clock tick of `/proc/<pid>/stat`.
fn ms_per_tick() -> f64 {
    1000.0 / rustix::param::clock_ticks_per_second() as f64
}

/// Where the CPU of the machine went during a run, in cores (1.0 = one core busy all along).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineUsage {
    /// Cores of the machine.
    pub cores: usize,
    /// Busy cores (everything but idle and iowait), all processes.
    pub busy: f64,
    /// The watched nodes together.
    pub nodes: f64,
    /// The load generator (this process).
    pub load_generator: f64,
    /// Interrupt and softirq time, attributed to no process (loopback TCP is processed there).
    #[serde(default)]
    pub irq: f64,
    /// Everything else: `busy - nodes - load_generator - irq`: other processes and kernel
    /// threads (including the file system's journal and writeback); high means a disturbed
    /// run.
    pub other: f64,
}

/// CPU counters when a measurement window opens.
#[derive(Debug, Clone)]
pub struct Window {
    opened: std::time::Instant,
    nodes: Vec<Option<Reading>>,
    machine: Option<Ticks>,
    own: Option<u64>,
}

/// The counters of one watched server at one moment (summed over its tree for a tree).
#[derive(Debug, Clone, Copy)]
struct Reading {
    ticks: u64,
    switches: Option<u64>,
}

/// Reads `node`'s counters; `None` once it is gone.
fn read(node: &NodeSpec) -> Option<Reading> {
    if node.tree {
        let tree = ProcessTree::scan(node.pid)?;
        Some(Reading {
            ticks: tree.cpu_ticks(),
            switches: Some(tree.ctx_switches()),
        })
    } else {
        Some(Reading {
            ticks: cpu_ticks(node.pid)?,
            switches: ctx_switches(node.pid),
        })
    }
}

/// `(resident, peak)` of `node` in MiB (a tree's: its PSS sum and largest peak).
fn memory(node: &NodeSpec) -> Option<(f64, f64)> {
    if node.tree {
        ProcessTree::scan(node.pid)?.memory_mib()
    } else {
        memory_mib(node.pid)
    }
}

/// Machine-wide CPU ticks of all cores.
#[derive(Debug, Clone, Copy)]
struct Ticks {
    busy: u64,
    irq: u64,
    total: u64,
}

/// Ticks of all cores from the first line of `/proc/stat`.
fn machine_ticks() -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let total: u64 = ticks.iter().take(8).sum();
    // Fields: user nice system idle iowait irq softirq steal.
    let idle = ticks.get(3)? + ticks.get(4)?;
    let irq = ticks.get(5)? + ticks.get(6)?;
    Some(Ticks {
        busy: total - idle,
        irq,
        total,
    })
}

/// Opens a window: the CPU ticks and context switches of every node, of the machine and of this process.
pub fn start(nodes: &[NodeSpec]) -> Window {
    Window {
        opened: std::time::Instant::now(),
        nodes: nodes.iter().map(read).collect(),
        machine: machine_ticks(),
        own: cpu_ticks(std::process::id()),
    }
}

/// Where the machine's CPU went since `window` opened (`node_ms`: the nodes' CPU, ms).
pub fn machine(window: &Window, node_ms: f64) -> MachineUsage {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let secs = window.opened.elapsed().as_secs_f64().max(1e-9);
    let (busy, irq) = match (window.machine, machine_ticks()) {
        (Some(a), Some(b)) if b.total > a.total => {
            let span = (b.total - a.total) as f64 / cores as f64;
            (
                b.busy.saturating_sub(a.busy) as f64 / span,
                b.irq.saturating_sub(a.irq) as f64 / span,
            )
        }
        _ => (0.0, 0.0),
    };
    let own = match (window.own, cpu_ticks(std::process::id())) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 * ms_per_tick() / 1000.0 / secs,
        _ => 0.0,
    };
    let nodes = node_ms / 1000.0 / secs;
    MachineUsage {
        cores,
        busy,
        nodes,
        load_generator: own,
        irq,
        other: (busy - nodes - own - irq).max(0.0),
    }
}

/// What every node used since `window` opened, for `ops` operations; nodes that vanished are
/// left out.
pub fn finish(nodes: &[NodeSpec], window: &Window, ops: u64) -> Vec<NodeUsage> {
    nodes
        .iter()
        .zip(&window.nodes)
        .filter_map(|(node, before)| {
            let before = (*before)?;
            let now = read(node)?;
            let ticks = now.ticks.checked_sub(before.ticks)?;
            let (rss_mib, rss_peak_mib) = memory(node)?;
            let cpu_ms = ticks as f64 * ms_per_tick();
            // Threads that exited take their switches along: never below zero.
            let switches = now
                .switches
                .zip(before.switches)
                .map_or(0, |(now, then)| now.saturating_sub(then));
            Some(NodeUsage {
                name: node.name.clone(),
                pid: node.pid,
                cpu_ms,
                cpu_us_per_op: per_op(cpu_ms * 1000.0, ops),
                rss_mib,
                rss_peak_mib,
                ctx_switches: switches,
                ctx_switches_per_op: per_op(switches as f64, ops),
            })
        })
        .collect()
}

/// `total / ops` (0 without operations).
fn per_op(total: f64, ops: u64) -> f64 {
    if ops == 0 {
        0.0
    } else {
        total / ops as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs_and_reads_this_process() {
        let spec: NodeSpec = "n1=42".parse().unwrap();
        assert_eq!(
            spec,
            NodeSpec {
                name: "n1".into(),
                pid: 42,
                tree: false,
            }
        );
        assert!("n1".parse::<NodeSpec>().is_err());
        assert!(NodeSpec::tree("pg=7").unwrap().tree);
        let tail = "S 1 2 3";
        assert_eq!((stat_field(tail, 4), stat_field(tail, 2)), (Some(1), None));
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        // This test's own thread has been scheduled at least once.
        assert!(ctx_switches(me).is_some_and(|n| n > 0));
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t5\n";
        assert_eq!(switches_in(status), 12);
        let (rss, peak) = memory_mib(me).unwrap();
        assert!(rss > 0.0 && peak >= rss);
        let nodes = vec![
            NodeSpec {
                name: "me".into(),
                pid: me,
                tree: false,
            },
            NodeSpec {
                name: "my tree".into(),
                pid: me,
                tree: true,
            },
        ];
        let window = start(&nodes);
        let usage = finish(&nodes, &window, 10);
        assert_eq!(usage.len(), 2);
        assert!(usage[0].cpu_us_per_op >= 0.0);
        assert!(usage[1].rss_mib > 0.0);
        let m = machine(&window, usage[0].cpu_ms);
        assert!(m.cores >= 1 && m.other >= 0.0);
    }
}
