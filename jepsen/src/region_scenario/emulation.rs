//! The emulated cluster as the report describes it: where the nodes are, the RTTs, how the
//! delay is produced, the Raft timings derived from the RTTs. Every figure depends on these.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cluster::regions::Regions;
use crate::cluster::{Cluster, ClusterSpec, DelayMode};

/// The emulation's description.
#[derive(Debug, Clone, Serialize)]
pub struct Emulation {
    /// Number of nodes.
    pub nodes: usize,
    /// Region name -> its nodes.
    pub regions: BTreeMap<String, Vec<usize>>,
    /// `ra-rb` -> RTT in ms.
    pub rtt_ms: BTreeMap<String, f64>,
    /// `netem`, `proxy` (delaying proxies on the hub: kernels without netem) or `none`.
    pub delay: String,
    /// Raft heartbeat interval, ms.
    pub heartbeat_ms: u128,
    /// Raft election timeout, ms.
    pub election_timeout_ms: u128,
    /// Nodes' write bound, ms.
    pub write_timeout_ms: u128,
    /// Namespace prefix.
    pub prefix: String,
}

impl Emulation {
    /// The description of `cluster`, built from `spec`.
    pub fn of(spec: &ClusterSpec, cluster: &Cluster) -> Emulation {
        let regions = &cluster.regions;
        let mut rtt_ms = BTreeMap::new();
        for a in 0..regions.count() {
            for b in a + 1..regions.count() {
                let name = format!("{}-{}", Regions::name(a), Regions::name(b));
                rtt_ms.insert(name, regions.rtt(a, b).as_secs_f64() * 1e3);
            }
        }
        Emulation {
            nodes: spec.nodes,
            regions: (0..regions.count())
                .map(|r| (Regions::name(r), regions.nodes_in(r)))
                .collect(),
            rtt_ms,
            delay: match cluster.delay_mode {
                DelayMode::None => "none",
                DelayMode::Netem => "netem",
                DelayMode::Proxy => "proxy",
            }
            .to_owned(),
            heartbeat_ms: spec.timings.heartbeat.as_millis(),
            election_timeout_ms: spec.timings.election.as_millis(),
            write_timeout_ms: spec.timings.write_timeout.as_millis(),
            prefix: spec.prefix.clone(),
        }
    }

    /// One line: `5 nodes: r1 n1 n4 | r2 n2 n5 | r3 n3; RTT r1-r2 20 ms, ... (proxy)`.
    pub fn describe(&self) -> String {
        let regions: Vec<String> = self
            .regions
            .iter()
            .map(|(name, nodes)| {
                let nodes: Vec<String> = nodes.iter().map(|n| format!("n{n}")).collect();
                format!("{name} {}", nodes.join(" "))
            })
            .collect();
        let rtts: Vec<String> = self
            .rtt_ms
            .iter()
            .map(|(pair, ms)| format!("{pair} {ms} ms"))
            .collect();
        format!(
            "{} nodes: {}; RTT {} (delay: {}; heartbeat {} ms, election timeout {} ms)",
            self.nodes,
            regions.join(" | "),
            rtts.join(", "),
            self.delay,
            self.heartbeat_ms,
            self.election_timeout_ms
        )
    }
}
