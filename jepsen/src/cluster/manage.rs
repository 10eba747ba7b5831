//! `idem-jepsen cluster up|down|exec`: a namespaced cluster left running for scripts.
//!
//! The same network, region delays and node configs as a test run, but the nodes outlive the
//! command: `up` waits for health and a leader, writes `<dir>/cluster.json` and returns;
//! scripts reach the nodes from the hub namespace (`cluster exec hub -- ...`), where every
//! node's address is routable and nothing else is; `down` kills the nodes and deletes the
//! namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;

use super::config::Timings;
use super::regions::Regions;
use super::security::SecurityMode;
use super::state::ClusterState;
use super::{cleanup, delay, health, tools, Cluster, ClusterSpec, DelayMode};

/// What `cluster up` builds.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Number of nodes.
    pub nodes: usize,
    /// Number of regions.
    pub regions: usize,
    /// RTTs between regions.
    pub rtts: Vec<Duration>,
    /// State, configs, data and logs go here.
    pub dir: PathBuf,
    /// Namespace prefix.
    pub prefix: String,
    /// The idemd binary.
    pub idemd: Option<PathBuf>,
    /// Run nodes under libfaketime (clock offsets in `<dir>/n*/faketime`).
    pub fake_clock: bool,
    /// idemd log filter.
    pub log_level: String,
}

/// What `options` describe, checked against the machine: root, the system tools, the idemd
/// binary, the region placement and the node timings for its largest RTT; creates the
/// directory. Shared by `cluster up` and the region scenario (`idem-jepsen regions`), so
/// both build the same emulated regions.
pub fn spec(options: &UpOptions) -> anyhow::Result<ClusterSpec> {
    tools::require_root()?;
    tools::ensure_tools(tools::Needs {
        faketime: options.fake_clock,
    })?;
    let idemd = tools::locate_idemd(options.idemd.as_deref())?;
    let regions = Regions::new(options.nodes, options.regions, &options.rtts)?;
    let timings = Timings::for_rtt(regions.max_rtt());
    std::fs::create_dir_all(&options.dir)
        .with_context(|| format!("creating {}", options.dir.display()))?;
    Ok(ClusterSpec {
        prefix: options.prefix.clone(),
        nodes: options.nodes,
        regions,
        idemd,
        dir: options.dir.canonicalize()?,
        timings,
        fake_clock: options.fake_clock,
        fake_monotonic: false,
        fault_disks: false,
        snapshot_logs: None,
        log_level: options.log_level.clone(),
        // A cluster left running serves scripts and the region scenario's raw clients.
        security: SecurityMode::Plaintext,
    })
}

/// Builds and starts a cluster and leaves it running.
pub fn up(options: &UpOptions) -> anyhow::Result<ClusterState> {
    let spec = spec(options)?;
    let dir = spec.dir.clone();
    let cluster = Cluster::create(&spec)?;
    cluster.enter_hub()?;
    let proxy_pid = match cluster.delay_mode {
        DelayMode::Proxy => Some(spawn_proxies(options, &dir)?),
        DelayMode::None | DelayMode::Netem => None,
    };
    cluster.start_all()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let all = cluster.ids();
        health::wait_healthy(&cluster.topology, &all, Duration::from_secs(60)).await?;
        let admin = health::admin_client(&cluster.topology, &cluster.admin_access())?;
        health::wait_leader(&admin, &cluster.topology, &all, Duration::from_secs(60)).await?;
        anyhow::Ok(())
    })?;
    drop(runtime);
    let mut state = cluster.detach();
    state.proxy_pid = proxy_pid;
    state.write(&dir)?;
    Ok(state)
}

/// Starts `idem-jepsen cluster proxies ...` in the background (it lives in the hub
/// namespace, so `down` ends it with the nodes).
fn spawn_proxies(options: &UpOptions, dir: &Path) -> anyhow::Result<u32> {
    let log = std::fs::File::create(dir.join("proxies.log"))?;
    let rtts: Vec<String> = options
        .rtts
        .iter()
        .map(|d| format!("{}us", d.as_micros()))
        .collect();
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["cluster", "proxies", "--prefix", &options.prefix])
        .args(["--nodes", &options.nodes.to_string()])
        .args(["--regions", &options.regions.to_string()])
        .args(["--rtt", &rtts.join(",")])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().context("starting the delay proxies")?;
    let topology = super::netns::Topology::new(&options.prefix, options.nodes);
    let regions = Regions::new(options.nodes, options.regions, &options.rtts)?;
    let first = delay::routes(&topology, &regions)
        .first()
        .map(|r| r.proxy_port);
    if let Some(port) = first {
        let addr = std::net::SocketAddr::from((topology.hub_ip(), port));
        let ready = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        });
        anyhow::ensure!(
            ready,
            "delay proxies did not start (see {}/proxies.log)",
            dir.display()
        );
    }
    Ok(child.id())
}

/// Serves the delay proxies of the cluster `prefix` until killed (`cluster proxies`, started
/// by `up` when the kernel has no netem).
pub fn serve_proxies(
    prefix: &str,
    nodes: usize,
    regions: usize,
    rtts: &[Duration],
) -> anyhow::Result<()> {
    let topology = super::netns::Topology::new(prefix, nodes);
    let regions = Regions::new(nodes, regions, rtts)?;
    super::enter_netns(&topology.hub_ns())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let proxies = delay::DelayProxies::start(&topology, &regions).await?;
        eprintln!("delay proxies: {} listeners", proxies.len());
        std::future::pending::<()>().await;
        anyhow::Ok(())
    })
}

/// Stops the cluster described in `<dir>/cluster.json` and removes its namespaces.
pub fn down(dir: &Path) -> anyhow::Result<usize> {
    let state = ClusterState::read(dir)?;
    let removed = cleanup::remove_leftovers(&state.prefix);
    let _ = std::fs::remove_file(ClusterState::path(dir));
    Ok(removed)
}

/// Runs `argv` inside the namespace of `who` (`hub`, `n1`, ...); returns its exit code.
pub fn exec(dir: &Path, who: &str, argv: &[String]) -> anyhow::Result<i32> {
    let state = ClusterState::read(dir)?;
    let ns = state.netns_of(who).with_context(|| {
        format!(
            "no node {who:?} in {}; use hub or n1..n{}",
            dir.display(),
            state.nodes.len()
        )
    })?;
    let status = Command::new("ip")
        .args(["netns", "exec", &ns])
        .args(argv)
        .status()
        .context("running ip netns exec")?;
    Ok(status.code().unwrap_or(1))
}
