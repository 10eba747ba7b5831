//! The node's HTTP port: `/metrics` (Prometheus text format) and `/healthz`.
//!
//! Kept apart from the gRPC port so that scrapers and load-balancer probes need no gRPC
//! client and cannot be starved by API traffic. `/healthz` answers 200 only when the node
//! can serve: Raft runs (no fatal storage error) and a leader is known; otherwise 503 with
//! the reason, so a probe takes the node out of rotation during an election or after a
//! storage failure (the reason follows). A node whose disk is below its reserve stays 200
//! (it serves reads and replays) and says so after the leader (`; disk full: ...`).

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::limits::DiskGuard;
use crate::metrics::Metrics;
use crate::stats::StatsCache;
use crate::usage::Usage;

/// What the HTTP handlers read.
#[derive(Clone)]
pub struct HttpState {
    /// The replicated store.
    pub backend: Arc<dyn Backend>,
    /// The node's metrics.
    pub metrics: Arc<Metrics>,
    /// Record statistics, shared with `Admin.Status`.
    pub stats: Arc<StatsCache>,
    /// The data directory, measured for `idem_data_dir_bytes` and `idem_snapshot_bytes`.
    pub data_dir: PathBuf,
    /// The free-space guard, sampled by `/metrics` and reported by `/healthz`.
    pub disk: Arc<DiskGuard>,
}

/// The router of the HTTP port.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    state.metrics.set_raft(&state.backend.raft_status());
    match state.stats.get(Arc::clone(&state.backend)).await {
        Ok(stats) => state
            .metrics
            .set_records(&stats, state.backend.now().millis()),
        Err(error) => tracing::warn!(%error, "record statistics unavailable for /metrics"),
    }
    let data_dir = state.data_dir.clone();
    let disk = Arc::clone(&state.disk);
    let sampled = tokio::task::spawn_blocking(move || {
        disk.free_bytes();
        Usage::sample(&data_dir)
    });
    match sampled.await {
        Ok(usage) => state.metrics.set_usage(&usage),
        Err(error) => tracing::warn!(%error, "disk usage unavailable for /metrics"),
    }
    (
        [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
        state.metrics.render(),
    )
}

/// What `/healthz` adds while the disk guard refuses writes: the node still serves reads
/// and replays, so it stays in rotation (200), and says why its writes fail.
fn disk_note(disk: &DiskGuard) -> String {
    if disk.is_full() {
        format!(
            "; disk full: {} bytes free, reserve {}: writes refused (DISK_FULL)",
            disk.free_bytes(),
            disk.reserve()
        )
    } else {
        String::new()
    }
}

async fn healthz(State(state): State<HttpState>) -> impl IntoResponse {
    let status = state.backend.raft_status();
    if !status.running {
        let why = status.stopped.as_deref().unwrap_or("unknown");
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unavailable: raft stopped: {why}\n"),
        )
    } else if let Some(leader) = status.leader_id {
        (
            StatusCode::OK,
            format!("ok: leader {leader}{}\n", disk_note(&state.disk)),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable: no raft leader\n".to_owned(),
        )
    }
}
