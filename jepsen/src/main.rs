//! `idem-jepsen`: command line of the fault-injection harness.
//!
//! `test` runs a cluster in network namespaces under a workload and a nemesis and judges the
//! history; `check` re-checks a stored history (and its ledger) and prints the results, which
//! is also what a test run does at its end, so a stored run can be re-judged after a checker
//! changes; `cluster up|down|exec` leaves a namespaced cluster running for scripts; `regions`
//! runs the scripted multi-region scenario on such a cluster and reports its figures.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use idem_jepsen::checker::SearchBudget;
use idem_jepsen::cluster::manage::{self, UpOptions};
use idem_jepsen::cluster::regions::parse_rtts;
use idem_jepsen::matrix::Matrix;
use idem_jepsen::region_scenario::{self, error::ScenarioError};
use idem_jepsen::runner::{self, TestOptions};
use idem_jepsen::{check_all_with, nemesis, plot, workload, History, Ledger, Options};

/// Fault-injection harness for idem.
#[derive(Debug, Parser)]
#[command(name = "idem-jepsen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a test: nodes in network namespaces, a workload, a nemesis; judge the history.
    /// Writes store/<run>/. Exit status: 0 valid, 1 invalid, 2 error, 130 interrupted.
    Test(Box<TestArgs>),
    /// Check a stored history (history.edn or JSON lines) and print the results as JSON.
    /// Exit status: 0 valid, 1 invalid, 2 error.
    Check(CheckArgs),
    /// Manage a namespaced cluster left running for scripts (up, down, exec).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// The multi-region scenario on 5 nodes in 3 emulated regions: global vs affinity
    /// latency, local replays, concurrent claims, a home region cut off and healed. Writes
    /// DIR/regions.json. Exit status: 0 every check passed, 1 a check failed, 2 error, 130
    /// interrupted.
    Regions(RegionsArgs),
    /// Summarize a test matrix run by jepsen/matrix.sh (`make jepsen-matrix`): reads
    /// DIR/runs.tsv and each run's results.json, writes DIR/summary.json, DIR/summary.md and
    /// DIR/matrix.png. Exit status: 0 every run valid, 1 otherwise, 2 error.
    MatrixSummary {
        /// The matrix directory (jepsen/store/matrix-<time>).
        dir: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct RegionsArgs {
    /// Run directory: regions.json, the history, node configs and logs.
    #[arg(long)]
    dir: PathBuf,
    /// RTT between regions: one value, or one per pair (r1-r2, r1-r3, r2-r3).
    #[arg(long, default_value = "20ms,40ms,60ms")]
    rtt: String,
    /// Samples per latency series (and rounds of concurrent claims per tenant).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    samples: u64,
    /// Prefix of the network namespaces.
    #[arg(long, default_value = "idemr")]
    prefix: String,
    /// The idemd binary (default: next to this executable).
    #[arg(long)]
    idemd: Option<PathBuf>,
    /// Keep the nodes' data directories.
    #[arg(long)]
    keep_data: bool,
    /// idemd log filter.
    #[arg(long, default_value = "info")]
    log_level: String,
}

#[derive(Debug, clap::Args)]
struct TestArgs {
    /// Number of idemd nodes (3 or 5; 1 for development).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Seconds of workload.
    #[arg(long, default_value_t = 60)]
    time_limit: u64,
    /// Faults: partition, kill, pause, clock, membership, power-loss, bitflip
    /// (comma-separated), all or none. power-loss puts each node's data directory on an
    /// idem-faultfs mount; bitflip and membership need idemctl and at least 3 nodes.
    #[arg(long, default_value = "partition,kill")]
    nemesis: String,
    /// Seconds between fault starts.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Shortest fault.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    heal_min: Duration,
    /// Longest fault.
    #[arg(long, default_value = "6s", value_parser = humantime::parse_duration)]
    heal_max: Duration,
    /// Largest clock offset of the clock nemesis.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    max_skew: Duration,
    /// Workload: register, conflict, takeover or high-risk.
    #[arg(long, default_value = "register")]
    workload: String,
    /// Seed of every random choice (schedule, keys, stalls); default: from the clock.
    #[arg(long)]
    seed: Option<u64>,
    /// Number of client workers.
    #[arg(long, default_value_t = 10)]
    concurrency: u64,
    /// Keys in use at once.
    #[arg(long, default_value_t = 5)]
    keys_active: u64,
    /// Attempts (over all workers) before the key window moves by one key.
    #[arg(long, default_value_t = 20)]
    attempts_per_key: u64,
    /// Number of regions (nodes placed round-robin).
    #[arg(long, default_value_t = 1)]
    regions: usize,
    /// RTT between regions: one value, or one per region pair (r1-r2, r1-r3, r2-r3, ...).
    #[arg(long, default_value = "")]
    rtt: String,
    /// The idemd binary (default: next to this executable).
    #[arg(long)]
    idemd: Option<PathBuf>,
    /// The idemctl binary, which issues the run's certificates and tokens and runs the
    /// membership nemesis (default: next to this executable).
    #[arg(long)]
    idemctl: Option<PathBuf>,
    /// Run the nodes in plaintext with authentication off (default: TLS on the API and Raft
    /// ports, authentication on, workers with a token of their tenant).
    #[arg(long)]
    plaintext: bool,
    /// Directory of runs.
    #[arg(long, default_value = "store")]
    store: PathBuf,
    /// Prefix of the network namespaces.
    #[arg(long, default_value = "idemj")]
    prefix: String,
    /// Keep the nodes' data directories in the run directory.
    #[arg(long)]
    keep_data: bool,
    /// idemd log filter.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// The nodes' snapshot floor (`raft.snapshot_logs`, at least 100): a low one makes
    /// snapshots be built and installed during partitions and membership changes
    /// (default: idemd's, 100000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    snapshot_logs: Option<u64>,
    /// With the clock nemesis, move each node's monotonic clock (timers, Raft timeouts,
    /// leases) together with its realtime clock, forwards and backwards.
    #[arg(long)]
    clock_monotonic: bool,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Build the network, start the nodes, wait for a leader, write DIR/cluster.json, return.
    Up(UpArgs),
    /// Stop the cluster of DIR and delete its namespaces.
    Down {
        /// The cluster's directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Serve the delay proxies of a cluster (started by `up` on kernels without netem).
    #[command(hide = true)]
    Proxies {
        /// Namespace prefix.
        #[arg(long)]
        prefix: String,
        /// Number of nodes.
        #[arg(long)]
        nodes: usize,
        /// Number of regions.
        #[arg(long)]
        regions: usize,
        /// RTTs, as for `up`.
        #[arg(long, default_value = "")]
        rtt: String,
    },
    /// Run a command in a namespace of the cluster: `hub` (reaches every node) or `n1`..
    Exec {
        /// The cluster's directory.
        #[arg(long)]
        dir: PathBuf,
        /// hub, n1, n2, ...
        node: String,
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct UpArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Number of regions (nodes placed round-robin).
    #[arg(long, default_value_t = 1)]
    regions: usize,
    /// RTT between regions: one value, or one per region pair.
    #[arg(long, default_value = "")]
    rtt: String,
    /// Directory for state, configs, data and logs.
    #[arg(long)]
    dir: PathBuf,
    /// Prefix of the network namespaces.
    #[arg(long, default_value = "idemc")]
    prefix: String,
    /// The idemd binary (default: next to this executable).
    #[arg(long)]
    idemd: Option<PathBuf>,
    /// Run nodes under libfaketime (offsets in DIR/n*/faketime).
    #[arg(long)]
    fake_clock: bool,
    /// idemd log filter.
    #[arg(long, default_value = "info")]
    log_level: String,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The history file.
    history: PathBuf,
    /// The side-effect ledger (default: ledger.edn, ledger.jsonl or ledger.json beside the
    /// history, if present).
    #[arg(long)]
    ledger: Option<PathBuf>,
    /// Also write results.json, results.edn, latency.png and rate.png into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// With --out, skip the plots.
    #[arg(long)]
    no_plots: bool,
    /// Linearizability search steps allowed per key.
    #[arg(long, default_value_t = SearchBudget::default().max_steps_per_key)]
    max_steps: u64,
    /// Linearizability search time allowed in total, in seconds.
    #[arg(long, default_value_t = SearchBudget::default().time_limit.as_secs())]
    time_limit: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check(args) => check(&args).map(verdict),
        Command::Test(args) => test(&args),
        Command::Cluster(command) => cluster(command),
        Command::Regions(args) => regions(&args),
        Command::MatrixSummary { dir } => matrix_summary(&dir),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn verdict(valid: bool) -> ExitCode {
    if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn test(args: &TestArgs) -> anyhow::Result<ExitCode> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    let options = TestOptions {
        nodes: args.nodes,
        regions: args.regions,
        rtts: parse_rtts(&args.rtt)?,
        time_limit: Duration::from_secs(args.time_limit),
        nemesis: nemesis::Kind::parse_list(&args.nemesis)?,
        interval: args.interval,
        heal: (args.heal_min, args.heal_max.max(args.heal_min)),
        max_skew: args.max_skew,
        workload: workload::Kind::parse(&args.workload)?,
        seed,
        concurrency: args.concurrency.max(1),
        keys_active: args.keys_active,
        attempts_per_key: args.attempts_per_key,
        idemd: args.idemd.clone(),
        idemctl: args.idemctl.clone(),
        store: args.store.clone(),
        prefix: args.prefix.clone(),
        keep_data: args.keep_data,
        log_level: args.log_level.clone(),
        plaintext: args.plaintext,
        snapshot_logs: args.snapshot_logs,
        clock_monotonic: args.clock_monotonic,
    };
    eprintln!("seed {seed}");
    let outcome = runner::run(&options)?;
    let Some(results) = outcome.results else {
        eprintln!("interrupted; partial history in {}", outcome.dir.display());
        return Ok(ExitCode::from(130));
    };
    eprint!("{}", results.summary());
    eprintln!(
        "{}: {}",
        if results.valid { "VALID" } else { "INVALID" },
        outcome.dir.display()
    );
    if results.valid && !outcome.problems.is_empty() {
        for problem in &outcome.problems {
            eprintln!("error: {problem}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(verdict(results.valid))
}

fn matrix_summary(dir: &Path) -> anyhow::Result<ExitCode> {
    let matrix = Matrix::read(dir)?;
    for path in matrix.write(dir)? {
        eprintln!("wrote {}", path.display());
    }
    print!("{}", matrix.markdown());
    let (_, invalid, other) = matrix.tally();
    Ok(verdict(invalid + other == 0))
}

fn regions(args: &RegionsArgs) -> anyhow::Result<ExitCode> {
    let options = region_scenario::Options {
        dir: args.dir.clone(),
        rtts: parse_rtts(&args.rtt)?,
        samples: usize::try_from(args.samples)?,
        prefix: args.prefix.clone(),
        idemd: args.idemd.clone(),
        keep_data: args.keep_data,
        log_level: args.log_level.clone(),
    };
    match region_scenario::run(&options) {
        Ok(report) => {
            print!("{}", report.table());
            println!(
                "report: {}",
                report.dir.join(region_scenario::report::FILE).display()
            );
            Ok(verdict(report.passed))
        }
        Err(ScenarioError::Interrupted(signal)) => {
            eprintln!(
                "interrupted by {signal}; cluster torn down, partial report in {}",
                args.dir.display()
            );
            Ok(ExitCode::from(130))
        }
        Err(error) => Err(error.into()),
    }
}

fn cluster(command: ClusterCommand) -> anyhow::Result<ExitCode> {
    match command {
        ClusterCommand::Up(args) => {
            let options = UpOptions {
                nodes: args.nodes,
                regions: args.regions,
                rtts: parse_rtts(&args.rtt)?,
                dir: args.dir,
                prefix: args.prefix,
                idemd: args.idemd,
                fake_clock: args.fake_clock,
                log_level: args.log_level,
            };
            let state = manage::up(&options)?;
            println!("{}", serde_json::to_string_pretty(&state)?);
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Down { dir } => {
            let removed = manage::down(&dir)?;
            eprintln!("removed {removed} namespace(s)");
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Proxies {
            prefix,
            nodes,
            regions,
            rtt,
        } => {
            manage::serve_proxies(&prefix, nodes, regions, &parse_rtts(&rtt)?)?;
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Exec { dir, node, command } => {
            let code = manage::exec(&dir, &node, &command)?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
    }
}

/// The ledger given, or one found beside the history.
fn find_ledger(args: &CheckArgs) -> Option<PathBuf> {
    if args.ledger.is_some() {
        return args.ledger.clone();
    }
    let dir = args.history.parent().unwrap_or(Path::new("."));
    ["ledger.edn", "ledger.jsonl", "ledger.json"]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

fn check(args: &CheckArgs) -> anyhow::Result<bool> {
    let history = History::read(&args.history)?;
    let ledger = find_ledger(args)
        .map(|path| Ledger::read(&path))
        .transpose()?;
    let options = Options {
        linearizable: SearchBudget {
            max_steps_per_key: args.max_steps,
            time_limit: Duration::from_secs(args.time_limit),
        },
    };
    let results = check_all_with(&history, ledger.as_ref(), &options);
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        results.write(out)?;
        if !args.no_plots {
            plot::write_plots(&history, out)?;
            if !plot::text_available() {
                eprintln!("note: no font found (install fonts-dejavu-core or set IDEM_JEPSEN_FONT); plots drawn without text");
            }
        }
    }
    println!("{}", results.to_json_pretty());
    eprint!("{}", results.summary());
    Ok(results.valid)
}
