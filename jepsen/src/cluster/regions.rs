//! Regions: which node is where, and the round-trip time between regions.
//!
//! idem is built for several regions (docs/design.md §3); a test on one machine emulates them by
//! delaying packets between nodes of different regions with `tc netem` on each node's veth.
//! Each node's egress gets an HTB root whose default class is undelayed (same region, the
//! hub) and one class per other region with a netem child adding half the region pair's RTT;
//! u32 filters pick the class by destination address. Both directions add half, so a round
//! trip between regions costs the configured RTT.
//!
//! HTB rather than `prio` because some kernels (this project's CI VM among them) build HTB but
//! not `prio`. Kernels without netem (`CONFIG_NET_SCH_NETEM`) get the same delays, between
//! nodes, from user-space proxies on the hub ([`super::delay`]).

use std::time::Duration;

use anyhow::{bail, ensure};

use super::command::Cmd;
use super::netns::Topology;

/// Placement of nodes into regions and the RTT of each region pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions {
    /// Region index (0-based) of node id `i` at position `i - 1`.
    placement: Vec<usize>,
    /// Number of regions.
    count: usize,
    /// RTT between regions `a` and `b` at `rtt[a][b]` (zero on the diagonal).
    rtt: Vec<Vec<Duration>>,
}

impl Regions {
    /// One region holding every node, no delay.
    pub fn single(nodes: usize) -> Regions {
        Regions {
            placement: vec![0; nodes],
            count: 1,
            rtt: vec![vec![Duration::ZERO]],
        }
    }

    /// `count` regions, nodes placed round-robin (n1 → r1, n2 → r2, ...). `rtts` is empty (no
    /// delay), one value for every pair, or one per pair in the order (r1,r2), (r1,r3), ...,
    /// (r2,r3), ...
    pub fn new(nodes: usize, count: usize, rtts: &[Duration]) -> anyhow::Result<Regions> {
        ensure!(count >= 1, "--regions must be at least 1");
        ensure!(
            count <= nodes,
            "--regions {count} is more than --nodes {nodes}"
        );
        let pairs = count * (count - 1) / 2;
        let value = |k: usize| match rtts.len() {
            0 => Ok(Duration::ZERO),
            1 => Ok(rtts[0]),
            n if n == pairs => Ok(rtts[k]),
            n => bail!("--rtt has {n} values; {count} regions need 1 or {pairs} (one per pair)"),
        };
        let mut rtt = vec![vec![Duration::ZERO; count]; count];
        let pair_list: Vec<(usize, usize)> = (0..count)
            .flat_map(|a| (a + 1..count).map(move |b| (a, b)))
            .collect();
        for (k, &(a, b)) in pair_list.iter().enumerate() {
            let d = value(k)?;
            rtt[a][b] = d;
            rtt[b][a] = d;
        }
        Ok(Regions {
            placement: (0..nodes).map(|i| i % count).collect(),
            count,
            rtt,
        })
    }

    /// Number of regions.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Region index (0-based) of node `id`.
    pub fn region_of(&self, id: usize) -> usize {
        self.placement[id - 1]
    }

    /// The name of region `region` (0-based): `r1`, `r2`, ...
    pub fn name(region: usize) -> String {
        format!("r{}", region + 1)
    }

    /// Region name of node `id` (`r1`, ...).
    pub fn region_name(&self, id: usize) -> String {
        Regions::name(self.region_of(id))
    }

    /// Zone name of node `id`: its region plus a letter per node within the region.
    pub fn zone_name(&self, id: usize) -> String {
        let region = self.region_of(id);
        let rank = (1..id).filter(|&j| self.region_of(j) == region).count();
        format!("{}-{}", self.region_name(id), (b'a' + rank as u8) as char)
    }

    /// Node ids in region `region` (0-based).
    pub fn nodes_in(&self, region: usize) -> Vec<usize> {
        (1..=self.placement.len())
            .filter(|&id| self.region_of(id) == region)
            .collect()
    }

    /// RTT between regions `a` and `b`.
    pub fn rtt(&self, a: usize, b: usize) -> Duration {
        self.rtt[a][b]
    }

    /// The largest RTT between two regions.
    pub fn max_rtt(&self) -> Duration {
        self.rtt.iter().flatten().copied().max().unwrap_or_default()
    }

    /// True when some pair of regions has a delay.
    pub fn has_delay(&self) -> bool {
        self.rtt.iter().flatten().any(|d| !d.is_zero())
    }

    /// The `tc` commands (run inside node `id`'s namespace) that delay its traffic to other
    /// regions by half the pair's RTT. Empty when nothing is delayed for this node.
    pub fn netem_commands(&self, topology: &Topology, id: usize) -> Vec<Cmd> {
        let mine = self.region_of(id);
        let delayed: Vec<usize> = (0..self.count)
            .filter(|&r| r != mine && !self.rtt(mine, r).is_zero())
            .collect();
        if delayed.is_empty() {
            return Vec::new();
        }
        let tc = |args: &[&str]| {
            let mut argv = vec!["tc"];
            argv.extend_from_slice(args);
            Cmd::new(argv)
        };
        let mut cmds = vec![
            tc(&[
                "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1",
            ]),
            tc(&[
                "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate",
                "10gbit",
            ]),
        ];
        for region in delayed {
            let class = format!("1:{}", 10 + region);
            let handle = format!("{}:", 10 + region);
            let half = self.rtt(mine, region) / 2;
            let delay = format!("{}us", half.as_micros());
            cmds.push(tc(&[
                "class", "add", "dev", "eth0", "parent", "1:", "classid", &class, "htb", "rate",
                "10gbit",
            ]));
            cmds.push(tc(&[
                "qdisc", "add", "dev", "eth0", "parent", &class, "handle", &handle, "netem",
                "delay", &delay,
            ]));
            for peer in self.nodes_in(region) {
                let dst = format!("{}/32", topology.node_ip(peer));
                cmds.push(tc(&[
                    "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
                    "u32", "match", "ip", "dst", &dst, "flowid", &class,
                ]));
            }
        }
        cmds
    }
}

/// Parses `20ms,40ms,60ms` into durations.
pub fn parse_rtts(text: &str) -> anyhow::Result<Vec<Duration>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| humantime::parse_duration(s).map_err(|e| anyhow::anyhow!("--rtt {s:?}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn round_robin_placement_and_zones() {
        let r = Regions::new(5, 3, &[ms(20), ms(40), ms(60)]).unwrap();
        let names: Vec<String> = (1..=5).map(|i| r.zone_name(i)).collect();
        assert_eq!(names, ["r1-a", "r2-a", "r3-a", "r1-b", "r2-b"]);
        assert_eq!(r.nodes_in(0), [1, 4]);
        assert_eq!(r.rtt(0, 1), ms(20));
        assert_eq!(r.rtt(2, 0), ms(40));
        assert_eq!(r.rtt(1, 2), ms(60));
        assert!(Regions::new(3, 3, &[ms(1), ms(2)]).is_err());
        assert!(Regions::new(2, 3, &[]).is_err());
        assert!(!Regions::single(3).has_delay());
    }

    #[test]
    fn netem_delays_half_the_rtt_per_destination_region() {
        let t = Topology::new("x", 3);
        let r = Regions::new(3, 3, &[ms(20), ms(40), ms(60)]).unwrap();
        let lines: Vec<String> = r.netem_commands(&t, 1).iter().map(Cmd::to_string).collect();
        assert_eq!(
            lines[0],
            "tc qdisc add dev eth0 root handle 1: htb default 1"
        );
        assert!(lines.contains(
            &"tc qdisc add dev eth0 parent 1:11 handle 11: netem delay 10000us".to_string()
        ));
        assert!(lines.contains(
            &"tc qdisc add dev eth0 parent 1:12 handle 12: netem delay 20000us".to_string()
        ));
        assert!(lines.contains(
            &"tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.3/32 flowid 1:12"
                .to_string()
        ));
        assert!(Regions::new(3, 1, &[])
            .unwrap()
            .netem_commands(&t, 1)
            .is_empty());
    }

    #[test]
    fn parses_rtt_lists() {
        assert_eq!(
            parse_rtts("20ms, 40ms,60ms").unwrap(),
            [ms(20), ms(40), ms(60)]
        );
        assert!(parse_rtts("fast").is_err());
    }
}
