//! `idem-jepsen regions`: the multi-region scenario, scripted, with its figures.
//!
//! Why a scenario and not a workload under a random nemesis: the multi-region claims are
//! *comparative and ordered*. Affinity saves one inter-region round trip *compared with*
//! global mode; a replica answers a retry *instead of* the leader; cutting off a home region
//! puts *its* group in failover, which guards HIGH-risk claims *until* the region returns.
//! Each needs a prepared state, a measurement and a check, in an order a random schedule
//! would not give. The steps, on 5 nodes in 3 emulated regions (`r1`: n1 n4, `r2`: n2 n5,
//! `r3`: n3) built by the same code as `idem-jepsen cluster up --regions 3 --rtt ...`
//! ([`crate::cluster::manage::spec`], [`crate::cluster::Cluster`]):
//!
//! 1. [`latency`]: claim+complete latency in global mode, then in region-affinity mode for a
//!    tenant homed in the client's region;
//! 2. [`replay`]: retries of completed keys answered by a replica in another region, against
//!    first claims through the same node;
//! 3. [`race`]: concurrent first claims of one key from all three regions;
//! 4. [`isolation`]: the home region cut off, then healed: failover, the HIGH-risk guard,
//!    NORMAL claims, the return home, with their timings;
//! 5. [`verdict`]: the history of every call, judged (no key acquired twice; the jepsen
//!    checkers).
//!
//! **Where clients run.** On the hub, which reaches every node without delay: a client
//! pinned to a node of region R ([`node_client`]) is a client in region R, and the region
//! delays lie between nodes, where a real deployment has them.
//!
//! A run writes into its directory: `regions.json` (the [`report`]), `history.edn`/`.json`,
//! `results.json`/`.edn`, `latency.png`/`rate.png` (the partition shaded), and each node's
//! config and log under `n<i>/`. The cluster is torn down on every path (end, error, panic,
//! SIGINT/SIGTERM). A step that fails half-way is a failed check, and the steps after it are
//! skipped; the exit status is 0 only when every check passed.

pub mod call_error;
pub mod check;
pub mod context;
pub mod emulation;
pub mod error;
pub mod group_view;
pub mod isolation;
pub mod latency;
pub mod node_client;
pub mod observer;
pub mod race;
pub mod replay;
pub mod report;
pub mod roles;
pub mod series;
pub mod summary;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use context::Context;
use emulation::Emulation;
use error::ScenarioError;
use report::Report;
use verdict::HistoryVerdict;

use crate::cluster::manage::{self, UpOptions};
use crate::cluster::Cluster;
use crate::history::Recorder;
use crate::{check_all, plot, runner};

/// Nodes of the emulated cluster.
pub const NODES: usize = 5;
/// Regions of the emulated cluster (nodes placed round-robin: 2 + 2 + 1).
pub const REGIONS: usize = 3;

/// What `idem-jepsen regions` takes.
#[derive(Debug, Clone)]
pub struct Options {
    /// The run directory (report, history, node configs and logs).
    pub dir: PathBuf,
    /// RTTs between regions, as for `cluster up --rtt`.
    pub rtts: Vec<Duration>,
    /// Samples per latency series, rounds of concurrent claims per tenant.
    pub samples: usize,
    /// Namespace prefix.
    pub prefix: String,
    /// The idemd binary (default: next to this executable).
    pub idemd: Option<PathBuf>,
    /// Keep the nodes' data directories.
    pub keep_data: bool,
    /// idemd log filter.
    pub log_level: String,
}

/// Runs the scenario and returns its report (also written to `DIR/regions.json`). `Err`
/// when it could not run or was interrupted (a partial report is written then too, when the
/// cluster was up).
pub fn run(options: &Options) -> Result<Report, ScenarioError> {
    let started = Instant::now();
    let spec = manage::spec(&UpOptions {
        nodes: NODES,
        regions: REGIONS,
        rtts: options.rtts.clone(),
        dir: options.dir.clone(),
        prefix: options.prefix.clone(),
        idemd: options.idemd.clone(),
        fake_clock: false,
        log_level: options.log_level.clone(),
    })?;
    let dir = spec.dir.clone();
    let cluster = Arc::new(Cluster::create(&spec)?);
    cluster.enter_hub()?;
    let recorder = Arc::new(Recorder::create_file(&dir.join("history.edn"))?);
    let mut report = Report::new(&dir, Emulation::of(&spec, &cluster), options.samples);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ScenarioError::Cluster(e.into()))?;
    let outcome = runtime.block_on(async {
        tokio::select! {
            r = steps(&cluster, &recorder, options.samples, &mut report) => r,
            s = runner::interrupted() => Err(ScenarioError::Interrupted(s)),
        }
    });
    cluster.stop_all(Duration::from_secs(2));
    cluster.teardown();
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(cluster);
    if !options.keep_data {
        runner::remove_data_dirs(&dir);
    }
    let history = runner::finish_history(recorder, &dir)?;
    if let Err(error) = &outcome {
        report.check(
            "run",
            "the scenario ran to its end",
            false,
            error.to_string(),
        );
    }
    if report.roles.is_some() {
        judge(&history, &dir, &mut report);
    }
    report.finish(started.elapsed().as_secs_f64());
    report.write(&dir)?;
    outcome.map(|()| report)
}

/// Boots the cluster and runs the steps; a failed step is a failed check.
async fn steps(
    cluster: &Arc<Cluster>,
    recorder: &Arc<Recorder>,
    samples: usize,
    report: &mut Report,
) -> Result<(), ScenarioError> {
    let (_proxies, leader) = cluster.boot(Duration::from_secs(60)).await?;
    let ctx = Context::new(Arc::clone(cluster), Arc::clone(recorder), samples, leader)?;
    report.roles = Some(ctx.roles.clone());
    eprintln!("cluster up: {}", report.emulation.describe());
    if let Err((step, error)) = run_steps(&ctx, report).await {
        report.check(
            step,
            format!("the {step} step ran to its end"),
            false,
            error.to_string(),
        );
    }
    Ok(())
}

/// Steps 1 to 4, in order; stops at the first that fails, naming it.
async fn run_steps(
    ctx: &Context,
    report: &mut Report,
) -> Result<(), (&'static str, ScenarioError)> {
    let latency = latency::run(ctx, report)
        .await
        .map_err(|e| ("latency", e))?;
    report.latency = Some(latency.clone());
    let completed = &latency.affinity.completed;
    let replay = replay::run(ctx, latency.group, completed, report)
        .await
        .map_err(|e| ("replay", e))?;
    report.replay = Some(replay);
    for tenant in [&ctx.roles.bound_tenant, &ctx.roles.global_tenant] {
        let race = race::run(ctx, tenant, report)
            .await
            .map_err(|e| ("race", e))?;
        report.race.push(race);
    }
    let isolation = isolation::run(ctx, latency.group, completed, report)
        .await
        .map_err(|e| ("isolation", e))?;
    report.isolation = Some(isolation);
    Ok(())
}

/// Judges the history and draws the plots.
fn judge(history: &crate::History, dir: &Path, report: &mut Report) {
    let results = check_all(history, None);
    if let Err(e) = results.write(dir) {
        eprintln!("results: {e}");
    }
    if let Err(e) = plot::write_plots(history, dir) {
        eprintln!("plots: {e}");
    }
    let verdict = HistoryVerdict::of(history, &results);
    verdict.add_checks(report);
    report.history = Some(verdict);
}
