//! One `idemd` process: its ports, data directory, log file and lifecycle.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::binaries::binary;
use crate::ports::free_port;

/// How long a node may take to report healthy.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Extra settings for a node.
#[derive(Clone, Debug, Default)]
pub struct NodeOptions {
    /// Extra command-line flags, e.g. `["--sweep-interval", "200ms"]`.
    pub args: Vec<String>,
    /// Extra environment variables, e.g. failpoints.
    pub env: Vec<(String, String)>,
    /// The `idemd` binary to run instead of this workspace's (e.g. a previous release's).
    pub idemd: Option<PathBuf>,
}

impl NodeOptions {
    /// Adds a flag and its value.
    pub fn arg(mut self, flag: &str, value: &str) -> Self {
        self.args.push(flag.into());
        self.args.push(value.into());
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Runs `path` as `idemd` instead of this workspace's binary.
    pub fn idemd(mut self, path: PathBuf) -> Self {
        self.idemd = Some(path);
        self
    }
}

/// The three loopback addresses of a node, allocated before it starts (a cluster lists
/// every member's addresses in every node's configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeAddrs {
    /// Public gRPC API address.
    pub api: SocketAddr,
    /// Raft address.
    pub raft: SocketAddr,
    /// HTTP (metrics, health) address.
    pub http: SocketAddr,
}

impl NodeAddrs {
    /// Three ports that were free a moment ago.
    pub fn allocate() -> NodeAddrs {
        NodeAddrs {
            api: free_port(),
            raft: free_port(),
            http: free_port(),
        }
    }
}

/// One member of a cluster as listed in `[cluster] initial_members`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    /// Raft node id.
    pub id: u64,
    /// The member's addresses.
    pub addrs: NodeAddrs,
    /// Region name.
    pub region: String,
    /// Zone name.
    pub zone: String,
}

/// A running (or stopped) `idemd`.
pub struct Node {
    /// Raft node id.
    pub id: u64,
    /// Public gRPC API address.
    pub api_addr: SocketAddr,
    /// Raft address.
    pub raft_addr: SocketAddr,
    /// HTTP (metrics, health) address.
    pub http_addr: SocketAddr,
    dir: TempDir,
    options: NodeOptions,
    child: Option<Child>,
    starts: u32,
    config: Option<PathBuf>,
}

impl Node {
    /// Starts a single-node cluster (node id 1) in a fresh data directory and waits until
    /// it is healthy.
    pub fn start(options: NodeOptions) -> Node {
        let mut node = Node {
            id: 1,
            api_addr: free_port(),
            raft_addr: free_port(),
            http_addr: free_port(),
            dir: tempfile::tempdir().expect("temp dir"),
            options,
            child: None,
            starts: 0,
            config: None,
        };
        node.spawn(&[]);
        node.wait_ready();
        node
    }

    /// A member of a multi-node cluster, not started yet: node `id` on `addrs`, with an
    /// `idemd.toml` in its directory holding `config` (raft timings, region, ...) and a
    /// `[cluster]` section listing `members` (`join = true` and no list when `join`).
    pub fn cluster_member(
        id: u64,
        addrs: NodeAddrs,
        members: &[MemberSpec],
        join: bool,
        config: &str,
        options: NodeOptions,
    ) -> Node {
        let dir = tempfile::Builder::new()
            .prefix(&format!("idem-n{id}-"))
            .tempdir()
            .expect("temp dir");
        let path = dir.path().join("idemd.toml");
        std::fs::write(&path, member_config(config, members, join)).expect("write idemd.toml");
        Node {
            id,
            api_addr: addrs.api,
            raft_addr: addrs.raft,
            http_addr: addrs.http,
            dir,
            options,
            child: None,
            starts: 0,
            config: Some(path),
        }
    }

    /// The node's addresses.
    pub fn addrs(&self) -> NodeAddrs {
        NodeAddrs {
            api: self.api_addr,
            raft: self.raft_addr,
            http: self.http_addr,
        }
    }

    /// True when `/healthz` answers 200 right now (the node knows a leader).
    pub fn is_healthy(&self) -> bool {
        http_status(self.http_addr, "/healthz") == Some(200)
    }

    /// The API endpoint as a client expects it.
    pub fn endpoint(&self) -> String {
        self.api_addr.to_string()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Spawns the process with `extra_env` on top of the node's options (no wait).
    pub fn spawn(&mut self, extra_env: &[(&str, &str)]) {
        assert!(self.child.is_none(), "node {} already running", self.id);
        self.starts += 1;
        let log = File::create(self.log_path(self.starts)).expect("log file");
        let idemd = self
            .options
            .idemd
            .clone()
            .unwrap_or_else(|| binary("idemd"));
        let mut command = Command::new(idemd);
        if let Some(config) = &self.config {
            command.arg("--config").arg(config);
        }
        command
            .arg("--node-id")
            .arg(self.id.to_string())
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--api-addr")
            .arg(self.api_addr.to_string())
            .arg("--raft-addr")
            .arg(self.raft_addr.to_string())
            .arg("--http-addr")
            .arg(self.http_addr.to_string())
            // The black-box suites test the store, not its credentials (tests of
            // authentication start their own nodes).
            .arg("--auth")
            .arg("off")
            .args(&self.options.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        for (name, value) in &self.options.env {
            command.env(name, value);
        }
        for (name, value) in extra_env {
            command.env(name, value);
        }
        self.child = Some(command.spawn().expect("spawn idemd"));
    }

    /// Polls `/healthz` until it answers 200, failing the test with the log on timeout.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if http_status(self.http_addr, "/healthz") == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("node {} not healthy in time; log:\n{}", self.id, self.log());
    }

    /// `kill -9`: no shutdown, no flush beyond what was already durable.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("node is running");
        let pid = child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        child.wait().expect("wait for idemd")
    }

    /// Waits for the process to exit by itself (e.g. after a failpoint aborted it).
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("node is running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("poll idemd") {
                return status;
            }
            assert!(Instant::now() < deadline, "node {} did not exit", self.id);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `idemd` binary the next [`Node::spawn`] runs: `path`, or this workspace's when
    /// `None` (an upgrade or a rollback of a stopped node).
    pub fn set_idemd(&mut self, path: Option<PathBuf>) {
        self.options.idemd = path;
    }

    /// Starts again on the same data directory and ports, and waits until healthy.
    pub fn restart(&mut self) {
        self.spawn(&[]);
        self.wait_ready();
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Everything the node logged, across restarts.
    pub fn log(&self) -> String {
        (1..=self.starts)
            .map(|n| std::fs::read_to_string(self.log_path(n)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n--- restart ---\n")
    }

    /// The node's Prometheus metrics text.
    pub fn metrics(&self) -> String {
        http_get(self.http_addr, "/metrics").unwrap_or_default()
    }

    fn log_path(&self, start: u32) -> PathBuf {
        self.dir.path().join(format!("idemd.{start}.log"))
    }

    /// The directory holding the node's files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The TOML text of a cluster member: `config` (top-level keys and tables other than
/// `[cluster]`) followed by the `[cluster]` section.
fn member_config(config: &str, members: &[MemberSpec], join: bool) -> String {
    let mut text = String::from(config);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("\n[cluster]\n");
    if join {
        text.push_str("join = true\n");
    } else {
        text.push_str("initial_members = [\n");
        for m in members {
            text.push_str(&format!(
                "  {{ id = {}, raft_addr = \"{}\", api_addr = \"{}\", region = \"{}\", zone = \"{}\" }},\n",
                m.id, m.addrs.raft, m.addrs.api, m.region, m.zone
            ));
        }
        text.push_str("]\n");
    }
    text
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let response = http_get_raw(addr, path)?;
    response.split_whitespace().nth(1)?.parse().ok()
}

fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let response = http_get_raw(addr, path)?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

fn http_get_raw(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}
