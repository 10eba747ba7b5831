//! The `test` subcommand: one complete Jepsen-style run.
//!
//! 1. Check root and system tools; draw the nemesis schedule from the seed.
//! 2. Build the namespaced cluster, move the harness into the hub namespace, start the ledger
//!    service and the nodes, wait for health and a leader.
//! 3. Run the workload's workers and the nemesis for `--time-limit`.
//! 4. Heal everything, wait for the cluster to recover, read every key through it.
//! 5. Stop the nodes, tear the network down, check the history against the ledger, and write
//!    `store/<run>/`: `history.edn`, `history.json`, `ledger.edn`, `results.json`,
//!    `results.edn`, `latency.png`, `rate.png`, `schedule.txt`, `nodes/n*/idemd.log`.
//!
//! The verdict is the exit status: 0 valid, 1 invalid, 2 the test could not run, 130
//! interrupted. Namespaces and processes are removed on every path: normal end, error, panic
//! (the cluster's drop guard) and SIGINT/SIGTERM.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cluster::config::Timings;
use crate::cluster::regions::Regions;
use crate::cluster::security::SecurityMode;
use crate::cluster::{health, tools, Cluster, ClusterSpec};
use crate::history::Recorder;
use crate::ledger::Ledger;
use crate::ledger_service::{LedgerClient, LedgerService};
use crate::nemesis::membership::Membership;
use crate::nemesis::{self, Nemesis, Schedule};
use crate::workload::worker::{client_for, final_reads, pooled_client};
use crate::workload::{self, KeyPool, Shared, Worker};
use crate::{check_all, plot, History, Results};

/// Everything `idem-jepsen test` takes.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// Number of nodes.
    pub nodes: usize,
    /// Number of regions.
    pub regions: usize,
    /// RTTs between regions (empty: none).
    pub rtts: Vec<Duration>,
    /// Length of the workload.
    pub time_limit: Duration,
    /// Enabled nemesis kinds.
    pub nemesis: Vec<nemesis::Kind>,
    /// Time between fault starts.
    pub interval: Duration,
    /// Shortest and longest fault.
    pub heal: (Duration, Duration),
    /// Largest clock offset of the clock nemesis.
    pub max_skew: Duration,
    /// The workload.
    pub workload: workload::Kind,
    /// The seed of every random choice.
    pub seed: u64,
    /// Number of workers.
    pub concurrency: u64,
    /// Keys in use at once.
    pub keys_active: u64,
    /// Attempts before the key window moves.
    pub attempts_per_key: u64,
    /// The idemd binary (default: next to this executable).
    pub idemd: Option<PathBuf>,
    /// The idemctl binary, for the membership nemesis (default: next to this executable).
    pub idemctl: Option<PathBuf>,
    /// Base directory of runs (`store`).
    pub store: PathBuf,
    /// Namespace prefix.
    pub prefix: String,
    /// Keep the nodes' data directories.
    pub keep_data: bool,
    /// idemd log filter.
    pub log_level: String,
    /// Plaintext nodes with authentication off, instead of TLS on both ports and
    /// authentication on (certificates and tokens issued by idemctl).
    pub plaintext: bool,
    /// `raft.snapshot_logs` of the nodes (a low floor: snapshots built and installed while
    /// faults are in force); `None`: idemd's default.
    pub snapshot_logs: Option<u64>,
    /// The clock nemesis moves the nodes' monotonic clocks with their realtime clocks.
    pub clock_monotonic: bool,
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// The run's directory.
    pub dir: PathBuf,
    /// The checkers' results (`None` when interrupted).
    pub results: Option<Results>,
    /// What went wrong besides the checkers' verdict (the cluster did not recover, keys
    /// could not be read at the end): the run proves less than it should.
    pub problems: Vec<String>,
}

/// What the async part hands back.
struct Collected {
    ledger: Ledger,
    problems: Vec<String>,
}

/// Runs one test.
pub fn run(options: &TestOptions) -> anyhow::Result<Outcome> {
    tools::require_root()?;
    // The bitflip nemesis replaces a node that refuses its damaged data through membership
    // changes, as an operator would.
    let changes_members = [nemesis::Kind::Membership, nemesis::Kind::Bitflip]
        .iter()
        .any(|k| options.nemesis.contains(k));
    let membership = if changes_members {
        if options.nodes < 3 {
            bail!("the membership and bitflip nemeses need at least 3 nodes");
        }
        Some(Membership::locate(options.idemctl.as_deref())?)
    } else {
        None
    };
    let fake_clock = options.nemesis.contains(&nemesis::Kind::Clock);
    tools::ensure_tools(tools::Needs {
        faketime: fake_clock,
    })?;
    let idemd = tools::locate_idemd(options.idemd.as_deref())?;
    let security = if options.plaintext {
        SecurityMode::Plaintext
    } else {
        SecurityMode::Secure {
            idemctl: tools::locate_binary("idemctl", options.idemctl.as_deref())?,
            tenant: workload::store::test_scope().tenant().to_owned(),
        }
    };
    let regions = Regions::new(options.nodes, options.regions, &options.rtts)?;
    let timings = Timings::for_rtt(regions.max_rtt());
    let dir = run_dir(&options.store, options.workload.name(), options.seed)?;
    let schedule = Schedule::generate(&schedule_options(options));
    std::fs::write(dir.join("schedule.txt"), schedule.describe())?;
    eprintln!(
        "run: {}\nnemesis schedule:\n{}",
        dir.display(),
        schedule.describe()
    );

    let spec = ClusterSpec {
        prefix: options.prefix.clone(),
        nodes: options.nodes,
        regions,
        idemd,
        dir: dir.join("nodes"),
        timings,
        fake_clock,
        fake_monotonic: options.clock_monotonic,
        fault_disks: options.nemesis.contains(&nemesis::Kind::PowerLoss),
        snapshot_logs: options.snapshot_logs,
        log_level: options.log_level.clone(),
        security,
    };
    let cluster = Arc::new(Cluster::create(&spec)?);
    cluster.enter_hub()?;
    let recorder = Arc::new(Recorder::create_file(&dir.join("history.edn"))?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let body = run_body(
        options,
        Arc::clone(&cluster),
        Arc::clone(&recorder),
        schedule,
        membership,
    );
    let collected = runtime.block_on(async {
        tokio::select! {
            r = body => r.map(Some),
            s = interrupted() => { eprintln!("interrupted by {s}: cleaning up"); Ok(None) }
        }
    });
    cluster.stop_all(Duration::from_secs(2));
    cluster.teardown();
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(cluster);
    let history = finish_history(recorder, &dir)?;
    if !options.keep_data {
        remove_data_dirs(&dir.join("nodes"));
    }
    let Some(collected) = collected? else {
        return Ok(Outcome {
            dir,
            results: None,
            problems: Vec::new(),
        });
    };
    let results = analyse(&dir, &history, &collected)?;
    Ok(Outcome {
        dir,
        results: Some(results),
        problems: collected.problems,
    })
}

fn schedule_options(options: &TestOptions) -> nemesis::schedule::Options {
    nemesis::schedule::Options {
        seed: options.seed,
        variant: nemesis::schedule::variant(options.workload.name(), options.nodes),
        kinds: options.nemesis.clone(),
        interval: options.interval,
        time_limit: options.time_limit,
        nodes: options.nodes,
        regions: options.regions,
        max_skew: options.max_skew,
        heal_min: options.heal.0,
        heal_max: options.heal.1,
    }
}

async fn run_body(
    options: &TestOptions,
    cluster: Arc<Cluster>,
    recorder: Arc<Recorder>,
    schedule: Schedule,
    membership: Option<Membership>,
) -> anyhow::Result<Collected> {
    let topology = cluster.topology.clone();
    let ledger = LedgerService::start(&topology.ledger_addr(), Arc::clone(&recorder)).await?;
    let (_proxies, leader) = cluster.boot(Duration::from_secs(60)).await?;
    let admin = health::admin_client(&topology, &cluster.admin_access())?;
    let all = cluster.ids();
    eprintln!("cluster up: {} node(s), leader n{leader}", all.len());

    let start = Instant::now();
    let endpoints: Vec<String> = all.iter().map(|&i| topology.api_addr(i)).collect();
    let worker_access = cluster.worker_access();
    let shared = Arc::new(Shared {
        recorder: Arc::clone(&recorder),
        keys: KeyPool::new(options.keys_active, options.attempts_per_key),
        ledger: LedgerClient::new(ledger.addr(), Duration::from_secs(5)),
        behaviour: options.workload.behaviour(),
        endpoints: endpoints.clone(),
        access: worker_access.clone(),
        pooled: pooled_client(&endpoints, &worker_access)?,
        admin: client_for(&endpoints, 0, &cluster.admin_access())?,
        concurrency: options.concurrency,
        deadline: start + options.time_limit,
        seed: options.seed,
    });
    let nemesis = Arc::new(Nemesis::new(
        Arc::clone(&cluster),
        Arc::clone(&recorder),
        membership,
    )?);
    let nemesis_task = {
        let nemesis = Arc::clone(&nemesis);
        tokio::spawn(async move { nemesis.run(&schedule, start).await })
    };
    let mut workers = Vec::new();
    for i in 0..options.concurrency {
        let worker = Worker::new(i, Arc::clone(&shared))?;
        workers.push(tokio::spawn(worker.run()));
    }
    for w in workers {
        let _ = w.await;
    }
    eprintln!(
        "workload done after {:.1}s; healing",
        start.elapsed().as_secs_f64()
    );
    // Every planned fault heals by the time limit; wait for the last heals to finish (a
    // membership change may take a few seconds) before healing whatever is left.
    let mut nemesis_task = nemesis_task;
    if tokio::time::timeout(Duration::from_secs(30), &mut nemesis_task)
        .await
        .is_err()
    {
        nemesis_task.abort();
        let _ = nemesis_task.await;
    }
    nemesis.heal_all().await;
    let mut problems = Vec::new();
    if let Err(e) = recover(&admin, &topology, &all).await {
        eprintln!("warning: {e:#}");
        problems.push(format!(
            "the cluster did not recover after the final heal: {e:#}"
        ));
    }
    let keys = shared.keys.used();
    eprintln!("final reads of {} keys", keys.len());
    let first_process = options.concurrency * 1_000_000;
    let reads = final_reads(&endpoints, &worker_access, &recorder, &keys, first_process).await?;
    if !reads.unread.is_empty() {
        problems.push(format!(
            "final reads failed for {} key(s): {:?}",
            reads.unread.len(),
            reads.unread
        ));
    }
    Ok(Collected {
        ledger: ledger.stop(),
        problems,
    })
}

/// Waits for every node to be healthy and agree on a leader again.
async fn recover(
    admin: &idem_client::Client,
    topology: &crate::cluster::netns::Topology,
    all: &[usize],
) -> anyhow::Result<()> {
    health::wait_healthy(topology, all, Duration::from_secs(60)).await?;
    health::wait_leader(admin, topology, all, Duration::from_secs(60)).await?;
    Ok(())
}

/// Waits for SIGINT or SIGTERM and names it (never returns when the handlers cannot be
/// installed). Runs race their body against it, then clean up.
pub async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Ends a run's history: the recorder's, or a snapshot of it when something still holds the
/// recorder (a task that was cut off); also writes `history.json` into `dir`.
pub fn finish_history(recorder: Arc<Recorder>, dir: &Path) -> anyhow::Result<History> {
    let history = match Arc::try_unwrap(recorder) {
        Ok(recorder) => recorder.finish()?,
        Err(shared) => {
            let history = shared.snapshot();
            history.write_edn(&dir.join("history.edn"))?;
            history
        }
    };
    history.write_json(&dir.join("history.json"))?;
    Ok(history)
}

fn analyse(dir: &Path, history: &History, collected: &Collected) -> anyhow::Result<Results> {
    collected.ledger.write_edn(&dir.join("ledger.edn"))?;
    let results = check_all(history, Some(&collected.ledger));
    results.write(dir)?;
    if let Err(e) = plot::write_plots(history, dir) {
        eprintln!("plots: {e}");
    }
    for problem in &collected.problems {
        eprintln!("problem: {problem}");
    }
    Ok(results)
}

/// Creates `store/<timestamp>-<workload>-<seed>/` and points `store/latest` at it.
pub fn run_dir(store: &Path, workload: &str, seed: u64) -> anyhow::Result<PathBuf> {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(['-', ':'], "");
    let name = format!("{stamp}-{workload}-{seed}");
    let dir = store.join(&name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let latest = store.join("latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&name, &latest);
    Ok(dir)
}

/// Removes the `data` directory (and the faultfs backing `disk` directory) of every node
/// directory under `nodes` (configs and logs stay).
pub fn remove_data_dirs(nodes: &Path) {
    let Ok(entries) = std::fs::read_dir(nodes) else {
        return;
    };
    for entry in entries.flatten() {
        for dir in ["data", crate::cluster::DISK_DIR] {
            let _ = std::fs::remove_dir_all(entry.path().join(dir));
        }
    }
}
