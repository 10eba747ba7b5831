//! Network partitions: iptables DROP rules inside the node namespaces.
//!
//! A partition is a *grudge*: for each node, the set of nodes whose packets it drops
//! (`iptables -A INPUT -s <peer> -j DROP` in its namespace, plus an OUTPUT rule for
//! connections through a delay proxy). Dropping at both ends cuts both directions, including
//! connections already established, and leaves the hub (clients, ledger) connected to every
//! node, as in Jepsen: clients see the cluster split, they are not cut off themselves.
//! Healing flushes the filter table of every node.
//!
//! Shapes: one node isolated; the leader isolated; the nodes split into a majority and a
//! minority; a *bridge* (two halves that cannot see each other, plus one node that sees
//! both, so two majorities overlap in it); a whole region cut off from the others.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::command::Cmd;
use crate::cluster::netns::Topology;
use crate::cluster::regions::Regions;
use crate::cluster::Cluster;
use idem_testkit::Rng;

/// For each node, the nodes it drops packets from.
pub type Grudge = BTreeMap<usize, BTreeSet<usize>>;

/// The shape of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One random node isolated from the rest.
    One,
    /// The leader isolated from the rest.
    Leader,
    /// A random majority and minority.
    Halves,
    /// Two halves that only meet in one bridge node.
    Bridge,
    /// One region cut off from the other regions.
    Region,
}

impl Shape {
    /// The name used in nemesis descriptions.
    pub fn name(self) -> &'static str {
        match self {
            Shape::One => "one",
            Shape::Leader => "leader",
            Shape::Halves => "majority-minority",
            Shape::Bridge => "bridge",
            Shape::Region => "region",
        }
    }

    /// The shapes that make sense for `nodes` nodes in `regions` regions.
    pub fn possible(nodes: usize, regions: usize) -> Vec<Shape> {
        let mut v = Vec::new();
        if nodes >= 2 {
            v.extend([Shape::One, Shape::Leader, Shape::Halves]);
        }
        if nodes >= 3 {
            v.push(Shape::Bridge);
        }
        if regions >= 2 {
            v.push(Shape::Region);
        }
        v
    }

    /// The components (groups of nodes that still see each other) of this shape, or the
    /// grudge directly for a bridge.
    pub fn grudge(
        self,
        rng: &mut Rng,
        nodes: &[usize],
        leader: Option<usize>,
        regions: &Regions,
    ) -> Grudge {
        let shuffled = rng.shuffled(nodes);
        let isolate = |n: usize| {
            let rest: Vec<usize> = nodes.iter().copied().filter(|&m| m != n).collect();
            complete_grudge(&[vec![n], rest])
        };
        match self {
            Shape::One => isolate(shuffled[0]),
            Shape::Leader => isolate(leader.filter(|l| nodes.contains(l)).unwrap_or(shuffled[0])),
            Shape::Halves => {
                let minority = nodes.len() / 2;
                complete_grudge(&[shuffled[..minority].to_vec(), shuffled[minority..].to_vec()])
            }
            Shape::Bridge => bridge_grudge(&shuffled),
            Shape::Region => region_grudge(regions, nodes, rng.index(regions.count())),
        }
    }
}

/// `region` (0-based) cut off from the other regions: its nodes among `nodes` on one side,
/// every other node on the other.
pub fn region_grudge(regions: &Regions, nodes: &[usize], region: usize) -> Grudge {
    let (inside, outside): (Vec<usize>, Vec<usize>) = nodes
        .iter()
        .copied()
        .partition(|&n| regions.region_of(n) == region);
    complete_grudge(&[inside, outside])
}

/// Each node drops every node outside its own component.
pub fn complete_grudge(components: &[Vec<usize>]) -> Grudge {
    let mut grudge = Grudge::new();
    for (i, component) in components.iter().enumerate() {
        let others: BTreeSet<usize> = components
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, c)| c.iter().copied())
            .collect();
        for &n in component {
            grudge.insert(n, others.clone());
        }
    }
    grudge
}

/// `nodes` split in two halves around the middle node, which both halves still see.
pub fn bridge_grudge(nodes: &[usize]) -> Grudge {
    let mid = nodes.len() / 2;
    let (left, right) = (&nodes[..mid], &nodes[mid + 1..]);
    let mut grudge = complete_grudge(&[left.to_vec(), right.to_vec()]);
    grudge.insert(nodes[mid], BTreeSet::new());
    grudge
}

/// `n1 n2 | n3` style description: who cannot hear whom.
pub fn describe(grudge: &Grudge) -> String {
    grudge
        .iter()
        .filter(|(_, dropped)| !dropped.is_empty())
        .map(|(n, dropped)| {
            let d: Vec<String> = dropped.iter().map(|m| format!("n{m}")).collect();
            format!("n{n} x {}", d.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The iptables commands (each to run in the node's namespace) that impose `grudge`: drop
/// what arrives from a cut-off peer, and what leaves for it through a delay proxy (whose
/// packets carry the proxy's address, but whose connection's original destination is the
/// peer, see [`crate::cluster::delay`]).
pub fn commands(topology: &Topology, grudge: &Grudge) -> Vec<(usize, Cmd)> {
    let mut cmds = Vec::new();
    for (&node, dropped) in grudge {
        for &peer in dropped {
            let ip = topology.node_ip(peer).to_string();
            let input = ["iptables", "-w", "-A", "INPUT", "-s", &ip, "-j", "DROP"];
            let output = [
                "iptables",
                "-w",
                "-A",
                "OUTPUT",
                "-m",
                "conntrack",
                "--ctorigdst",
                &ip,
                "-j",
                "DROP",
            ];
            cmds.push((node, Cmd::new(input)));
            cmds.push((node, Cmd::new(output)));
        }
    }
    cmds
}

/// The command that heals a node (flushes its filter table; the nat table's delay rules
/// stay).
pub fn heal_command() -> Cmd {
    Cmd::new(["iptables", "-w", "-F"])
}

/// Imposes `grudge` on `cluster`'s nodes.
pub fn impose(cluster: &Cluster, grudge: &Grudge) -> anyhow::Result<()> {
    for (node, cmd) in commands(&cluster.topology, grudge) {
        cluster.in_node(node, cmd).run()?;
    }
    Ok(())
}

/// Heals every partition of `cluster` (flushes every node's filter table).
pub fn heal(cluster: &Cluster) -> anyhow::Result<()> {
    for id in cluster.ids() {
        cluster.in_node(id, heal_command()).run()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> BTreeSet<usize> {
        v.iter().copied().collect()
    }

    #[test]
    fn complete_grudges_cut_between_components_only() {
        let g = complete_grudge(&[vec![1, 2], vec![3]]);
        assert_eq!(g[&1], set(&[3]));
        assert_eq!(g[&2], set(&[3]));
        assert_eq!(g[&3], set(&[1, 2]));
    }

    #[test]
    fn bridge_node_sees_both_halves() {
        let g = bridge_grudge(&[1, 2, 3, 4, 5]);
        assert_eq!(g[&3], set(&[]));
        assert_eq!(g[&1], set(&[4, 5]));
        assert_eq!(g[&5], set(&[1, 2]));
    }

    #[test]
    fn shapes_isolate_what_they_say() {
        let regions = Regions::new(5, 3, &[]).unwrap();
        let nodes = [1, 2, 3, 4, 5];
        let mut rng = Rng::new(9);
        let g = Shape::Leader.grudge(&mut rng, &nodes, Some(4), &regions);
        assert_eq!(g[&4], set(&[1, 2, 3, 5]));
        let g = Shape::Halves.grudge(&mut rng, &nodes, None, &regions);
        let minority = g.values().filter(|d| d.len() == 3).count();
        assert_eq!(minority, 2);
        let g = region_grudge(&regions, &nodes, 1);
        assert_eq!(g[&2], set(&[1, 3, 4]));
        assert_eq!(g[&5], set(&[1, 3, 4]));
        assert_eq!(g[&3], set(&[2, 5]));
        let g = Shape::Region.grudge(&mut rng, &nodes, None, &regions);
        for (n, dropped) in &g {
            for m in dropped {
                assert_ne!(regions.region_of(*n), regions.region_of(*m));
            }
        }
        assert!(Shape::possible(1, 1).is_empty());
        assert_eq!(Shape::possible(3, 1).len(), 4);
    }

    #[test]
    fn iptables_rules_drop_on_input() {
        let t = Topology::new("x", 3);
        let g = complete_grudge(&[vec![1], vec![2, 3]]);
        let cmds: Vec<String> = commands(&t, &g)
            .iter()
            .map(|(n, c)| format!("n{n}: {c}"))
            .collect();
        assert_eq!(
            cmds,
            [
                "n1: iptables -w -A INPUT -s 10.77.0.2 -j DROP",
                "n1: iptables -w -A OUTPUT -m conntrack --ctorigdst 10.77.0.2 -j DROP",
                "n1: iptables -w -A INPUT -s 10.77.0.3 -j DROP",
                "n1: iptables -w -A OUTPUT -m conntrack --ctorigdst 10.77.0.3 -j DROP",
                "n2: iptables -w -A INPUT -s 10.77.0.1 -j DROP",
                "n2: iptables -w -A OUTPUT -m conntrack --ctorigdst 10.77.0.1 -j DROP",
                "n3: iptables -w -A INPUT -s 10.77.0.1 -j DROP",
                "n3: iptables -w -A OUTPUT -m conntrack --ctorigdst 10.77.0.1 -j DROP",
            ]
        );
        assert_eq!(heal_command().to_string(), "iptables -w -F");
        assert_eq!(describe(&g), "n1 x n2,n3; n2 x n1; n3 x n1");
    }
}
