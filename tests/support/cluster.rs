//! A multi-node cluster of real `idemd` processes on loopback.
//!
//! Every node gets its own directory holding an `idemd.toml` (region, zone, Raft timings and
//! the `[cluster]` section listing the initial members), its data and its logs. Addresses are
//! allocated up front because every member's configuration lists all of them. Node `N` is in
//! region `r{(N-1) % 3 + 1}`, zone `r{..}-a`.
//!
//! Membership changes go through the public admin API (`Admin.AddMember`, `PromoteMember`,
//! `RemoveMember`, `TransferLeader`, sent to any node, which forwards them to the leader);
//! [`Cluster::ctl`] runs the real `idemctl` for the same by hand. Reads of each node's view
//! go through `Admin.Status` on that very node ([`Client::status_of`]).
//!
//! Clusters in one test binary run one at a time ([`Cluster::start`] takes a process-wide
//! lock until the cluster is dropped): on a small machine, parallel clusters would make the
//! timings that the tests measure (failover, catch-up) meaningless.

use std::collections::BTreeMap;
use std::future::Future;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use idem_client::{Client, ClientError, ClientOptions, NodeStatus, RetryPolicy};
use idem_proto::v1;
use idem_proto::v1::admin_client::AdminClient;
use tokio::sync::{Mutex, MutexGuard};
use tonic::transport::Channel;

use crate::binaries::idemctl;
use crate::node::{MemberSpec, Node, NodeAddrs, NodeOptions};

/// One cluster at a time per test binary.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// How long a node may take to become healthy, and a cluster to elect a leader.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings of every node of a cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// `raft.heartbeat_interval`.
    pub heartbeat_interval: Duration,
    /// `raft.election_timeout` (the minimum; openraft picks up to twice it).
    pub election_timeout: Duration,
    /// `raft.snapshot_logs`, when set: snapshot (and purge the log) every this many entries.
    pub snapshot_logs: Option<u64>,
    /// `write_timeout` and `read_timeout`.
    pub request_timeout: Duration,
    /// Extra top-level TOML lines (`key = value`) for every node.
    pub extra_config: Vec<String>,
    /// Extra flags and environment for every node.
    pub node: NodeOptions,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            heartbeat_interval: Duration::from_millis(100),
            election_timeout: Duration::from_millis(500),
            snapshot_logs: None,
            request_timeout: Duration::from_secs(2),
            extra_config: Vec::new(),
            node: NodeOptions::default(),
        }
    }
}

impl ClusterOptions {
    /// The configuration file body of node `id` (everything but `[cluster]`).
    fn config(&self, id: u64) -> String {
        let region = region_of(id);
        let ms = |d: Duration| format!("\"{}ms\"", d.as_millis());
        let mut text = format!(
            "region = \"{region}\"\nzone = \"{region}-a\"\nwrite_timeout = {t}\nread_timeout = {t}\n",
            t = ms(self.request_timeout)
        );
        for line in &self.extra_config {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str("\n[raft]\n");
        text.push_str(&format!(
            "heartbeat_interval = {}\n",
            ms(self.heartbeat_interval)
        ));
        text.push_str(&format!(
            "election_timeout = {}\n",
            ms(self.election_timeout)
        ));
        if let Some(logs) = self.snapshot_logs {
            text.push_str(&format!("snapshot_logs = {logs}\n"));
        }
        text
    }
}

/// The region of node `id`: `r1`, `r2`, `r3`, round-robin.
pub fn region_of(id: u64) -> String {
    format!("r{}", (id - 1) % 3 + 1)
}

/// A running cluster. Dropping it kills every node (`kill -9`) and deletes their files; when
/// the test is panicking, the tail of every node's log is printed first.
pub struct Cluster {
    nodes: BTreeMap<u64, Node>,
    options: ClusterOptions,
    next_id: u64,
    admin: Client,
    _serial: MutexGuard<'static, ()>,
}

impl Cluster {
    /// Starts `n` nodes (ids 1..=n) listing each other as initial members, and waits until
    /// every one is healthy (knows the leader).
    pub async fn start(n: u64, options: ClusterOptions) -> Cluster {
        let serial = SERIAL.lock().await;
        let members: Vec<MemberSpec> = (1..=n)
            .map(|id| MemberSpec {
                id,
                addrs: NodeAddrs::allocate(),
                region: region_of(id),
                zone: format!("{}-a", region_of(id)),
            })
            .collect();
        let mut nodes = BTreeMap::new();
        for member in &members {
            let node = Node::cluster_member(
                member.id,
                member.addrs,
                &members,
                false,
                &options.config(member.id),
                options.node.clone(),
            );
            nodes.insert(member.id, node);
        }
        let admin = admin_client(&nodes.values().next().expect("one node").endpoint());
        let mut cluster = Cluster {
            nodes,
            options,
            next_id: n + 1,
            admin,
            _serial: serial,
        };
        for node in cluster.nodes.values_mut() {
            node.spawn(&[]);
        }
        for id in cluster.ids() {
            cluster.wait_healthy(id).await;
        }
        cluster
    }

    /// Ids of every node of the cluster (running or not), in order.
    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Node `id`.
    pub fn node(&self, id: u64) -> &Node {
        self.nodes
            .get(&id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// Node `id`, mutably.
    pub fn node_mut(&mut self, id: u64) -> &mut Node {
        self.nodes
            .get_mut(&id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The API endpoint of node `id`.
    pub fn endpoint(&self, id: u64) -> String {
        self.node(id).endpoint()
    }

    /// Every node's API endpoint.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.values().map(Node::endpoint).collect()
    }

    /// A client of every node, with the SDK's default retries.
    pub fn client(&self) -> Client {
        crate::client(&self.endpoints())
    }

    /// A client bound to node `id` alone.
    pub fn client_of(&self, id: u64) -> Client {
        crate::client(&[self.endpoint(id)])
    }

    /// Node `id`'s own status, in one attempt.
    pub async fn status(&self, id: u64) -> Result<NodeStatus, ClientError> {
        self.admin.status_of(&self.endpoint(id)).await
    }

    /// Ids of the nodes whose process runs.
    pub fn running(&mut self) -> Vec<u64> {
        self.nodes
            .iter_mut()
            .filter_map(|(id, node)| node.is_running().then_some(*id))
            .collect()
    }

    /// The current leader: a running node whose own status names itself leader (the one
    /// with the highest term if several do), waiting up to 30 s for one.
    pub async fn leader(&mut self) -> u64 {
        self.wait_leader(READY_TIMEOUT, &[])
            .await
            .unwrap_or_else(|| panic!("no leader within {READY_TIMEOUT:?}"))
    }

    /// Waits up to `timeout` for a running node other than `excluded` that reports itself
    /// leader, and returns it.
    pub async fn wait_leader(&mut self, timeout: Duration, excluded: &[u64]) -> Option<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            let candidates: Vec<u64> = self
                .running()
                .into_iter()
                .filter(|id| !excluded.contains(id))
                .collect();
            let mut best: Option<(u64, u64)> = None;
            for id in candidates {
                if let Ok(status) = self.status(id).await {
                    if status.leader_id == Some(id) && best.is_none_or(|(t, _)| status.term > t) {
                        best = Some((status.term, id));
                    }
                }
            }
            if let Some((_, id)) = best {
                return Some(id);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `kill -9` of node `id`.
    pub fn kill9(&mut self, id: u64) {
        self.node_mut(id).kill9();
    }

    /// SIGTERM to node `id`, waiting for it to exit.
    pub fn stop(&mut self, id: u64) -> ExitStatus {
        self.node_mut(id).terminate()
    }

    /// Starts node `id` again on its data directory and waits until it is healthy.
    pub async fn restart(&mut self, id: u64) {
        self.node_mut(id).spawn(&[]);
        self.wait_healthy(id).await;
    }

    /// Stops every running node (SIGTERM), then starts them all again on their data
    /// directories and waits until all are healthy (a lone node cannot elect a leader, so
    /// they start together).
    pub async fn restart_all(&mut self) {
        for id in self.running() {
            self.stop(id);
        }
        for node in self.nodes.values_mut() {
            node.spawn(&[]);
        }
        for id in self.ids() {
            self.wait_healthy(id).await;
        }
    }

    /// Waits until node `id` answers `/healthz` with 200.
    pub async fn wait_healthy(&self, id: u64) {
        let node = self.node(id);
        let ok = poll(READY_TIMEOUT, || async { node.is_healthy() }).await;
        assert!(ok, "node {id} not healthy in time; log:\n{}", node.log());
    }

    /// Waits until node `id` has applied everything the leader had committed when this was
    /// called; returns the node's status then.
    pub async fn wait_caught_up(&mut self, id: u64, timeout: Duration) -> NodeStatus {
        let leader = self.leader().await;
        let target = self
            .status(leader)
            .await
            .expect("leader status")
            .commit_index;
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(id).await;
            if let Ok(status) = &status {
                if status.applied_index >= target {
                    return status.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "node {id} did not apply up to {target} within {timeout:?}: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Adds a node: starts a fresh one with `join = true`, then `Admin.AddMember` (as a
    /// learner, which returns once it caught up) and `Admin.PromoteMember`; waits until it
    /// is healthy. Returns its id.
    pub async fn add_node(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let addrs = NodeAddrs::allocate();
        let region = region_of(id);
        let zone = format!("{region}-a");
        let mut node = Node::cluster_member(
            id,
            addrs,
            &[],
            true,
            &self.options.config(id),
            self.options.node.clone(),
        );
        node.spawn(&[]);
        let listening = poll(READY_TIMEOUT, || async {
            std::net::TcpStream::connect_timeout(&addrs.raft, Duration::from_millis(200)).is_ok()
        })
        .await;
        assert!(
            listening,
            "node {id} does not listen on {}; log:\n{}",
            addrs.raft,
            node.log()
        );
        self.nodes.insert(id, node);
        let member = v1::Member {
            id,
            region,
            zone,
            raft_addr: addrs.raft.to_string(),
            api_addr: addrs.api.to_string(),
            ..v1::Member::default()
        };
        self.admin_rpc("AddMember", |mut c| {
            let member = member.clone();
            async move {
                c.add_member(v1::AddMemberRequest {
                    member: Some(member),
                })
                .await
            }
        })
        .await;
        self.admin_rpc("PromoteMember", |mut c| async move {
            c.promote_member(v1::PromoteMemberRequest { id }).await
        })
        .await;
        self.wait_healthy(id).await;
        id
    }

    /// Removes node `id` from the group (moving leadership away first if it leads), then
    /// stops it (SIGTERM) and forgets it.
    pub async fn remove_node(&mut self, id: u64) {
        let leader = self.leader().await;
        if leader == id {
            // The newest other node: the likeliest to stay.
            let to = self
                .ids()
                .into_iter()
                .rev()
                .find(|other| *other != id)
                .expect("another node");
            self.transfer_leader(to).await;
        }
        self.admin_rpc("RemoveMember", |mut c| async move {
            c.remove_member(v1::RemoveMemberRequest { id }).await
        })
        .await;
        let mut node = self.nodes.remove(&id).expect("node to remove");
        if node.is_running() {
            node.terminate();
        }
    }

    /// `Admin.TransferLeader` to `to`, then waits until `to` reports itself leader.
    pub async fn transfer_leader(&mut self, to: u64) {
        self.admin_rpc("TransferLeader", |mut c| async move {
            c.transfer_leader(v1::TransferLeaderRequest { to, group: 0 })
                .await
        })
        .await;
        let cluster = &*self;
        let ok = poll(READY_TIMEOUT, || async {
            cluster
                .status(to)
                .await
                .is_ok_and(|s| s.leader_id == Some(to))
        })
        .await;
        assert!(ok, "node {to} did not become leader");
    }

    /// Runs `idemctl -w json ARGS` against the running nodes, retrying while it exits 3
    /// (no node answered, or the outcome is unknown: membership commands are idempotent) or
    /// answers `WRONG_STATE` (a membership change in progress); panics on any other failure.
    /// Returns stdout.
    pub async fn ctl(&mut self, args: &[&str]) -> String {
        let endpoints = self
            .running()
            .into_iter()
            .map(|id| self.endpoint(id))
            .collect::<Vec<_>>()
            .join(",");
        let mut last = String::new();
        for _ in 0..10 {
            let output = tokio::process::Command::new(idemctl())
                .args(["--endpoints", &endpoints, "-w", "json"])
                .args(args)
                .output()
                .await
                .expect("run idemctl");
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            if output.status.success() {
                return stdout;
            }
            last = format!(
                "exit {:?}: {stdout}{}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            );
            // 3: unavailable or outcome unknown; WRONG_STATE: another membership change is
            // still in progress. Both pass.
            if output.status.code() != Some(3) && !stdout.contains("WRONG_STATE") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("idemctl {args:?} failed: {last}");
    }

    /// Sends an admin rpc to the running nodes in turn (any node forwards it to the leader)
    /// until one answers, for at most 30 s. Retries `UNAVAILABLE`, deadlines, `NOT_LEADER`
    /// and `WRONG_STATE` (another membership change in progress): membership calls are
    /// idempotent. A `NOT_FOUND` after a failed attempt counts as done (a removal that did
    /// land): then the answer is `None`. Panics on any other answer.
    pub async fn admin_rpc<T, F, Fut>(&mut self, what: &str, rpc: F) -> Option<T>
    where
        F: Fn(AdminClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut failures = Vec::new();
        loop {
            for id in self.running() {
                let uri = format!("http://{}", self.endpoint(id));
                let channel = tonic::transport::Endpoint::from_shared(uri)
                    .expect("endpoint uri")
                    .connect_timeout(Duration::from_secs(1))
                    .timeout(READY_TIMEOUT)
                    .connect()
                    .await;
                let channel = match channel {
                    Ok(channel) => channel,
                    Err(e) => {
                        failures.push(format!("node {id}: {e}"));
                        continue;
                    }
                };
                match rpc(AdminClient::new(channel)).await {
                    Ok(response) => return Some(response.into_inner()),
                    Err(status) => {
                        let reason = idem_proto::status::reason_of(&status).unwrap_or_default();
                        if reason == "NOT_FOUND" && !failures.is_empty() {
                            return None;
                        }
                        let passing = matches!(
                            status.code(),
                            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
                        ) || reason == "WRONG_STATE"
                            || reason == "NOT_LEADER";
                        assert!(passing, "{what} through node {id}: {status:?}");
                        failures.push(format!("node {id}: {reason} {}", status.message()));
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "{what} failed for {READY_TIMEOUT:?}: {failures:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The last `lines` lines of every node's log.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for (id, node) in &self.nodes {
            let log = node.log();
            let all: Vec<&str> = log.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            out.push_str(&format!("===== node {id} =====\n{}\n", tail.join("\n")));
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails(40));
        }
    }
}

/// A client for status calls: one attempt, short timeouts.
fn admin_client(endpoint: &str) -> Client {
    let options = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        retry: RetryPolicy::no_retry(),
        ..ClientOptions::default()
    };
    Client::connect(vec![endpoint.to_string()], options).expect("client options are valid")
}

/// Evaluates `check` every 50 ms until it is true (returns true) or `timeout` passes.
pub async fn poll<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
