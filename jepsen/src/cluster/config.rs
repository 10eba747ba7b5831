//! One `idemd` TOML configuration per node.
//!
//! Each node gets a file rather than flags so that a restarted node (after a kill) starts
//! with exactly the same settings, and so that an operator can rerun a node by hand from the
//! store directory. Multi-node clusters get a `[cluster]` section listing the initial members
//! (`{id, raft_addr, api_addr, region, zone}`); the node with the lowest id initializes the
//! group. A single node gets no `[cluster]` section: it initializes itself.
//!
//! A secure node (the default of `idem-jepsen test`) gets `[tls]` (its certificate on the
//! API port; clients authenticate with tokens), `[peer_tls]` (mutual TLS with the cluster
//! CA on the Raft port) and `[auth] mode = "on"` with the run's credentials file; a
//! plaintext node gets `[auth] mode = "off"`.

use std::path::PathBuf;
use std::time::Duration;

use super::netns::Topology;
use super::regions::Regions;
use super::security::NodeSecurity;

/// Timings the harness sets on every node (short, so faults heal within a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timings {
    /// Bound on each Raft write (`write_timeout`).
    pub write_timeout: Duration,
    /// Bound on each read barrier (`read_timeout`).
    pub read_timeout: Duration,
    /// Raft heartbeat interval.
    pub heartbeat: Duration,
    /// Raft minimum election timeout.
    pub election: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            write_timeout: Duration::from_secs(3),
            read_timeout: Duration::from_secs(3),
            heartbeat: Duration::from_millis(200),
            election: Duration::from_millis(1000),
        }
    }
}

impl Timings {
    /// Timings for voters `rtt` apart (the largest round trip between regions), following
    /// `docs/cluster.md`: heartbeat at least 2 × RTT, election timeout at least 10 × RTT,
    /// never below the defaults; write and read bounds grow with the election timeout so a
    /// failover fits in them.
    pub fn for_rtt(rtt: Duration) -> Timings {
        let base = Timings::default();
        let election = base.election.max(rtt * 10);
        Timings {
            heartbeat: base.heartbeat.max(rtt * 2),
            election,
            write_timeout: base.write_timeout.max(election * 3),
            read_timeout: base.read_timeout.max(election * 3),
        }
    }
}

/// One initial member of the group, as listed in `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    /// Raft node id.
    pub id: u64,
    /// Raft address.
    pub raft_addr: String,
    /// gRPC API address.
    pub api_addr: String,
    /// Region name.
    pub region: String,
    /// Zone name.
    pub zone: String,
}

/// The configuration of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// Raft node id.
    pub id: u64,
    /// Data directory.
    pub data_dir: PathBuf,
    /// gRPC API listen address.
    pub api_addr: String,
    /// Raft listen address.
    pub raft_addr: String,
    /// HTTP listen address.
    pub http_addr: String,
    /// Region name.
    pub region: String,
    /// Zone name.
    pub zone: String,
    /// Log filter.
    pub log_level: String,
    /// Timeouts and Raft timings.
    pub timings: Timings,
    /// Initial members; empty for a single node (no `[cluster]` section).
    pub members: Vec<MemberSpec>,
    /// TLS and authentication; `None`: plaintext with authentication off.
    pub security: Option<NodeSecurity>,
    /// `raft.snapshot_logs` (the snapshot floor); `None`: idemd's default.
    pub snapshot_logs: Option<u64>,
}

impl NodeConfig {
    /// The configuration of node `id` of `topology`, with its data under `data_dir`.
    pub fn for_node(
        topology: &Topology,
        regions: &Regions,
        id: usize,
        data_dir: PathBuf,
        timings: &Timings,
    ) -> NodeConfig {
        let members = if topology.nodes > 1 {
            topology
                .ids()
                .map(|m| MemberSpec {
                    id: m as u64,
                    raft_addr: topology.raft_addr(m),
                    api_addr: topology.api_addr(m),
                    region: regions.region_name(m),
                    zone: regions.zone_name(m),
                })
                .collect()
        } else {
            Vec::new()
        };
        NodeConfig {
            id: id as u64,
            data_dir,
            api_addr: topology.api_addr(id),
            raft_addr: topology.raft_addr(id),
            http_addr: topology.http_addr(id),
            region: regions.region_name(id),
            zone: regions.zone_name(id),
            log_level: "info".into(),
            timings: timings.clone(),
            members,
            security: None,
            snapshot_logs: None,
        }
    }

    /// The TOML text `idemd --config` reads.
    pub fn to_toml(&self) -> String {
        let mut root = toml::Table::new();
        let s = |v: &str| toml::Value::String(v.to_string());
        let d = |v: Duration| toml::Value::String(humantime::format_duration(v).to_string());
        root.insert("node_id".into(), toml::Value::Integer(self.id as i64));
        root.insert("data_dir".into(), s(&self.data_dir.to_string_lossy()));
        root.insert("api_addr".into(), s(&self.api_addr));
        root.insert("raft_addr".into(), s(&self.raft_addr));
        root.insert("http_addr".into(), s(&self.http_addr));
        root.insert("region".into(), s(&self.region));
        root.insert("zone".into(), s(&self.zone));
        root.insert("log_level".into(), s(&self.log_level));
        root.insert("write_timeout".into(), d(self.timings.write_timeout));
        root.insert("read_timeout".into(), d(self.timings.read_timeout));
        let mut raft = toml::Table::new();
        raft.insert("heartbeat_interval".into(), d(self.timings.heartbeat));
        raft.insert("election_timeout".into(), d(self.timings.election));
        if let Some(logs) = self.snapshot_logs {
            raft.insert("snapshot_logs".into(), toml::Value::Integer(logs as i64));
        }
        root.insert("raft".into(), toml::Value::Table(raft));
        self.security_toml(&mut root);
        if !self.members.is_empty() {
            let members = self.members.iter().map(MemberSpec::to_toml).collect();
            let mut cluster = toml::Table::new();
            cluster.insert("initial_members".into(), toml::Value::Array(members));
            root.insert("cluster".into(), toml::Value::Table(cluster));
        }
        toml::to_string(&root).unwrap_or_default()
    }

    /// `[tls]`, `[peer_tls]` and `[auth]` on, or only `[auth]` off.
    fn security_toml(&self, root: &mut toml::Table) {
        let p = |v: &std::path::Path| toml::Value::String(v.to_string_lossy().into_owned());
        let mut auth = toml::Table::new();
        let Some(sec) = &self.security else {
            auth.insert("mode".into(), toml::Value::String("off".into()));
            root.insert("auth".into(), toml::Value::Table(auth));
            return;
        };
        let mut tls = toml::Table::new();
        tls.insert("cert".into(), p(&sec.cert));
        tls.insert("key".into(), p(&sec.key));
        root.insert("tls".into(), toml::Value::Table(tls.clone()));
        tls.insert("ca".into(), p(&sec.ca));
        root.insert("peer_tls".into(), toml::Value::Table(tls));
        auth.insert("mode".into(), toml::Value::String("on".into()));
        auth.insert("credentials".into(), p(&sec.credentials));
        root.insert("auth".into(), toml::Value::Table(auth));
    }
}

impl MemberSpec {
    fn to_toml(&self) -> toml::Value {
        let mut t = toml::Table::new();
        t.insert("id".into(), toml::Value::Integer(self.id as i64));
        t.insert(
            "raft_addr".into(),
            toml::Value::String(self.raft_addr.clone()),
        );
        t.insert(
            "api_addr".into(),
            toml::Value::String(self.api_addr.clone()),
        );
        t.insert("region".into(), toml::Value::String(self.region.clone()));
        t.insert("zone".into(), toml::Value::String(self.zone.clone()));
        toml::Value::Table(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_grow_with_the_round_trip() {
        assert_eq!(Timings::for_rtt(Duration::ZERO), Timings::default());
        let far = Timings::for_rtt(Duration::from_millis(150));
        assert_eq!(far.heartbeat, Duration::from_millis(300));
        assert_eq!(far.election, Duration::from_millis(1500));
        assert_eq!(far.write_timeout, Duration::from_millis(4500));
    }

    #[test]
    fn single_node_has_no_cluster_section() {
        let t = Topology::new("x", 1);
        let c = NodeConfig::for_node(
            &t,
            &Regions::single(1),
            1,
            "/d/n1".into(),
            &Timings::default(),
        );
        let text = c.to_toml();
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(parsed["node_id"].as_integer(), Some(1));
        assert_eq!(parsed["api_addr"].as_str(), Some("10.77.0.1:7400"));
        assert_eq!(parsed["data_dir"].as_str(), Some("/d/n1"));
        assert_eq!(parsed["raft"]["election_timeout"].as_str(), Some("1s"));
        assert!(!parsed.contains_key("cluster"), "{text}");
        assert!(!parsed["raft"]
            .as_table()
            .unwrap()
            .contains_key("snapshot_logs"));
        assert_eq!(parsed["auth"]["mode"].as_str(), Some("off"), "{text}");
        assert!(!parsed.contains_key("tls"), "{text}");
    }

    #[test]
    fn a_secure_node_runs_tls_on_both_ports_with_auth_on() {
        let t = Topology::new("x", 1);
        let mut c = NodeConfig::for_node(
            &t,
            &Regions::single(1),
            1,
            "/d/n1".into(),
            &Timings::default(),
        );
        c.security = Some(NodeSecurity {
            cert: "/s/n1.pem".into(),
            key: "/s/n1-key.pem".into(),
            ca: "/s/ca.pem".into(),
            credentials: "/s/credentials.toml".into(),
        });
        let text = c.to_toml();
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(parsed["tls"]["cert"].as_str(), Some("/s/n1.pem"), "{text}");
        assert_eq!(parsed["tls"]["key"].as_str(), Some("/s/n1-key.pem"));
        assert_eq!(parsed["peer_tls"]["ca"].as_str(), Some("/s/ca.pem"));
        assert_eq!(parsed["peer_tls"]["cert"].as_str(), Some("/s/n1.pem"));
        assert_eq!(parsed["auth"]["mode"].as_str(), Some("on"));
        assert_eq!(
            parsed["auth"]["credentials"].as_str(),
            Some("/s/credentials.toml")
        );
    }

    #[test]
    fn cluster_lists_every_initial_member_with_its_region() {
        let t = Topology::new("x", 3);
        let r = Regions::new(3, 3, &[]).unwrap();
        let mut c = NodeConfig::for_node(&t, &r, 2, "/d/n2".into(), &Timings::default());
        c.snapshot_logs = Some(100);
        let parsed: toml::Table = c.to_toml().parse().unwrap();
        assert_eq!(parsed["raft"]["snapshot_logs"].as_integer(), Some(100));
        assert_eq!(parsed["region"].as_str(), Some("r2"));
        let members = parsed["cluster"]["initial_members"].as_array().unwrap();
        assert_eq!(members.len(), 3);
        assert_eq!(members[2]["id"].as_integer(), Some(3));
        assert_eq!(members[2]["raft_addr"].as_str(), Some("10.77.0.3:7410"));
        assert_eq!(members[2]["api_addr"].as_str(), Some("10.77.0.3:7400"));
        assert_eq!(members[2]["zone"].as_str(), Some("r3-a"));
    }
}
