//! Drives one measured run: the pool of completed keys, the warm-up, closed- or open-loop load,
//! the measurement window and the node probes.
//!
//! - **Closed loop** (`--clients N`): N clients each send the next operation as soon as the
//!   last one answered. This is how throughput against concurrency is measured, and how a
//!   fixed pool of workers behaves.
//! - **Open loop** (`--rate R`): operations start on a fixed schedule whatever the answers,
//!   at most `--clients` in flight. Latency is measured from each operation's *intended*
//!   start, so a stalled store shows up as latency instead of as fewer samples (no
//!   coordinated omission); operations that could not even be sent by the end are `unsent`.
//!
//! Operations that start during the warm-up run but are not recorded; the window is
//! `--duration` long after it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::backend::Backend;
use crate::error::BenchError;
use crate::node::{self, NodeSpec};
use crate::preload;
use crate::progress::Progress;
use crate::results::RunResult;
use crate::stats::Recorder;
use crate::workload::{execute, KeySpace, Shape, Workload};
use idem_testkit::Rng;

/// Open-loop runs stop sending this long after the window closed, whatever is left.
const OPEN_LOOP_GRACE: Duration = Duration::from_secs(1);

/// Concurrency of the pool fill before a run.
const POOL_FILL_CONCURRENCY: usize = 64;

/// One run to measure.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// The workload.
    pub workload: Workload,
    /// Its knobs.
    pub shape: Shape,
    /// Clients (closed loop) or most operations in flight (open loop).
    pub clients: usize,
    /// Target operations per second: open loop when set.
    pub rate: Option<f64>,
    /// The measurement window.
    pub duration: Duration,
    /// Unrecorded load before the window.
    pub warmup: Duration,
    /// Seed of the key choices.
    pub seed: u64,
    /// Unique prefix of this run's keys.
    pub prefix: String,
    /// Server processes whose CPU and memory are reported.
    pub nodes: Vec<NodeSpec>,
}

/// Everything a run's tasks share.
struct Shared<B> {
    keys: KeySpace,
    recorder: Mutex<Recorder>,
    started_ops: Arc<AtomicU64>,
    conns: Vec<Arc<B>>,
}

/// Runs `spec` against `conns`.
pub async fn run<B: Backend>(conns: &[Arc<B>], spec: &LoadSpec) -> Result<RunResult, BenchError> {
    let pool = if spec.workload.needs_pool(&spec.shape) {
        fill_pool(conns, spec).await?
    } else {
        Vec::new()
    };
    let shared = Arc::new(Shared {
        keys: KeySpace::new(spec.prefix.clone(), pool, spec.shape.hot_keys),
        recorder: Mutex::new(Recorder::default()),
        started_ops: Arc::new(AtomicU64::new(0)),
        conns: conns.to_vec(),
    });
    let start = Instant::now();
    let window = start + spec.warmup;
    let end = window + spec.duration;
    let label = format!(
        "{} {} {}",
        B::NAME,
        spec.workload.name(),
        spec.rate
            .map_or(format!("c={}", spec.clients), |r| format!("rate={r}")),
    );
    let progress = Progress::timed(
        label,
        spec.warmup + spec.duration,
        shared.started_ops.clone(),
    );
    let (cpu_start, unsent) = match spec.rate {
        None => closed_loop(&shared, spec, window, end).await,
        Some(rate) => open_loop(&shared, spec, rate, window, end).await?,
    };
    drop(progress);
    let recorder = shared.recorder.lock().unwrap_or_else(|p| p.into_inner());
    let ops = recorder.ops();
    let nodes = node::finish(&spec.nodes, &cpu_start, ops);
    let machine = node::machine(&cpu_start, nodes.iter().map(|n| n.cpu_ms).sum());
    Ok(RunResult {
        workload: spec.workload,
        mode: if spec.rate.is_some() {
            "open"
        } else {
            "closed"
        }
        .into(),
        clients: spec.clients,
        target_rate: spec.rate,
        dup_share: spec.shape.dup_share,
        hot_keys: spec.shape.hot_keys,
        duration_s: spec.duration.as_secs_f64(),
        ops,
        throughput: ops as f64 / spec.duration.as_secs_f64(),
        unsent,
        counts: recorder.counts().clone(),
        latency: recorder.latencies().into_iter().collect::<BTreeMap<_, _>>(),
        nodes,
        machine,
        first_error: recorder.first_error().map(str::to_owned),
    })
}

/// Completes `--pool` keys before the run, so that retries have something to replay.
async fn fill_pool<B: Backend>(
    conns: &[Arc<B>],
    spec: &LoadSpec,
) -> Result<Vec<String>, BenchError> {
    let prefix = spec.prefix.clone();
    let count = spec.shape.pool.max(1) as u64;
    let loaded = preload::load(
        conns,
        move |i| KeySpace::pool_key(&prefix, i),
        count,
        POOL_FILL_CONCURRENCY,
        None,
    )
    .await;
    if loaded.errors > 0 {
        return Err(BenchError::Setup(format!(
            "filling the pool of completed keys: {} errors, first: {}",
            loaded.errors,
            loaded.first_error.unwrap_or_default()
        )));
    }
    Ok((0..count)
        .map(|i| KeySpace::pool_key(&spec.prefix, i))
        .collect())
}

/// N clients back to back; returns the CPU counters at the window's start and 0 unsent.
async fn closed_loop<B: Backend>(
    shared: &Arc<Shared<B>>,
    spec: &LoadSpec,
    window: Instant,
    end: Instant,
) -> (node::Window, u64) {
    let mut tasks = Vec::with_capacity(spec.clients);
    for client in 0..spec.clients {
        let shared = shared.clone();
        let (workload, shape) = (spec.workload, spec.shape);
        let mut rng = Rng::stream(spec.seed, client as u64);
        tasks.push(tokio::spawn(async move {
            let conn = shared.conns[client % shared.conns.len()].clone();
            loop {
                let started = Instant::now();
                if started >= end {
                    break;
                }
                let step = workload.pick(&shape, &mut rng);
                let record = (started >= window).then_some(&shared.recorder);
                execute(&*conn, &shared.keys, step, &mut rng, started, record).await;
                shared.started_ops.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep_until(window.into()).await;
    let cpu_start = node::start(&spec.nodes);
    for task in tasks {
        let _ = task.await;
    }
    (cpu_start, 0)
}

/// Operations on a fixed schedule of `rate` per second, at most `clients` in flight; returns
/// the CPU counters at the window's start and the operations never sent.
async fn open_loop<B: Backend>(
    shared: &Arc<Shared<B>>,
    spec: &LoadSpec,
    rate: f64,
    window: Instant,
    end: Instant,
) -> Result<(node::Window, u64), BenchError> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(BenchError::Argument(format!(
            "--rate must be positive, got {rate}"
        )));
    }
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = window - spec.warmup;
    let total = ((end - start).as_secs_f64() * rate) as u64;
    let in_flight = Arc::new(Semaphore::new(spec.clients.max(1)));
    let mut picker = Rng::stream(spec.seed, u64::MAX);
    let mut cpu_start = None;
    let mut sent = 0u64;
    while sent < total {
        let intended = start + interval.mul_f64(sent as f64);
        if Instant::now() > end + OPEN_LOOP_GRACE {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        if cpu_start.is_none() && intended >= window {
            cpu_start = Some(node::start(&spec.nodes));
        }
        let permit = in_flight
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let step = spec.workload.pick(&spec.shape, &mut picker);
        let mut rng = Rng::stream(spec.seed, sent);
        let shared = shared.clone();
        let conn = shared.conns[sent as usize % shared.conns.len()].clone();
        tokio::spawn(async move {
            let record = (intended >= window).then_some(&shared.recorder);
            execute(&*conn, &shared.keys, step, &mut rng, intended, record).await;
            shared.started_ops.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
        sent += 1;
    }
    let all = u32::try_from(spec.clients.max(1)).unwrap_or(u32::MAX);
    let _ = in_flight.acquire_many(all).await;
    let cpu_start = cpu_start.unwrap_or_else(|| node::start(&spec.nodes));
    Ok((cpu_start, total - sent))
}
