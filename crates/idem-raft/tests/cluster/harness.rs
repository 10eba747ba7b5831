//! In-process nodes: each has its own RocksDB store in a temporary directory, its own Raft
//! and its own tonic server on a loopback port, and talks to the others only through the
//! gRPC transport under test.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use idem_core::placement::GLOBAL_GROUP;
use idem_core::testing::{Harness, BODY_A};
use idem_core::{MemoryStore, Record, RecordKey, Timestamp};
use idem_raft::{GroupRegistry, LogPolicy, Network, NetworkOptions, RaftService, RaftTimeouts};
use idem_store::{LogId, NodeInfo, Raft, Request, StateReader};
use openraft::async_runtime::WatchReceiver;
use openraft::{RaftMetrics, ServerState};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Longest wait for anything in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// A running node.
pub struct Node {
    /// Its Raft.
    pub raft: Raft,
    /// Its committed-state reader.
    pub reader: StateReader,
    registry: GroupRegistry,
    shutdown: oneshot::Sender<()>,
    server: JoinHandle<()>,
}

/// Nodes sharing one configuration; a node keeps its directory and address across
/// restarts.
pub struct Cluster {
    timeouts: RaftTimeouts,
    log: LogPolicy,
    options: NetworkOptions,
    dirs: BTreeMap<u64, TempDir>,
    addrs: BTreeMap<u64, SocketAddr>,
    /// The running nodes.
    pub nodes: BTreeMap<u64, Node>,
    /// Generates the commands.
    harness: Harness<MemoryStore>,
    stamp: u64,
}

/// Short timeouts for a quick test, still comfortably above loopback latency on a busy
/// machine.
pub fn test_timeouts() -> RaftTimeouts {
    RaftTimeouts {
        heartbeat_interval: Duration::from_millis(100),
        election_timeout_min: Duration::from_millis(800),
        election_timeout_max: Duration::from_millis(1_600),
        install_snapshot_timeout: Duration::from_secs(5),
        pre_vote: true,
    }
}

/// Fast retries, so a restarted node is found again quickly.
pub fn test_options() -> NetworkOptions {
    NetworkOptions {
        connect_timeout: Duration::from_millis(500),
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        ..NetworkOptions::default()
    }
}

impl Cluster {
    /// A cluster whose nodes use these settings; no node runs yet.
    pub fn new(timeouts: RaftTimeouts, log: LogPolicy, options: NetworkOptions) -> Self {
        Cluster {
            timeouts,
            log,
            options,
            dirs: BTreeMap::new(),
            addrs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            harness: Harness::new(MemoryStore::new()),
            stamp: 1_000_000,
        }
    }

    /// Nodes 1, 2 and 3 with these settings and the test timeouts, started and initialized
    /// as one group of voters; returns the cluster and its agreed leader.
    pub async fn three(log: LogPolicy, options: NetworkOptions) -> anyhow::Result<(Self, u64)> {
        let mut c = Cluster::new(test_timeouts(), log, options);
        for id in 1..=3 {
            c.start(id).await?;
        }
        c.init(&[1, 2, 3]).await?;
        let leader = c.leader().await?;
        Ok((c, leader))
    }

    /// What the membership records about node `id` (once it has an address).
    pub fn info(&self, id: u64) -> NodeInfo {
        let addr = self.addrs[&id];
        NodeInfo {
            region: "local".into(),
            zone: format!("z{id}"),
            raft_addr: addr.to_string(),
            api_addr: String::new(),
        }
    }

    /// The address of node `id`.
    pub fn addr(&self, id: u64) -> SocketAddr {
        self.addrs[&id]
    }

    /// The running node `id`.
    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }

    /// Starts node `id`: on a new directory and port the first time, on its old ones after
    /// a [`Cluster::stop`].
    pub async fn start(&mut self, id: u64) -> anyhow::Result<()> {
        let dir = match self.dirs.entry(id) {
            std::collections::btree_map::Entry::Occupied(e) => e.get().path().to_owned(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(TempDir::new()?).path().to_owned()
            }
        };
        let listener = match self.addrs.get(&id) {
            Some(addr) => TcpListener::bind(addr)
                .await
                .with_context(|| format!("rebinding {addr}"))?,
            None => TcpListener::bind("127.0.0.1:0").await?,
        };
        self.addrs.insert(id, listener.local_addr()?);

        let (log, sm, reader) = open_store(&dir).await?;
        let config = self.timeouts.config_with("idem-test", &self.log)?;
        let network = Network::new(id, self.options.clone());
        let raft = Raft::new(id, Arc::new(config), network, log, sm).await?;

        let registry = GroupRegistry::new();
        registry.insert(GLOBAL_GROUP, raft.clone());
        let (shutdown, signal) = oneshot::channel::<()>();
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let router = idem_raft::server_builder(&self.options)
            .add_service(RaftService::server(registry.clone()));
        let server = tokio::spawn(async move {
            let signal = async move {
                let _ = signal.await;
            };
            if let Err(error) = router.serve_with_incoming_shutdown(incoming, signal).await {
                tracing::error!(%error, "raft server failed");
            }
        });
        self.nodes.insert(
            id,
            Node {
                raft,
                reader,
                registry,
                shutdown,
                server,
            },
        );
        Ok(())
    }

    /// Stops node `id` as a crash would look to its peers: its Raft stops and its port
    /// closes (connections included); its directory stays.
    pub async fn stop(&mut self, id: u64) -> anyhow::Result<()> {
        let node = self
            .nodes
            .remove(&id)
            .ok_or_else(|| anyhow!("node {id} is not running"))?;
        node.registry.remove(GLOBAL_GROUP);
        node.raft
            .shutdown()
            .await
            .map_err(|e| anyhow!("shutdown: {e}"))?;
        let _ = node.shutdown.send(());
        let mut server = node.server;
        if tokio::time::timeout(Duration::from_secs(3), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
        Ok(())
    }

    /// Initializes a group of `voters` (through the first of them).
    pub async fn init(&self, voters: &[u64]) -> anyhow::Result<()> {
        let members: BTreeMap<u64, NodeInfo> =
            voters.iter().map(|&id| (id, self.info(id))).collect();
        self.node(voters[0]).raft.initialize(members).await?;
        Ok(())
    }

    /// Waits until every running node agrees on one leader; returns it.
    pub async fn leader(&self) -> anyhow::Result<u64> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            // Only an established leader counts: a committed vote (granted by a quorum),
            // not a candidate that a follower already named in its metrics.
            let leaders: BTreeSet<Option<u64>> = self
                .nodes
                .values()
                .map(|n| {
                    let m = n.raft.metrics().borrow_watched().clone();
                    m.current_leader.filter(|_| m.vote.is_committed())
                })
                .collect();
            if let [Some(leader)] = leaders.iter().copied().collect::<Vec<_>>()[..] {
                if let Some(node) = self.nodes.get(&leader) {
                    // openraft refuses writes (ForwardToLeader, reason LeaseExpired) until a
                    // quorum acknowledged the new leader.
                    let m = node.raft.metrics().borrow_watched().clone();
                    if m.state == ServerState::Leader && m.last_quorum_acked.is_some() {
                        return Ok(leader);
                    }
                }
            }
            if tokio::time::Instant::now() > deadline {
                bail!("no agreed leader: {leaders:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Proposes claims of `keys` through `leader`; returns their record keys and the log
    /// id of the last one.
    pub async fn claim(
        &mut self,
        leader: u64,
        keys: impl IntoIterator<Item = String>,
    ) -> anyhow::Result<(Vec<RecordKey>, LogId)> {
        let raft = self.nodes[&leader].raft.clone();
        let mut targets = Vec::new();
        let mut last = None;
        for key in keys {
            let target = Harness::<MemoryStore>::target(&key);
            self.stamp += 1_000;
            let request = Request {
                stamp: Timestamp(self.stamp),
                command: self
                    .harness
                    .claim_command(&target, BODY_A, "worker-1")
                    .into(),
            };
            let response = tokio::time::timeout(WAIT, raft.client_write(request))
                .await
                .context("client_write timed out")??;
            let outcome = response.data.outcome.ok_or_else(|| anyhow!("no outcome"))?;
            anyhow::ensure!(
                matches!(outcome, idem_core::Outcome::Claim(ref c) if c.kind == idem_core::ClaimKind::Acquired),
                "claim of {key} answered {outcome:?}"
            );
            targets.push(target);
            last = Some(response.log_id);
        }
        Ok((targets, last.ok_or_else(|| anyhow!("no keys"))?))
    }

    /// Waits until node `id` has applied `index`.
    pub async fn applied(
        &self,
        id: u64,
        index: u64,
    ) -> anyhow::Result<RaftMetrics<idem_store::TypeConfig>> {
        self.wait(id, &format!("node {id} applies {index}"), |m| {
            m.last_applied.as_ref().is_some_and(|l| l.index() >= index)
        })
        .await
    }

    /// Waits until the metrics of node `id` satisfy `want`.
    pub async fn wait(
        &self,
        id: u64,
        what: &str,
        want: impl Fn(&RaftMetrics<idem_store::TypeConfig>) -> bool + Send,
    ) -> anyhow::Result<RaftMetrics<idem_store::TypeConfig>> {
        self.node(id)
            .raft
            .wait(Some(WAIT))
            .metrics(want, what)
            .await
            .map_err(|e| anyhow!("{what}: {e}"))
    }

    /// The records of `keys` on node `id`, all present.
    pub fn records(&self, id: u64, keys: &[RecordKey]) -> anyhow::Result<Vec<Record>> {
        let reader = &self.node(id).reader;
        keys.iter()
            .map(|key| {
                reader
                    .record(key)?
                    .ok_or_else(|| anyhow!("node {id} lacks a record"))
            })
            .collect()
    }

    /// Stops every node.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop(id).await?;
        }
        Ok(())
    }
}

/// Opens a store, retrying while a stopped node's database is still being closed.
async fn open_store(
    dir: &std::path::Path,
) -> anyhow::Result<(idem_store::LogStore, idem_store::StateMachine, StateReader)> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let path = dir.to_owned();
        match tokio::task::spawn_blocking(move || idem_store::open(&path)).await? {
            Ok(store) => return Ok(store),
            Err(error) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(%error, "store not reopenable yet");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}
