//! The `[cluster]` section: who the initial members are and whether this node bootstraps,
//! waits to be replicated to, or joins a running cluster.
//!
//! Why a fixed rule instead of "whoever starts first initializes": two nodes that both
//! call openraft's `initialize` with overlapping member sets would create two clusters
//! with the same ids. So exactly one node initializes — the initial member with the
//! lowest id — and every other initial member waits for the leader's replication. A node
//! started with `join` never initializes: it waits until an operator adds it
//! (`idemctl member add`). A data directory that already holds Raft state is never
//! initialized again, whatever the configuration says.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use idem_store::NodeInfo;

use super::values::{self, address};

/// One initial member as configured (file, `--initial-member` or `IDEM_INITIAL_MEMBERS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialMember {
    /// Raft node id (≥ 1).
    pub id: u64,
    /// Node-to-node Raft address.
    pub raft_addr: SocketAddr,
    /// Public API address.
    pub api_addr: SocketAddr,
    /// Region; this node's own `region` when unset for itself, else `local`.
    pub region: Option<String>,
    /// Zone; this node's own `zone` when unset for itself, else `local-a`.
    pub zone: Option<String>,
}

/// The cluster topology settings of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The members the cluster is bootstrapped with; empty for a single node.
    pub initial_members: Vec<InitialMember>,
    /// Start empty and wait to be added by an operator (never bootstrap).
    pub join: bool,
}

/// What a node with no Raft state does at its first start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// Initialize the group with these members (this node has the lowest id, or is alone).
    Initialize(BTreeMap<u64, NodeInfo>),
    /// Wait for the leader to replicate to this node (another member initializes, or an
    /// operator adds it).
    Wait,
}

impl InitialMember {
    /// Parses the flag form `ID=RAFT_ADDR,API_ADDR[,REGION[,ZONE]]`.
    pub fn parse_flag(text: &str) -> Result<Self, String> {
        let syntax = "expected ID=RAFT_ADDR,API_ADDR[,REGION[,ZONE]]";
        let (id, rest) = text.trim().split_once('=').ok_or(syntax)?;
        let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
        if !(2..=4).contains(&parts.len()) {
            return Err(syntax.to_owned());
        }
        Ok(InitialMember {
            id: member_id(id.trim())?,
            raft_addr: addr("raft_addr", parts[0])?,
            api_addr: addr("api_addr", parts[1])?,
            region: parts.get(2).map(|r| location(r)).transpose()?,
            zone: parts.get(3).map(|z| location(z)).transpose()?,
        })
    }

    /// Parses the file form `{ id = 1, raft_addr = "…", api_addr = "…", region = "…", zone = "…" }`.
    pub fn from_toml(value: &toml::Value) -> Result<Self, String> {
        let table = value
            .as_table()
            .ok_or("expected a table such as { id = 1, raft_addr = \"127.0.0.1:7410\", api_addr = \"127.0.0.1:7400\" }")?;
        if let Some(unknown) = table
            .keys()
            .find(|k| !["id", "raft_addr", "api_addr", "region", "zone"].contains(&k.as_str()))
        {
            return Err(format!(
                "unknown key {unknown}; known keys: id, raft_addr, api_addr, region, zone"
            ));
        }
        let text = |key: &str| -> Result<Option<String>, String> {
            match table.get(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                Some(toml::Value::Integer(i)) => Ok(Some(i.to_string())),
                Some(other) => Err(format!(
                    "{key}: expected a string, got a {}",
                    other.type_str()
                )),
            }
        };
        let required = |key: &str| text(key)?.ok_or_else(|| format!("{key} is required"));
        Ok(InitialMember {
            id: member_id(&required("id")?)?,
            raft_addr: addr("raft_addr", &required("raft_addr")?)?,
            api_addr: addr("api_addr", &required("api_addr")?)?,
            region: text("region")?.map(|r| location(&r)).transpose()?,
            zone: text("zone")?.map(|z| location(&z)).transpose()?,
        })
    }

    /// The file form (what `--print-config` shows).
    pub fn to_toml(&self) -> toml::Value {
        let mut table = toml::Table::new();
        table.insert(
            "id".into(),
            toml::Value::Integer(i64::try_from(self.id).unwrap_or(i64::MAX)),
        );
        table.insert("raft_addr".into(), self.raft_addr.to_string().into());
        table.insert("api_addr".into(), self.api_addr.to_string().into());
        if let Some(region) = &self.region {
            table.insert("region".into(), region.clone().into());
        }
        if let Some(zone) = &self.zone {
            table.insert("zone".into(), zone.clone().into());
        }
        toml::Value::Table(table)
    }

    /// The Raft membership record of this member; `own` gives the region and zone used
    /// when this member is the configuring node and leaves them unset.
    pub fn node_info(&self, own: Option<(&str, &str)>) -> NodeInfo {
        let (region, zone) = own.unwrap_or(("local", "local-a"));
        NodeInfo {
            region: self.region.clone().unwrap_or_else(|| region.to_owned()),
            zone: self.zone.clone().unwrap_or_else(|| zone.to_owned()),
            raft_addr: self.raft_addr.to_string(),
            api_addr: self.api_addr.to_string(),
        }
    }
}

impl ClusterConfig {
    /// Problems of this section for the node `node_id` listening on `raft_addr` and
    /// `api_addr`, one line each (empty when valid).
    pub fn problems(
        &self,
        node_id: u64,
        raft_addr: SocketAddr,
        api_addr: SocketAddr,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let (mut ids, mut addrs) = (BTreeSet::new(), BTreeSet::new());
        for m in &self.initial_members {
            if !ids.insert(m.id) {
                problems.push(format!("cluster.initial_members: duplicate id {}", m.id));
            }
            for a in [m.raft_addr, m.api_addr] {
                if !addrs.insert(a) {
                    problems.push(format!(
                        "cluster.initial_members: address {a} is used twice (member {})",
                        m.id
                    ));
                }
            }
        }
        if self.initial_members.is_empty() {
            return problems;
        }
        match self.initial_members.iter().find(|m| m.id == node_id) {
            None if !self.join => problems.push(format!(
                "cluster.initial_members: this node (node_id = {node_id}) is not listed; list it, or start it with --join to be added later"
            )),
            None => {}
            Some(me) => {
                if me.raft_addr != raft_addr {
                    problems.push(format!(
                        "cluster.initial_members: member {node_id} has raft_addr {} but this node's raft_addr is {raft_addr}",
                        me.raft_addr
                    ));
                }
                if me.api_addr != api_addr {
                    problems.push(format!(
                        "cluster.initial_members: member {node_id} has api_addr {} but this node's api_addr is {api_addr}",
                        me.api_addr
                    ));
                }
            }
        }
        problems
    }

    /// What a node without Raft state does: `me` is this node's own membership record.
    pub fn bootstrap(&self, node_id: u64, me: NodeInfo) -> Bootstrap {
        if self.join {
            return Bootstrap::Wait;
        }
        if self.initial_members.is_empty() {
            return Bootstrap::Initialize(BTreeMap::from([(node_id, me)]));
        }
        let lowest = self.initial_members.iter().map(|m| m.id).min();
        if lowest != Some(node_id) {
            return Bootstrap::Wait;
        }
        let members = self
            .initial_members
            .iter()
            .map(|m| {
                let info = if m.id == node_id {
                    me.clone()
                } else {
                    m.node_info(None)
                };
                (m.id, info)
            })
            .collect();
        Bootstrap::Initialize(members)
    }
}

fn member_id(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(id) if id >= 1 => Ok(id),
        _ => Err(format!("id {text:?}: expected a whole number ≥ 1")),
    }
}

fn addr(what: &str, text: &str) -> Result<SocketAddr, String> {
    address(text).map_err(|e| format!("{what} {text:?}: {e}"))
}

fn location(text: &str) -> Result<String, String> {
    values::location(text).map_err(|e| format!("region/zone {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, raft: u16, api: u16) -> InitialMember {
        InitialMember::parse_flag(&format!("{id}=127.0.0.1:{raft},127.0.0.1:{api},r1,r1-a"))
            .unwrap()
    }

    fn me(raft: u16, api: u16) -> NodeInfo {
        NodeInfo {
            region: "r1".into(),
            zone: "r1-a".into(),
            raft_addr: format!("127.0.0.1:{raft}"),
            api_addr: format!("127.0.0.1:{api}"),
        }
    }

    #[test]
    fn flag_form_parses_and_rejects_garbage() {
        let m = InitialMember::parse_flag("2=127.0.0.1:7411,127.0.0.1:7401").unwrap();
        assert_eq!((m.id, m.region.as_deref()), (2, None));
        assert_eq!(m.raft_addr.to_string(), "127.0.0.1:7411");
        assert!(InitialMember::parse_flag("0=127.0.0.1:1,127.0.0.1:2").is_err());
        assert!(InitialMember::parse_flag("1=127.0.0.1:1").is_err());
        assert!(InitialMember::parse_flag("1=host:1,127.0.0.1:2").is_err());
    }

    #[test]
    fn lowest_id_initializes_the_others_wait() {
        let cluster = ClusterConfig {
            initial_members: vec![
                member(2, 7411, 7401),
                member(1, 7410, 7400),
                member(3, 7412, 7402),
            ],
            join: false,
        };
        match cluster.bootstrap(1, me(7410, 7400)) {
            Bootstrap::Initialize(members) => {
                assert_eq!(members.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cluster.bootstrap(2, me(7411, 7401)), Bootstrap::Wait);
        let joining = ClusterConfig {
            join: true,
            ..cluster
        };
        assert_eq!(joining.bootstrap(1, me(7410, 7400)), Bootstrap::Wait);
        let single = ClusterConfig::default();
        assert!(matches!(single.bootstrap(5, me(1, 2)), Bootstrap::Initialize(m) if m.len() == 1));
    }

    #[test]
    fn validation_is_one_line_per_problem() {
        let cluster = ClusterConfig {
            initial_members: vec![member(1, 7410, 7400), member(1, 7411, 7400)],
            join: false,
        };
        let raft = "127.0.0.1:7410".parse().unwrap();
        let api = "127.0.0.1:7400".parse().unwrap();
        let problems = cluster.problems(1, raft, api);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems.iter().all(|p| !p.contains('\n')));
        let problems = cluster.problems(4, raft, api);
        assert!(problems
            .iter()
            .any(|p| p.contains("node_id = 4) is not listed")));
        let other = "127.0.0.1:9999".parse().unwrap();
        let ok = ClusterConfig {
            initial_members: vec![member(1, 7410, 7400)],
            join: false,
        };
        assert_eq!(ok.problems(1, other, api).len(), 1);
    }
}
