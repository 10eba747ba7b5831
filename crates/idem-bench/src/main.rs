//! `idem-bench`: the benchmark harness of idem (issue #7), side by side with etcd and a
//! single-node PostgreSQL (issue #21).
//!
//! idem claims to be the better place for idempotency keys than etcd transactions or a
//! Postgres table; this tool measures that claim on the same machine, with the same
//! workloads against every store (see [`backend`]), closed- or open-loop ([`runner`]), HDR
//! histograms ([`stats`]), a JSON results file ([`results`]), a table, PNG plots ([`plot`])
//! and the comparison with the issues' targets ([`summary`]). `scripts/bench/compare.sh`
//! (`make bench`) drives it; `scripts/bench/builds.sh` drives it to compare builds of idem
//! ([`builds`]).
//!
//! Exit status: 0 done, 2 error (the message is printed).

mod aggregate;
mod backend;
mod builds;
mod cli;
mod error;
mod node;
mod plot;
mod preload;
mod probe;
mod proctree;
mod progress;
mod results;
mod runner;
mod stats;
mod summary;
mod table;
mod workload;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;

use backend::{Backend, EtcdBackend, IdemBackend, PostgresBackend};
use cli::{BackendKind, Cli, Command, LoadArgs, PreloadArgs, TargetArgs};
use error::BenchError;
use probe::Probe;
use progress::Progress;
use results::Report;
use runner::LoadSpec;
use workload::{Shape, Workload};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("idem-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Probe)
}

fn execute(command: Command) -> Result<(), BenchError> {
    match command {
        Command::Run(args) => {
            let sweep = Sweep {
                workloads: vec![args.workload],
                clients: vec![args.clients],
            };
            measure(&args.target, &args.load, &sweep, None)
        }
        Command::Sweep(args) => {
            let sweep = Sweep {
                workloads: args.workloads,
                clients: args.clients,
            };
            measure(&args.target, &args.load, &sweep, args.plots.as_deref())
        }
        Command::Preload(args) => runtime()?.block_on(async {
            match args.target.backend {
                BackendKind::Idem => preload::<IdemBackend>(&args).await,
                BackendKind::Etcd => preload::<EtcdBackend>(&args).await,
                BackendKind::Postgres => preload::<PostgresBackend>(&args).await,
            }
        }),
        Command::FsyncProbe(args) => emit_probe(
            probe::fsync_probe(&args.dir, args.count, args.size, args.append)?,
            args.out.as_deref(),
        ),
        Command::RttProbe(args) => emit_probe(
            probe::rtt_probe(args.count, args.size)?,
            args.out.as_deref(),
        ),
        Command::CompareBuilds(args) => {
            let reports = read_reports(&args.files)?;
            let comparison = builds::BuildComparison::new(&reports, &args.base)?;
            print!("{}", comparison.render());
            Ok(())
        }
        Command::Summarize(args) => {
            let reports = read_reports(&args.files)?;
            let probes = args
                .probe
                .iter()
                .map(|path| {
                    let text =
                        std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
                    serde_json::from_str::<Probe>(&text).map_err(|source| BenchError::Results {
                        path: path.clone(),
                        source,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(dir) = &args.plots {
                let files = plot::draw_all(&aggregate::aggregate(&reports), dir)?;
                eprintln!("plots: {}", display_paths(&files));
            }
            print!("{}", summary::Summary::new(&reports, probes).render());
            Ok(())
        }
        Command::Plot(args) => {
            let reports = read_reports(&args.files)?;
            let files = plot::draw_all(&aggregate::aggregate(&reports), &args.dir)?;
            println!("{}", display_paths(&files));
            Ok(())
        }
    }
}

fn read_reports(files: &[std::path::PathBuf]) -> Result<Vec<Report>, BenchError> {
    files.iter().map(|f| Report::read(f)).collect()
}

fn display_paths(files: &[std::path::PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn emit_probe(probe: Probe, out: Option<&Path>) -> Result<(), BenchError> {
    println!("{}", probe.line());
    if let Some(path) = out {
        let text = serde_json::to_string_pretty(&probe).expect("a probe always serializes");
        std::fs::write(path, text + "\n").map_err(|e| BenchError::io(path, e))?;
    }
    Ok(())
}

/// The points of a `run` (one) or a `sweep` (workloads x clients).
struct Sweep {
    workloads: Vec<Workload>,
    clients: Vec<usize>,
}

fn unix_now() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn check(load: &LoadArgs, sweep: &Sweep, target: &TargetArgs) -> Result<(), BenchError> {
    if !(0.0..=1.0).contains(&load.dup_share) {
        return Err(BenchError::Argument(
            "--dup-share must be within 0.0..=1.0".into(),
        ));
    }
    if sweep.clients.contains(&0) || sweep.clients.is_empty() {
        return Err(BenchError::Argument("--clients must be at least 1".into()));
    }
    if target.connections == 0 {
        return Err(BenchError::Argument(
            "--connections must be at least 1".into(),
        ));
    }
    if load.duration.is_zero() {
        return Err(BenchError::Argument("--duration must be positive".into()));
    }
    Ok(())
}

fn measure(
    target: &TargetArgs,
    load: &LoadArgs,
    sweep: &Sweep,
    plots: Option<&Path>,
) -> Result<(), BenchError> {
    check(load, sweep, target)?;
    let report = runtime()?.block_on(async {
        match target.backend {
            BackendKind::Idem => sweep_on::<IdemBackend>(target, load, sweep).await,
            BackendKind::Etcd => sweep_on::<EtcdBackend>(target, load, sweep).await,
            BackendKind::Postgres => sweep_on::<PostgresBackend>(target, load, sweep).await,
        }
    })?;
    print!("{}", table::render(&report));
    if let Some(path) = &load.out {
        report.write(path)?;
        eprintln!("results: {}", path.display());
    }
    if let Some(dir) = plots {
        let files = plot::draw_all(&aggregate::aggregate(std::slice::from_ref(&report)), dir)?;
        eprintln!("plots: {}", display_paths(&files));
    }
    Ok(())
}

/// Opens `count` connections to the store `target` names.
async fn connect<B: Backend>(target: &TargetArgs, count: usize) -> Result<Vec<Arc<B>>, BenchError> {
    let mut conns = Vec::with_capacity(count);
    for index in 0..count.max(1) {
        conns.push(Arc::new(B::connect(target, index).await?));
    }
    Ok(conns)
}

async fn sweep_on<B: Backend>(
    target: &TargetArgs,
    load: &LoadArgs,
    sweep: &Sweep,
) -> Result<Report, BenchError> {
    // Shared by every run, unless each run gets one connection per client.
    let shared = if load.connection_per_client {
        None
    } else {
        Some(connect::<B>(target, target.connections).await?)
    };
    let started = unix_now();
    let run_id = load
        .run_id
        .clone()
        .unwrap_or_else(|| format!("{}-{}", B::NAME, started.as_millis()));
    let shape = Shape {
        dup_share: load.dup_share,
        hot_keys: load.hot_keys,
        pool: load.pool,
    };
    let mut runs = Vec::new();
    for &workload in &sweep.workloads {
        for &clients in &sweep.clients {
            let spec = LoadSpec {
                workload,
                shape,
                clients,
                rate: load.rate,
                duration: load.duration,
                warmup: load.warmup,
                seed: load.seed,
                prefix: format!("{run_id}-{}-c{clients}", workload.name()),
                nodes: load.watched(),
            };
            let conns = match &shared {
                Some(conns) => conns.clone(),
                None => connect::<B>(target, clients).await?,
            };
            runs.push(runner::run(&conns, &spec).await?);
        }
    }
    Ok(Report {
        backend: B::NAME.to_owned(),
        endpoints: target.endpoints(),
        connections: target.connections,
        connection_per_client: load.connection_per_client,
        label: load.label.clone(),
        started_unix_s: started.as_secs(),
        nproc: std::thread::available_parallelism().map_or(1, usize::from),
        runs,
    })
}

async fn preload<B: Backend>(args: &PreloadArgs) -> Result<(), BenchError> {
    let conns = connect::<B>(&args.target, args.target.connections).await?;
    let prefix = args.prefix.clone();
    let progress = Progress::counted(format!("{} preload", B::NAME), args.records);
    let loaded = preload::load(
        &conns,
        move |i| format!("{prefix}-{i}"),
        args.records,
        args.clients,
        Some(progress),
    )
    .await;
    println!(
        "preloaded {} records into {} in {:.1}s ({:.0} records/s), {} errors",
        loaded.records,
        B::NAME,
        loaded.elapsed.as_secs_f64(),
        loaded.rate(),
        loaded.errors
    );
    match loaded.first_error {
        Some(e) if loaded.records < args.records => {
            Err(BenchError::Setup(format!("preload stopped: {e}")))
        }
        _ => Ok(()),
    }
}
