//! The network: one namespace per node, joined by veth pairs to a bridge in a hub namespace.
//!
//! ```text
//!   <prefix>-n1 [eth0 10.77.0.1] ──veth── n1 ┐
//!   <prefix>-n2 [eth0 10.77.0.2] ──veth── n2 ├─ br0 10.77.0.254   <prefix>-hub
//!   <prefix>-n3 [eth0 10.77.0.3] ──veth── n3 ┘   (harness, clients, ledger service)
//! ```
//!
//! The bridge lives in its own namespace, not on the host, and the harness moves itself into
//! it: the hub has no default route, so traffic can only ever reach the nodes' addresses.
//! If the namespaces vanish mid-run, a connection attempt fails with "network unreachable"
//! instead of leaking to whatever network the host is on. Every node listens on the same
//! ports (its own namespace); partitions drop packets inside node namespaces, so the hub
//! (clients, ledger) always reaches every node, as in Jepsen.

use std::net::Ipv4Addr;

use super::command::Cmd;

/// The names and addresses of a namespaced cluster; pure (no system calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Prefix of every namespace name (`idemj` gives `idemj-hub`, `idemj-n1`, ...).
    pub prefix: String,
    /// Number of nodes, numbered from 1.
    pub nodes: usize,
    /// First three octets of the private /24 inside the namespaces.
    pub subnet: [u8; 3],
}

/// The gRPC API port of every node (inside its own namespace).
pub const API_PORT: u16 = 7400;
/// The Raft port of every node.
pub const RAFT_PORT: u16 = 7410;
/// The HTTP port (`/healthz`, `/metrics`) of every node.
pub const HTTP_PORT: u16 = 7480;
/// The ledger service's port on the hub.
pub const LEDGER_PORT: u16 = 7300;

impl Topology {
    /// A topology of `nodes` nodes under `prefix`, on 10.77.0.0/24.
    pub fn new(prefix: &str, nodes: usize) -> Topology {
        Topology {
            prefix: prefix.to_string(),
            nodes,
            subnet: [10, 77, 0],
        }
    }

    /// Node ids, 1..=nodes.
    pub fn ids(&self) -> impl Iterator<Item = usize> {
        1..=self.nodes
    }

    /// The hub namespace (bridge, harness, ledger).
    pub fn hub_ns(&self) -> String {
        format!("{}-hub", self.prefix)
    }

    /// The namespace of node `id`.
    pub fn node_ns(&self, id: usize) -> String {
        format!("{}-n{id}", self.prefix)
    }

    /// Every namespace of this topology, hub last.
    pub fn all_ns(&self) -> Vec<String> {
        let mut v: Vec<String> = self.ids().map(|i| self.node_ns(i)).collect();
        v.push(self.hub_ns());
        v
    }

    /// The address of node `id`.
    pub fn node_ip(&self, id: usize) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, id as u8)
    }

    /// The hub's address on the bridge.
    pub fn hub_ip(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 254)
    }

    /// The node's name in logs and histories (`n1`).
    pub fn node_name(id: usize) -> String {
        format!("n{id}")
    }

    /// `host:port` of node `id`'s gRPC API.
    pub fn api_addr(&self, id: usize) -> String {
        format!("{}:{API_PORT}", self.node_ip(id))
    }

    /// `host:port` of node `id`'s Raft endpoint.
    pub fn raft_addr(&self, id: usize) -> String {
        format!("{}:{RAFT_PORT}", self.node_ip(id))
    }

    /// `host:port` of node `id`'s HTTP endpoint.
    pub fn http_addr(&self, id: usize) -> String {
        format!("{}:{HTTP_PORT}", self.node_ip(id))
    }

    /// `host:port` of the ledger service.
    pub fn ledger_addr(&self) -> String {
        format!("{}:{LEDGER_PORT}", self.hub_ip())
    }

    /// The commands that build the network (namespaces, bridge, veths, addresses).
    pub fn setup_commands(&self) -> Vec<Cmd> {
        let hub = self.hub_ns();
        let mut cmds = vec![
            Cmd::new(["ip", "netns", "add", &hub]),
            Cmd::new(["ip", "-n", &hub, "link", "set", "lo", "up"]),
            Cmd::new(["ip", "-n", &hub, "link", "add", "br0", "type", "bridge"]),
            Cmd::new(["ip", "-n", &hub, "link", "set", "br0", "up"]),
            Cmd::new([
                "ip",
                "-n",
                &hub,
                "addr",
                "add",
                &format!("{}/24", self.hub_ip()),
                "dev",
                "br0",
            ]),
        ];
        for id in self.ids() {
            cmds.extend(self.node_commands(id));
        }
        cmds
    }

    fn node_commands(&self, id: usize) -> Vec<Cmd> {
        let (hub, ns) = (self.hub_ns(), self.node_ns(id));
        let port = Topology::node_name(id);
        let addr = format!("{}/24", self.node_ip(id));
        vec![
            Cmd::new(["ip", "netns", "add", &ns]),
            Cmd::new(["ip", "-n", &ns, "link", "set", "lo", "up"]),
            Cmd::new([
                "ip", "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ]),
            Cmd::new([
                "ip", "-n", &hub, "link", "set", &port, "master", "br0", "up",
            ]),
            Cmd::new(["ip", "-n", &ns, "addr", "add", &addr, "dev", "eth0"]),
            Cmd::new(["ip", "-n", &ns, "link", "set", "eth0", "up"]),
        ]
    }

    /// The command that deletes namespace `ns` (its veth ends go with it).
    pub fn delete_command(ns: &str) -> Cmd {
        Cmd::new(["ip", "netns", "del", ns])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses() {
        let t = Topology::new("idemj", 3);
        assert_eq!(t.hub_ns(), "idemj-hub");
        assert_eq!(t.node_ns(2), "idemj-n2");
        assert_eq!(t.api_addr(3), "10.77.0.3:7400");
        assert_eq!(t.raft_addr(1), "10.77.0.1:7410");
        assert_eq!(t.ledger_addr(), "10.77.0.254:7300");
        assert_eq!(
            t.all_ns(),
            ["idemj-n1", "idemj-n2", "idemj-n3", "idemj-hub"]
        );
    }

    #[test]
    fn setup_builds_bridge_then_one_veth_per_node() {
        let t = Topology::new("x", 2);
        let lines: Vec<String> = t.setup_commands().iter().map(Cmd::to_string).collect();
        assert_eq!(lines[0], "ip netns add x-hub");
        assert!(lines.contains(&"ip -n x-hub addr add 10.77.0.254/24 dev br0".to_string()));
        assert!(lines
            .contains(&"ip -n x-hub link add n2 type veth peer name eth0 netns x-n2".to_string()));
        assert!(lines.contains(&"ip -n x-n1 addr add 10.77.0.1/24 dev eth0".to_string()));
        assert_eq!(lines.len(), 5 + 2 * 6);
        // Nothing routes anywhere but the /24: no default route is ever added.
        assert!(!lines.iter().any(|l| l.contains("route")));
    }
}
