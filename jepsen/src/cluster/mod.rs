//! Cluster control: idemd nodes in network namespaces.
//!
//! Shared by the `test` runner and by `idem-jepsen cluster up|down|exec`, which leaves a
//! namespaced (optionally multi-region) cluster running for scripts and black-box tests: the
//! region emulation is written once, here.
//!
//! - [`netns`]: names, addresses and the commands that build the network;
//! - [`regions`]: placement into regions and netem delays between them;
//! - [`delay`]: the same delays through user-space proxies, for kernels without netem;
//! - [`config`]: one TOML file per node;
//! - [`node`]: an idemd process (start, kill -9, pause, restart);
//! - [`disk`]: a node's data directory on idem-faultfs, for power losses;
//! - [`security`]: TLS certificates, the credentials file, what clients present;
//! - [`clock`]: per-node clock offsets through libfaketime;
//! - [`health`]: waits for health and for a leader;
//! - [`cleanup`]: teardown on exit, on panic, after a signal, and of earlier crashed runs;
//! - [`state`]: the state file of a cluster left running;
//! - [`tools`]: root, system packages, locating idemd.
//!
//! The running half of the harness reports errors with `anyhow`: it is the body of a command
//! line tool, and its errors end up in front of a person, not matched on by code.

pub mod cleanup;
pub mod clock;
pub mod command;
pub mod config;
pub mod delay;
pub mod disk;
pub mod health;
pub mod manage;
pub mod netns;
pub mod node;
pub mod regions;
pub mod security;
pub mod state;
pub mod tools;

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{bail, Context as _};

use cleanup::NetnsGuard;
use clock::FakeClock;
use command::Cmd;
use config::{NodeConfig, Timings};
use delay::DelayProxies;
use disk::FaultDisk;
use netns::Topology;
use node::NodeProcess;
use regions::Regions;
use security::{Access, Security, SecurityMode};
use state::{ClusterState, NodeState};

/// What cluster to build.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Namespace prefix.
    pub prefix: String,
    /// Number of nodes.
    pub nodes: usize,
    /// Region placement and delays.
    pub regions: Regions,
    /// The idemd binary.
    pub idemd: PathBuf,
    /// Directory for configs, data and logs (`<dir>/n1/...`).
    pub dir: PathBuf,
    /// Node timings.
    pub timings: Timings,
    /// Run nodes under libfaketime (needed for clock skew).
    pub fake_clock: bool,
    /// With `fake_clock`, move the monotonic clock with the realtime clock.
    pub fake_monotonic: bool,
    /// Put each node's data directory on an idem-faultfs mount (needed for power losses).
    pub fault_disks: bool,
    /// `raft.snapshot_logs` of every node (a low floor: frequent snapshots); `None`: idemd's
    /// default.
    pub snapshot_logs: Option<u64>,
    /// idemd log filter.
    pub log_level: String,
    /// TLS and authentication, or plaintext.
    pub security: SecurityMode,
}

/// A namespaced cluster: its network (torn down on drop) and its node processes.
pub struct Cluster {
    /// Names and addresses.
    pub topology: Topology,
    /// Region placement.
    pub regions: Regions,
    /// How region latency is produced ([`DelayMode::Proxy`]: start [`delay::DelayProxies`]
    /// on the hub before the nodes).
    pub delay_mode: DelayMode,
    nodes: Vec<Mutex<NodeProcess>>,
    guard: Mutex<NetnsGuard>,
    dir: PathBuf,
    security: Option<Security>,
}

impl Cluster {
    /// Builds the network and writes the node configs; nodes are not started yet.
    pub fn create(spec: &ClusterSpec) -> anyhow::Result<Cluster> {
        if !(1..=9).contains(&spec.nodes) {
            bail!("--nodes must be between 1 and 9 (3 or 5 for a real test)");
        }
        let topology = Topology::new(&spec.prefix, spec.nodes);
        cleanup::claim_prefix(&spec.prefix)?;
        let guard = NetnsGuard::new(&topology);
        command::run_all(&topology.setup_commands()).context("building the test network")?;
        let delay_mode = if spec.regions.has_delay() {
            apply_delays(&topology, &spec.regions)?
        } else {
            DelayMode::None
        };
        let security = match &spec.security {
            SecurityMode::Plaintext => None,
            SecurityMode::Secure { idemctl, tenant } => {
                let dir = spec.dir.join("security");
                let issued = Security::create(idemctl, &dir, &topology, tenant)
                    .context("issuing the cluster's certificates and tokens")?;
                Some(issued)
            }
        };
        let nodes = topology
            .ids()
            .map(|id| prepare_node(spec, &topology, id, security.as_ref()).map(Mutex::new))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Cluster {
            topology,
            regions: spec.regions.clone(),
            delay_mode,
            nodes,
            guard: Mutex::new(guard),
            dir: spec.dir.clone(),
            security,
        })
    }

    /// Moves the calling thread (and the threads it spawns later) into the hub namespace, where
    /// only the cluster's addresses are reachable. Call it before building the async runtime.
    pub fn enter_hub(&self) -> anyhow::Result<()> {
        enter_netns(&self.topology.hub_ns())
    }

    /// Node ids, 1..=n.
    pub fn ids(&self) -> Vec<usize> {
        self.topology.ids().collect()
    }

    /// Locks node `id`'s process.
    pub fn node(&self, id: usize) -> MutexGuard<'_, NodeProcess> {
        self.nodes[id - 1]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts every node.
    pub fn start_all(&self) -> anyhow::Result<()> {
        for id in self.ids() {
            self.node(id).start()?;
        }
        Ok(())
    }

    /// Starts the cluster from inside the hub namespace (see [`Cluster::enter_hub`]): first
    /// the delay proxies it needs ([`DelayMode::Proxy`]; they run until the returned value is
    /// dropped), then every node. Waits until every node is healthy and a majority agrees on
    /// a leader; returns the proxies and that leader.
    pub async fn boot(&self, within: Duration) -> anyhow::Result<(Option<DelayProxies>, usize)> {
        let proxies = match self.delay_mode {
            DelayMode::Proxy => Some(DelayProxies::start(&self.topology, &self.regions).await?),
            DelayMode::None | DelayMode::Netem => None,
        };
        self.start_all()?;
        let all = self.ids();
        health::wait_healthy(&self.topology, &all, within).await?;
        let admin = health::admin_client(&self.topology, &self.admin_access())?;
        let leader = health::wait_leader(&admin, &self.topology, &all, within).await?;
        Ok((proxies, leader))
    }

    /// What the harness's administrative clients present (status queries, membership).
    pub fn admin_access(&self) -> Access {
        self.security
            .as_ref()
            .map(Security::admin)
            .unwrap_or_default()
    }

    /// What the workers present.
    pub fn worker_access(&self) -> Access {
        self.security
            .as_ref()
            .map(Security::worker)
            .unwrap_or_default()
    }

    /// Ids of nodes whose process runs and is not paused.
    pub fn live_nodes(&self) -> Vec<usize> {
        self.ids()
            .into_iter()
            .filter(|&id| {
                let mut n = self.node(id);
                n.is_running() && !n.is_paused()
            })
            .collect()
    }

    /// A command run inside node `id`'s namespace.
    pub fn in_node(&self, id: usize, cmd: Cmd) -> Cmd {
        Cmd::in_netns(&self.topology.node_ns(id), cmd)
    }

    /// The directory of node `id` (config, data, log).
    pub fn node_dir(&self, id: usize) -> PathBuf {
        self.dir.join(Topology::node_name(id))
    }

    /// Stops every node (SIGTERM, then SIGKILL after `grace`).
    pub fn stop_all(&self, grace: Duration) {
        for id in self.ids() {
            self.node(id).stop(grace);
        }
    }

    /// Kills the nodes and deletes the namespaces now (also done on drop).
    pub fn teardown(&self) {
        for id in self.ids() {
            let _ = self.node(id).kill();
        }
        self.guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .teardown();
    }

    /// Leaves the nodes and namespaces running and returns their description (`cluster up`).
    pub fn detach(mut self) -> ClusterState {
        let mut nodes = Vec::new();
        self.guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .disarm();
        for (i, node) in std::mem::take(&mut self.nodes).into_iter().enumerate() {
            let id = i + 1;
            let node = node.into_inner().unwrap_or_else(PoisonError::into_inner);
            let log = node.log_path().to_path_buf();
            nodes.push(NodeState {
                id,
                netns: self.topology.node_ns(id),
                api_addr: self.topology.api_addr(id),
                raft_addr: self.topology.raft_addr(id),
                http_addr: self.topology.http_addr(id),
                region: self.regions.region_name(id),
                zone: self.regions.zone_name(id),
                config: self.dir.join(Topology::node_name(id)).join("idemd.toml"),
                log,
                pid: node.detach(),
            });
        }
        ClusterState {
            prefix: self.topology.prefix.clone(),
            hub_netns: self.topology.hub_ns(),
            hub_ip: self.topology.hub_ip().to_string(),
            nodes,
            proxy_pid: None,
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            let _ = node.lock().unwrap_or_else(PoisonError::into_inner).kill();
        }
    }
}

/// Moves the calling thread into network namespace `ns`.
pub fn enter_netns(ns: &str) -> anyhow::Result<()> {
    let path = Path::new("/run/netns").join(ns);
    let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    rustix::thread::move_into_link_name_space(
        file.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .with_context(|| format!("entering network namespace {ns}"))
}

/// How region latency is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayMode {
    /// No latency configured.
    None,
    /// `tc netem` on each node's veth.
    Netem,
    /// DNAT to delaying proxies on the hub ([`delay`]); the proxies must be running.
    Proxy,
}

/// Installs the region delays: netem when the kernel has it, else DNAT to delay proxies.
fn apply_delays(topology: &Topology, regions: &Regions) -> anyhow::Result<DelayMode> {
    let netem = tools::netem_available(&topology.node_ns(1));
    for id in topology.ids() {
        let rules = if netem {
            regions.netem_commands(topology, id)
        } else {
            delay::dnat_commands(topology, regions, id)
        };
        let cmds: Vec<Cmd> = rules
            .into_iter()
            .map(|c| Cmd::in_netns(&topology.node_ns(id), c))
            .collect();
        command::run_all(&cmds)?;
    }
    Ok(if netem {
        DelayMode::Netem
    } else {
        DelayMode::Proxy
    })
}

fn prepare_node(
    spec: &ClusterSpec,
    topology: &Topology,
    id: usize,
    security: Option<&Security>,
) -> anyhow::Result<NodeProcess> {
    let dir = spec.dir.join(Topology::node_name(id));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let mut config =
        NodeConfig::for_node(topology, &spec.regions, id, dir.join("data"), &spec.timings);
    config.log_level = spec.log_level.clone();
    config.snapshot_logs = spec.snapshot_logs;
    config.security = security.map(|s| s.node(id));
    let config_path = dir.join("idemd.toml");
    std::fs::write(&config_path, config.to_toml())
        .with_context(|| format!("writing {}", config_path.display()))?;
    let clock = if spec.fake_clock {
        let lib = clock::find_library().context("libfaketime not installed")?;
        let clock = FakeClock::create(&lib, &dir.join("faketime"))?;
        Some(clock.with_monotonic(spec.fake_monotonic))
    } else {
        None
    };
    let node = NodeProcess::new(
        id,
        &topology.node_ns(id),
        &spec.idemd,
        &config_path,
        &dir.join("idemd.log"),
        clock,
    );
    if !spec.fault_disks {
        return Ok(node);
    }
    let disk = FaultDisk::mount(&dir.join(DISK_DIR), &dir.join("data"))?;
    Ok(node.with_disk(disk))
}

/// The directory under a node's directory that backs its faultfs-mounted `data`.
pub const DISK_DIR: &str = "disk";
