//! The state file of a cluster left running by `cluster up` (`<dir>/cluster.json`).
//!
//! Scripts and `cluster down`/`cluster exec` find the namespaces, addresses and pids there.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// One node of a running cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// Node id.
    pub id: usize,
    /// Its network namespace.
    pub netns: String,
    /// gRPC API address.
    pub api_addr: String,
    /// Raft address.
    pub raft_addr: String,
    /// HTTP address.
    pub http_addr: String,
    /// Region name.
    pub region: String,
    /// Zone name.
    pub zone: String,
    /// idemd's pid when started.
    pub pid: Option<u32>,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its log file.
    pub log: PathBuf,
}

/// A cluster left running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Namespace prefix.
    pub prefix: String,
    /// The hub namespace: run clients there (`cluster exec hub -- ...`).
    pub hub_netns: String,
    /// The hub's address on the bridge.
    pub hub_ip: String,
    /// The nodes.
    pub nodes: Vec<NodeState>,
    /// The delay proxies' process, when region latency runs through them (no netem).
    #[serde(default)]
    pub proxy_pid: Option<u32>,
}

impl ClusterState {
    /// The state file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("cluster.json")
    }

    /// Writes `<dir>/cluster.json`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(Self::path(dir), text + "\n")
            .with_context(|| format!("writing {}", Self::path(dir).display()))
    }

    /// Reads `<dir>/cluster.json`.
    pub fn read(dir: &Path) -> anyhow::Result<ClusterState> {
        let path = Self::path(dir);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (is a cluster up there?)", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The namespace for `who`: `hub`, `n3` or `3`.
    pub fn netns_of(&self, who: &str) -> Option<String> {
        if who == "hub" {
            return Some(self.hub_netns.clone());
        }
        let id: usize = who.trim_start_matches('n').parse().ok()?;
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| n.netns.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_resolves_names() {
        let dir = tempfile::tempdir().unwrap();
        let state = ClusterState {
            prefix: "p".into(),
            hub_netns: "p-hub".into(),
            hub_ip: "10.77.0.254".into(),
            nodes: vec![NodeState {
                id: 1,
                netns: "p-n1".into(),
                api_addr: "10.77.0.1:7400".into(),
                raft_addr: "10.77.0.1:7410".into(),
                http_addr: "10.77.0.1:7480".into(),
                region: "r1".into(),
                zone: "r1-a".into(),
                pid: Some(42),
                config: "c".into(),
                log: "l".into(),
            }],
            proxy_pid: None,
        };
        state.write(dir.path()).unwrap();
        let back = ClusterState::read(dir.path()).unwrap();
        assert_eq!(back, state);
        assert_eq!(back.netns_of("n1").as_deref(), Some("p-n1"));
        assert_eq!(back.netns_of("1").as_deref(), Some("p-n1"));
        assert_eq!(back.netns_of("hub").as_deref(), Some("p-hub"));
        assert_eq!(back.netns_of("n9"), None);
    }
}
