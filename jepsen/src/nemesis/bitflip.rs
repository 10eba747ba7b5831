//! Bit flips: silent corruption of a stopped node's files (Jepsen's etcd `bitflip-wal` and
//! `bitflip-snap`).
//!
//! A disk that returns wrong bytes without an I/O error is rare but real (firmware bugs,
//! misdirected writes, memory errors on the way down). The promise is that a node never
//! *serves* corrupt data: it refuses to start, naming the damaged file, or it rebuilds from a
//! peer. The nemesis stops one node (one at a time: a kind never overlaps itself), flips a
//! few bits in one of its files with [`idem_faultfs::bitflip`] — seeded, and the file, offsets
//! and seed are written into the history — and restarts it at heal. The node is killed
//! (SIGKILL), except for a flip planned in a table: RocksDB writes tables when it flushes
//! its memtables (128 MiB of them), which a run of minutes never fills, so the node is
//! stopped cleanly instead (SIGTERM; idemd flushes its state as it closes, as after an
//! operator's restart) and the flip lands in a table it just wrote. A node that exits
//! within [`START_GRACE`] refused its data: the harness then does what an operator does
//! (docs/operations.md, "Shrinking" and "Growing"): removes the member, wipes its data
//! directory, starts it empty with `--join`, adds it back as a learner (it receives the state
//! by snapshot) and promotes it. Either way the checkers judge what clients saw.
//!
//! The files, under the data directory (`idem-store`'s layout): RocksDB's write-ahead log
//! (`db/*.log`, which holds the Raft log's newest entries and every state change not yet
//! flushed), its tables (`db/*.sst`, the flushed Raft log, metadata and records), its
//! `MANIFEST-*`, and the node's Raft snapshot (`snapshots/*`). The Raft log has no files of
//! its own: it is the `raft_log` column family, in the WAL and the tables.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::membership::Membership;
use crate::cluster::Cluster;
use idem_testkit::Rng;

/// How long a restarted node must stay up to count as started: RocksDB and the snapshot
/// store check their files when the node opens them, within the first second or two.
pub const START_GRACE: Duration = Duration::from_secs(6);

/// The most bits flipped in one file.
const MAX_FLIPS: u64 = 4;

/// How long a node stopped with SIGTERM has to flush and exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// The kind of file corrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// RocksDB's write-ahead log (`db/*.log`).
    Wal,
    /// A RocksDB table (`db/*.sst`).
    Sst,
    /// RocksDB's manifest (`db/MANIFEST-*`).
    Manifest,
    /// The Raft snapshot (`snapshots/*`, not the partial ones).
    Snapshot,
}

impl FileKind {
    /// Every kind.
    pub const ALL: [FileKind; 4] = [
        FileKind::Wal,
        FileKind::Sst,
        FileKind::Manifest,
        FileKind::Snapshot,
    ];

    /// The name used in nemesis descriptions.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Wal => "wal",
            FileKind::Sst => "sst",
            FileKind::Manifest => "manifest",
            FileKind::Snapshot => "snapshot",
        }
    }

    /// Whether `relative` (a path under the data directory) is a file of this kind.
    pub fn matches(self, relative: &Path) -> bool {
        let mut parts = relative.iter().map(|p| p.to_string_lossy());
        let (Some(dir), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        match self {
            FileKind::Wal => dir == "db" && name.ends_with(".log") && name != "LOG",
            FileKind::Sst => dir == "db" && name.ends_with(".sst"),
            FileKind::Manifest => dir == "db" && name.starts_with("MANIFEST-"),
            FileKind::Snapshot => dir == "snapshots",
        }
    }
}

/// What was damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The node.
    pub node: usize,
    /// The file, relative to the data directory.
    pub file: PathBuf,
    /// Its kind.
    pub kind: FileKind,
    /// The flipped bits (byte offset, bit).
    pub flips: Vec<(u64, u8)>,
    /// The seed given to `idem-faultfs bitflip`.
    pub seed: u64,
    /// How the node was stopped first.
    pub halt: Halt,
}

/// How a node is stopped before its files are damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// SIGKILL: its state since RocksDB's last flush lives only in the WAL and the Raft log.
    Killed,
    /// SIGTERM: it shut down cleanly, flushing its memtables into tables.
    Stopped,
}

impl Halt {
    /// The halt that leaves files of `kind` behind: a clean stop for tables, else a kill.
    pub fn for_kind(kind: FileKind) -> Halt {
        match kind {
            FileKind::Sst => Halt::Stopped,
            FileKind::Wal | FileKind::Manifest | FileKind::Snapshot => Halt::Killed,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Halt::Killed => "killed",
            Halt::Stopped => "stopped cleanly",
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flips: Vec<String> = self
            .flips
            .iter()
            .map(|(offset, bit)| format!("{offset}.{bit}"))
            .collect();
        write!(
            f,
            "n{} {}, {} ({}): {} bit(s) flipped at byte.bit {} (idem-faultfs bitflip --count {} --seed {})",
            self.node,
            self.halt.name(),
            self.file.display(),
            self.kind.name(),
            self.flips.len(),
            flips.join(" "),
            self.flips.len(),
            self.seed
        )
    }
}

/// The non-empty files of `kind` under `data`, sorted.
pub fn files_of(data: &Path, kind: FileKind) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in ["db", "snapshots"] {
        let Ok(entries) = std::fs::read_dir(data.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let relative = Path::new(dir).join(entry.file_name());
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            let non_empty = entry.metadata().is_ok_and(|m| m.len() > 0);
            if is_file && non_empty && kind.matches(&relative) {
                found.push(relative);
            }
        }
    }
    found.sort();
    found
}

/// Picks a file of `kind` (or, when the node has none yet — no snapshot, nothing flushed —
/// of the next kind that has one) and how to damage it.
pub fn choose(rng: &mut Rng, data: &Path, kind: FileKind) -> Option<(PathBuf, FileKind)> {
    let start = FileKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    (0..FileKind::ALL.len())
        .map(|i| FileKind::ALL[(start + i) % FileKind::ALL.len()])
        .find_map(|k| {
            let files = files_of(data, k);
            (!files.is_empty()).then(|| (files[rng.index(files.len())].clone(), k))
        })
}

/// Stops `node` as [`Halt::for_kind`] says and flips bits in one of its files of `kind`.
pub fn corrupt(
    cluster: &Cluster,
    node: usize,
    kind: FileKind,
    rng: &mut Rng,
) -> anyhow::Result<Damage> {
    let halt = Halt::for_kind(kind);
    match halt {
        Halt::Killed => cluster.node(node).kill()?,
        Halt::Stopped => cluster.node(node).stop(STOP_GRACE),
    }
    let data = data_dir(cluster, node);
    let (file, kind) = choose(rng, &data, kind)
        .with_context(|| format!("no file to damage under {}", data.display()))?;
    let count = rng.between(1, MAX_FLIPS) as usize;
    let seed = rng.next_u64();
    let flips = idem_faultfs::bitflip(&data.join(&file), count, seed)?;
    Ok(Damage {
        node,
        file,
        kind,
        flips: flips.iter().map(|f| (f.offset, f.bit)).collect(),
        seed,
        halt,
    })
}

/// How a damaged node came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// It started on its damaged data and stayed up.
    Started,
    /// It refused to start (its last log line); it was replaced by an empty member.
    Replaced(String),
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recovery::Started => write!(f, "started on the damaged data"),
            Recovery::Replaced(why) => write!(
                f,
                "refused to start ({why}); removed, data wiped, rejoined empty and promoted"
            ),
        }
    }
}

/// Restarts `node`; if it exits within [`START_GRACE`], replaces it with an empty member.
/// A replacement an earlier call left half done (the node wiped and started empty, but no
/// live peer to add it back: every other node paused, say) is finished instead: such a node
/// stays up, waiting to be added, and must not pass for one that started on its data.
pub fn restart_or_replace(
    cluster: &Cluster,
    membership: &Membership,
    node: usize,
) -> anyhow::Result<Recovery> {
    let pending = cluster.node(node).replacing().map(str::to_owned);
    if let Some(why) = pending {
        rejoin(cluster, membership, node)?;
        return Ok(Recovery::Replaced(why));
    }
    cluster.node(node).start()?;
    let deadline = Instant::now() + START_GRACE;
    while Instant::now() < deadline {
        if !cluster.node(node).is_running() {
            let why = last_log_line(cluster.node(node).log_path());
            replace(cluster, membership, node, &why)?;
            return Ok(Recovery::Replaced(why));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Recovery::Started)
}

/// The operator's replacement of a node whose data is lost: out of the group, an empty data
/// directory, back in as a learner that catches up, promoted.
fn replace(
    cluster: &Cluster,
    membership: &Membership,
    node: usize,
    why: &str,
) -> anyhow::Result<()> {
    membership.remove(cluster, node)?;
    wipe(&data_dir(cluster, node))?;
    {
        let mut process = cluster.node(node);
        process.set_join(true);
        process.set_replacing(Some(why.to_owned()));
    }
    rejoin(cluster, membership, node)
}

/// The last steps of a replacement: the wiped node runs (with `--join`) and is added back.
fn rejoin(cluster: &Cluster, membership: &Membership, node: usize) -> anyhow::Result<()> {
    cluster.node(node).start()?;
    membership.add(cluster, node)?;
    cluster.node(node).set_replacing(None);
    Ok(())
}

/// Removes everything inside `dir` (which may be a mount point, kept).
fn wipe(dir: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

fn data_dir(cluster: &Cluster, node: usize) -> PathBuf {
    cluster.node_dir(node).join("data")
}

/// The last error line of a node's log (else its last line), without colours, at most 300
/// characters; a placeholder when the log is empty.
fn last_log_line(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<String> = text
        .lines()
        .map(strip_colours)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let is_error = |l: &&String| {
        ["ERROR", "error:", "panicked"]
            .iter()
            .any(|m| l.contains(m))
    };
    match lines.iter().rev().find(is_error).or(lines.last()) {
        Some(l) => l.trim().chars().take(300).collect(),
        None => "no log output".into(),
    }
}

/// `line` without ANSI colour sequences (`ESC [ ... m`).
fn strip_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_their_files_only() {
        let kinds = |p: &str| -> Vec<&str> {
            FileKind::ALL
                .iter()
                .filter(|k| k.matches(Path::new(p)))
                .map(|k| k.name())
                .collect()
        };
        assert_eq!(kinds("db/000012.log"), ["wal"]);
        assert_eq!(kinds("db/000013.sst"), ["sst"]);
        assert_eq!(kinds("db/MANIFEST-000005"), ["manifest"]);
        assert_eq!(kinds("snapshots/current"), ["snapshot"]);
        assert!(kinds("db/LOG").is_empty());
        assert!(kinds("db/OPTIONS-000007").is_empty());
        assert!(kinds("snapshots/partial/x").is_empty());
        assert!(kinds("node.toml").is_empty());
    }

    #[test]
    fn chooses_a_file_of_the_kind_or_of_the_next_kind_present() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        std::fs::create_dir_all(data.join("db")).unwrap();
        std::fs::write(data.join("db/000004.log"), b"wal").unwrap();
        std::fs::write(data.join("db/000009.sst"), b"table").unwrap();
        std::fs::write(data.join("db/000010.sst"), b"").unwrap();
        std::fs::write(data.join("db/LOG"), b"rocksdb's own log").unwrap();
        let mut rng = Rng::new(1);
        assert_eq!(
            choose(&mut rng, data, FileKind::Sst),
            Some(("db/000009.sst".into(), FileKind::Sst)),
            "the empty table is skipped"
        );
        // No snapshot and no manifest yet: the search wraps round to the WAL.
        assert_eq!(
            choose(&mut rng, data, FileKind::Manifest),
            Some(("db/000004.log".into(), FileKind::Wal))
        );
        assert_eq!(choose(&mut rng, &data.join("absent"), FileKind::Wal), None);
    }

    #[test]
    fn only_a_flip_in_a_table_stops_the_node_cleanly() {
        let halts: Vec<Halt> = FileKind::ALL.iter().map(|k| Halt::for_kind(*k)).collect();
        assert_eq!(
            halts,
            [Halt::Killed, Halt::Stopped, Halt::Killed, Halt::Killed]
        );
    }

    #[test]
    fn damage_names_the_file_the_bits_and_the_seed() {
        let damage = Damage {
            node: 2,
            file: "db/000012.log".into(),
            kind: FileKind::Wal,
            flips: vec![(17, 3), (4096, 0)],
            seed: 99,
            halt: Halt::Killed,
        };
        assert_eq!(
            damage.to_string(),
            "n2 killed, db/000012.log (wal): 2 bit(s) flipped at byte.bit 17.3 4096.0 (idem-faultfs bitflip --count 2 --seed 99)"
        );
    }

    #[test]
    fn wipe_empties_a_directory_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("db/sub")).unwrap();
        std::fs::write(dir.path().join("node.toml"), b"x").unwrap();
        wipe(dir.path()).unwrap();
        assert!(dir.path().is_dir());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(last_log_line(&dir.path().join("absent")), "no log output");
        let log = dir.path().join("idemd.log");
        std::fs::write(
            &log,
            "\u{1b}[2mt\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m corrupt file db/000004.log\nINFO shutting down\n\n",
        )
        .unwrap();
        assert_eq!(last_log_line(&log), "t ERROR corrupt file db/000004.log");
    }
}
