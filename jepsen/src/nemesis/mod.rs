//! Nemeses: the faults injected while the workload runs.
//!
//! Every fault kind has its own file with the pure part (which nodes, which commands: unit
//! tested) and the part that acts on a [`crate::cluster::Cluster`]:
//!
//! - [`partition`]: iptables DROP rules inside node namespaces — one node, the leader,
//!   majority/minority halves, a bridge (two halves that both see one node), a whole region;
//! - [`kill`]: SIGKILL one node, a minority, a majority, every node or the leader, restart
//!   them at heal;
//! - [`power_loss`]: SIGKILL one node, a majority or every node, then drop every write their
//!   disks (idem-faultfs mounts) had not fsynced; restart them at heal;
//! - [`pause`]: SIGSTOP one node, the leader, a majority or every node, SIGCONT at heal;
//! - [`clock`]: move nodes' realtime clocks through libfaketime — fixed skews, one large
//!   bump, or a strobe flipping back and forth — reset at heal;
//! - [`membership`]: remove a node from the Raft group and add it back (through idemctl);
//! - [`bitflip`]: kill one node, flip bits in one of its files (WAL, table, manifest,
//!   snapshot), restart it at heal, and replace it with an empty member if it refuses its data;
//! - [`schedule`]: the seeded plan (every interval one fault, healed 2–6 s later);
//! - [`driver`]: runs the plan against the cluster and records every step in the history.
//!
//! Faults of different kinds may overlap (a kill during a partition); a kind never overlaps
//! itself, so each heal undoes exactly one fault.

pub mod bitflip;
pub mod clock;
pub mod driver;
pub mod kill;
pub mod membership;
pub mod partition;
pub mod pause;
pub mod power_loss;
pub mod schedule;

use std::fmt;

use anyhow::bail;

use idem_testkit::Rng;

pub use driver::Nemesis;
pub use schedule::{Planned, Schedule};

/// A family of faults, as named on the command line (`--nemesis partition,kill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Network partitions.
    Partition,
    /// kill -9 and restart.
    Kill,
    /// SIGSTOP / SIGCONT.
    Pause,
    /// Clock skew.
    Clock,
    /// Remove a node from the group and add it back.
    Membership,
    /// kill -9 and loss of every unsynced write, then restart.
    PowerLoss,
    /// Bits flipped in a stopped node's file, then restart (or replacement).
    Bitflip,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 7] = [
        Kind::Partition,
        Kind::Kill,
        Kind::Pause,
        Kind::Clock,
        Kind::Membership,
        Kind::PowerLoss,
        Kind::Bitflip,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Partition => "partition",
            Kind::Kill => "kill",
            Kind::Pause => "pause",
            Kind::Clock => "clock",
            Kind::Membership => "membership",
            Kind::PowerLoss => "power-loss",
            Kind::Bitflip => "bitflip",
        }
    }

    /// Parses `partition,kill,...` (`none` or empty: no nemesis; `all`: every kind).
    pub fn parse_list(text: &str) -> anyhow::Result<Vec<Kind>> {
        let mut kinds = Vec::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "none" => {}
                "all" => kinds.extend(Kind::ALL),
                _ => match Kind::ALL.iter().find(|k| k.name() == word) {
                    Some(k) => kinds.push(*k),
                    None => bail!(
                        "unknown nemesis {word:?}; expected partition, kill, pause, clock, membership, power-loss, bitflip, all or none"
                    ),
                },
            }
        }
        kinds.sort();
        kinds.dedup();
        Ok(kinds)
    }
}

/// Which nodes a process fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// One random node.
    One,
    /// A random minority (at least one node).
    Minority,
    /// The current leader (a random node when none is known).
    Leader,
    /// A random majority of the live nodes: the group loses its quorum.
    Majority,
    /// Every live node.
    All,
}

impl Target {
    /// The name used in nemesis descriptions.
    pub fn name(self) -> &'static str {
        match self {
            Target::One => "one",
            Target::Minority => "minority",
            Target::Leader => "leader",
            Target::Majority => "majority",
            Target::All => "all",
        }
    }

    /// Picks the nodes among `live` (`leader` when known).
    pub fn pick(self, rng: &mut Rng, live: &[usize], leader: Option<usize>) -> Vec<usize> {
        if live.is_empty() {
            return Vec::new();
        }
        let shuffled = rng.shuffled(live);
        match self {
            Target::Leader => match leader.filter(|l| live.contains(l)) {
                Some(l) => vec![l],
                None => vec![shuffled[0]],
            },
            Target::One => vec![shuffled[0]],
            Target::Minority => first_sorted(shuffled, (live.len() - 1) / 2),
            Target::Majority => first_sorted(shuffled, live.len() / 2 + 1),
            Target::All => first_sorted(shuffled, live.len()),
        }
    }
}

/// The first `n` (at least one) of `shuffled`, sorted.
fn first_sorted(shuffled: Vec<usize>, n: usize) -> Vec<usize> {
    let mut v = shuffled[..n.clamp(1, shuffled.len())].to_vec();
    v.sort();
    v
}

/// How the clock nemesis moves clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockMode {
    /// A random subset of nodes, each moved by its own offset of up to the maximum skew.
    Skew,
    /// One node's clock jumps by one to six times the maximum skew, ahead or behind (a
    /// minute ahead with the default 10 s: past every lease).
    Bump,
    /// A random subset of nodes whose clocks flip between ahead and behind every second.
    Strobe,
}

impl ClockMode {
    /// Every mode.
    pub const ALL: [ClockMode; 3] = [ClockMode::Skew, ClockMode::Bump, ClockMode::Strobe];

    /// The name used in nemesis descriptions.
    pub fn name(self) -> &'static str {
        match self {
            ClockMode::Skew => "skew",
            ClockMode::Bump => "bump",
            ClockMode::Strobe => "strobe",
        }
    }
}

/// One fault, with the choices made when the schedule was drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A network partition of the given shape.
    Partition(partition::Shape),
    /// kill -9 of the target nodes, restarted at heal.
    Kill(Target),
    /// SIGSTOP of the target nodes, SIGCONT at heal.
    Pause(Target),
    /// Realtime clocks of some nodes moved (see [`ClockMode`]).
    Clock {
        /// How.
        mode: ClockMode,
        /// Largest skew, in milliseconds.
        max_skew_ms: u64,
    },
    /// The target node removed from the group, added back at heal.
    Membership(Target),
    /// kill -9 of the target nodes and loss of their unsynced writes, restarted at heal.
    PowerLoss(Target),
    /// One node killed and a file of this kind damaged, restarted (or replaced) at heal.
    Bitflip(bitflip::FileKind),
}

impl Fault {
    /// The kind of this fault.
    pub fn kind(&self) -> Kind {
        match self {
            Fault::Partition(_) => Kind::Partition,
            Fault::Kill(_) => Kind::Kill,
            Fault::Pause(_) => Kind::Pause,
            Fault::Clock { .. } => Kind::Clock,
            Fault::Membership(_) => Kind::Membership,
            Fault::PowerLoss(_) => Kind::PowerLoss,
            Fault::Bitflip(_) => Kind::Bitflip,
        }
    }

    /// A random fault of `kind` that makes sense for `nodes` nodes in `regions` regions; `None`
    /// when none does (a partition of a single node).
    pub fn random(
        kind: Kind,
        rng: &mut Rng,
        nodes: usize,
        regions: usize,
        max_skew_ms: u64,
    ) -> Option<Fault> {
        let choose = |rng: &mut Rng, options: &[Target]| options[rng.index(options.len())];
        match kind {
            Kind::Partition => {
                let shapes = partition::Shape::possible(nodes, regions);
                (!shapes.is_empty()).then(|| Fault::Partition(shapes[rng.index(shapes.len())]))
            }
            Kind::Kill => Some(Fault::Kill(choose(
                rng,
                &[
                    Target::One,
                    Target::Minority,
                    Target::Leader,
                    Target::Majority,
                    Target::All,
                ],
            ))),
            Kind::Pause => Some(Fault::Pause(choose(
                rng,
                &[Target::One, Target::Leader, Target::Majority, Target::All],
            ))),
            Kind::Clock => Some(Fault::Clock {
                mode: ClockMode::ALL[rng.index(ClockMode::ALL.len())],
                max_skew_ms,
            }),
            Kind::Membership => {
                (nodes >= 3).then(|| Fault::Membership(choose(rng, &[Target::One, Target::Leader])))
            }
            Kind::PowerLoss => Some(Fault::PowerLoss(choose(
                rng,
                &[Target::One, Target::Majority, Target::All],
            ))),
            // A node must be able to rebuild from its peers: never with a single node.
            Kind::Bitflip => (nodes >= 3).then(|| {
                let kinds = bitflip::FileKind::ALL;
                Fault::Bitflip(kinds[rng.index(kinds.len())])
            }),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Partition(shape) => write!(f, "partition {}", shape.name()),
            Fault::Kill(t) => write!(f, "kill {}", t.name()),
            Fault::Pause(t) => write!(f, "pause {}", t.name()),
            Fault::Clock { mode, max_skew_ms } => {
                write!(f, "clock {} ±{max_skew_ms}ms", mode.name())
            }
            Fault::Membership(t) => write!(f, "membership {}", t.name()),
            Fault::PowerLoss(t) => write!(f, "power-loss {}", t.name()),
            Fault::Bitflip(kind) => write!(f, "bitflip {}", kind.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kind_lists() {
        assert_eq!(
            Kind::parse_list("kill, partition,kill").unwrap(),
            [Kind::Partition, Kind::Kill]
        );
        assert_eq!(Kind::parse_list("none").unwrap(), []);
        assert_eq!(Kind::parse_list("all").unwrap().len(), 7);
        assert_eq!(
            Kind::parse_list("bitflip,kill").unwrap(),
            [Kind::Kill, Kind::Bitflip]
        );
        assert_eq!(
            Kind::parse_list("power-loss,clock,pause").unwrap(),
            [Kind::Pause, Kind::Clock, Kind::PowerLoss]
        );
        assert!(Kind::parse_list("flood").is_err());
    }

    #[test]
    fn targets_pick_from_live_nodes() {
        let mut rng = Rng::new(3);
        assert_eq!(Target::Leader.pick(&mut rng, &[1, 2, 3], Some(2)), [2]);
        assert_eq!(
            Target::Minority
                .pick(&mut rng, &[1, 2, 3, 4, 5], None)
                .len(),
            2
        );
        assert_eq!(Target::Minority.pick(&mut rng, &[1, 2, 3], None).len(), 1);
        assert_eq!(Target::One.pick(&mut rng, &[4], None), [4]);
        assert_eq!(Target::Majority.pick(&mut rng, &[1, 2, 3], None).len(), 2);
        assert_eq!(
            Target::Majority
                .pick(&mut rng, &[1, 2, 3, 4, 5], None)
                .len(),
            3
        );
        assert_eq!(Target::All.pick(&mut rng, &[3, 1, 2], None), [1, 2, 3]);
        assert_eq!(Target::Majority.pick(&mut rng, &[2], None), [2]);
        assert!(Target::One.pick(&mut rng, &[], None).is_empty());
    }
}
