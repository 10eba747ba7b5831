//! The command line: one subcommand per job, every flag documented in `--help`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use idem_client::Coalescing;

use crate::node::NodeSpec;
use crate::workload::Workload;

/// Load generator for idem, side by side with etcd and PostgreSQL: closed- and open-loop
/// load, HDR latency histograms, JSON results, PNG plots, and probes of the disk and loopback
/// floors.
#[derive(Debug, Parser)]
#[command(name = "idem-bench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure one workload at one concurrency (closed loop) or one rate (open loop, --rate).
    Run(RunArgs),
    /// Measure workloads at several concurrencies (default 1,8,64); optional PNG plots.
    Sweep(SweepArgs),
    /// Bulk-load completed records (claim + complete of N keys) with high concurrency.
    Preload(PreloadArgs),
    /// Disk floor: write + fdatasync loop in a directory (RocksDB's WAL pattern).
    FsyncProbe(FsyncArgs),
    /// Network floor: TCP ping-pong over loopback.
    RttProbe(RttArgs),
    /// Compare results files of idem, etcd and Postgres: medians, targets, and the ratio line
    /// last.
    Summarize(SummarizeArgs),
    /// Compare builds of idem measured in rounds (scripts/bench/builds.sh): per point, each
    /// build's medians and its per-round ratios to the base build.
    CompareBuilds(CompareBuildsArgs),
    /// Draw latency and throughput against clients from results files (medians per point).
    Plot(PlotArgs),
}

/// The store to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// idem through idem-client (gRPC, leader routing).
    Idem,
    /// etcd v3 through its gRPC KV service (Txn).
    Etcd,
    /// A single PostgreSQL server through tokio-postgres (INSERT … ON CONFLICT, fenced
    /// UPDATE).
    Postgres,
}

impl BackendKind {
    /// The endpoints of the local clusters started by the scripts.
    pub fn default_endpoints(self) -> Vec<String> {
        let list: &[&str] = match self {
            // deploy/local/cluster.sh up 3: API of node N on 75N0.
            BackendKind::Idem => &["127.0.0.1:7510", "127.0.0.1:7520", "127.0.0.1:7530"],
            // scripts/bench/etcd.sh up: client URLs of members 1..3.
            BackendKind::Etcd => &["127.0.0.1:2379", "127.0.0.1:22379", "127.0.0.1:32379"],
            // scripts/bench/postgres.sh up: one server, user and database idem_bench.
            BackendKind::Postgres => &["127.0.0.1:25432"],
        };
        list.iter().map(|s| (*s).to_owned()).collect()
    }
}

/// Which store, where, over how many connections.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// The store to load.
    #[arg(long, value_enum, default_value_t = BackendKind::Idem)]
    pub backend: BackendKind,
    /// host:port list (comma-separated). Default: the local cluster of the backend (idem
    /// 7510,7520,7530; etcd 2379,22379,32379; postgres 25432). idem finds its leader itself;
    /// each etcd connection goes to one endpoint in turn (give only the leader to skip the
    /// forward). postgres: host:port (user and database idem_bench) or a postgresql:// URL.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// Connections (idem SDK clients / etcd gRPC channels / Postgres connections) the
    /// clients are spread over (see also --connection-per-client).
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// idem: most calls the SDK coalesces into one `Batch` request while earlier requests
    /// to the endpoint are under way (its default); 1 sends every call on its own.
    #[arg(long, default_value_t = Coalescing::default().max_calls)]
    pub idem_batch: usize,
    /// idem: most requests the SDK keeps under way per endpoint while coalescing.
    #[arg(long, default_value_t = Coalescing::default().max_in_flight)]
    pub idem_in_flight: usize,
    /// idem: longest the SDK lets ready callers join a batch before sending it, while
    /// another request is under way (0 sends at once).
    #[arg(long, default_value = "200us", value_parser = humantime::parse_duration)]
    pub idem_linger: Duration,
}

impl TargetArgs {
    /// The SDK's coalescing settings these arguments ask for.
    pub fn coalescing(&self) -> Coalescing {
        Coalescing {
            max_calls: self.idem_batch,
            max_in_flight: self.idem_in_flight,
            linger: self.idem_linger,
            ..Coalescing::default()
        }
    }

    /// The endpoints given, or the backend's default.
    pub fn endpoints(&self) -> Vec<String> {
        if self.endpoints.is_empty() {
            self.backend.default_endpoints()
        } else {
            self.endpoints.clone()
        }
    }
}

/// How the load is shaped and measured.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Measurement window of each run (after the warm-up).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Unrecorded load before each window.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Open loop: operations started per second, whatever the answers (latency measured
    /// from each one's intended start). Without it: closed loop.
    #[arg(long)]
    pub rate: Option<f64>,
    /// retry workload: share of claims that are retries of completed keys (0.0 to 1.0).
    #[arg(long, default_value_t = 0.9)]
    pub dup_share: f64,
    /// contention (and mixed) workload: number of hot keys all clients race for.
    #[arg(long, default_value_t = 4)]
    pub hot_keys: usize,
    /// retry and mixed workloads: completed keys made before the run for retries to hit.
    #[arg(long, default_value_t = 2000)]
    pub pool: usize,
    /// Seed of the key choices (the same seed picks the same operations on every store).
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Open one connection per client for every run (closed after it) instead of spreading
    /// the clients over --connections: a Postgres connection is one server process that
    /// runs its statements one after another, so pgbench gives each client its own.
    #[arg(long)]
    pub connection_per_client: bool,
    /// Server process to report CPU time and RSS of, as NAME=PID (repeatable).
    #[arg(long = "node-pid", value_name = "NAME=PID")]
    pub nodes: Vec<NodeSpec>,
    /// Server process to report together with all its descendants, as NAME=PID (repeatable):
    /// a server with a process per connection (Postgres: postmaster, backends, WAL writer,
    /// checkpointer, ...), whose CPU is summed over the tree and RSS is its total PSS.
    #[arg(long = "node-tree", value_name = "NAME=PID", value_parser = NodeSpec::tree)]
    pub trees: Vec<NodeSpec>,
    /// Key prefix, unique per invocation (default: backend and start time); keys are never
    /// reused, so runs can follow each other on the same cluster.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Free text stored in the results (e.g. the repetition).
    #[arg(long)]
    pub label: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl LoadArgs {
    /// Every watched server: the processes of `--node-pid`, then the trees of `--node-tree`.
    pub fn watched(&self) -> Vec<NodeSpec> {
        self.nodes.iter().chain(&self.trees).cloned().collect()
    }
}

/// `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// The workload.
    #[arg(long, value_enum, default_value_t = Workload::Claim)]
    pub workload: Workload,
    /// Concurrent clients (closed loop), or most operations in flight (open loop).
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// `sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Workloads, comma-separated (claim, retry, contention, mixed).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "claim")]
    pub workloads: Vec<Workload>,
    /// Concurrencies, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    pub clients: Vec<usize>,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Draw <workload>-latency.png and <workload>-throughput.png into this directory.
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

/// `preload`.
#[derive(Debug, Args)]
pub struct PreloadArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Records to create.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Concurrent claim + complete loops.
    #[arg(long, default_value_t = 256)]
    pub clients: usize,
    /// Key prefix; the keys are <prefix>-<i>. Rerunning with the same prefix skips
    /// completed keys.
    #[arg(long, default_value = "preload")]
    pub prefix: String,
}

/// `fsync-probe`.
#[derive(Debug, Args)]
pub struct FsyncArgs {
    /// Directory on the disk to measure (the nodes' data directories' disk).
    #[arg(long)]
    pub dir: PathBuf,
    /// Iterations.
    #[arg(long, default_value_t = 2000)]
    pub count: usize,
    /// Bytes written per iteration (about one small WAL record batch).
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// Grow the file with every write instead of overwriting a preallocated one (RocksDB
    /// preallocates its WAL; a growing file also costs a journal commit per sync).
    #[arg(long)]
    pub append: bool,
    /// Write the result as JSON to this file (for `summarize --probe`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `rtt-probe`.
#[derive(Debug, Args)]
pub struct RttArgs {
    /// Round trips.
    #[arg(long, default_value_t = 20000)]
    pub count: usize,
    /// Bytes each way.
    #[arg(long, default_value_t = 256)]
    pub size: usize,
    /// Write the result as JSON to this file (for `summarize --probe`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `compare-builds`.
#[derive(Debug, Args)]
pub struct CompareBuildsArgs {
    /// Results files labelled `<build>-r<round>` (`--label` of run or sweep).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The build the others are divided by.
    #[arg(long)]
    pub base: String,
}

/// `summarize`.
#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// Results files (`--out` of run or sweep), any number of repetitions of every store.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Probe results (`--out` of fsync-probe and rtt-probe) for the latency floor.
    #[arg(long)]
    pub probe: Vec<PathBuf>,
    /// Also draw the comparison plots into this directory.
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

/// `plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Results files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Directory for the PNGs.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}
