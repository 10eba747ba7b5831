//! Graceful shutdown on SIGTERM or SIGINT.
//!
//! One [`CancellationToken`] per node is the single shutdown signal: the gRPC and HTTP
//! servers stop accepting and drain, long polls (`Wait`) answer at once, the sweep stops.
//! The node then waits (bounded by `shutdown_grace`) for the servers to finish, shuts Raft
//! down and drops the store, which closes RocksDB.

use tokio_util::sync::CancellationToken;

/// Waits for SIGTERM or SIGINT, then cancels `token`. Returns the signal's name.
pub async fn on_signal(token: CancellationToken) -> &'static str {
    let name = wait_for_signal().await;
    tracing::info!(signal = name, "shutdown requested");
    token.cancel();
    name
}

#[cfg(unix)]
async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(term), Ok(int)) => (term, int),
        _ => {
            tracing::error!("cannot install signal handlers; stop the node with SIGKILL");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> &'static str {
    let _ = tokio::signal::ctrl_c().await;
    "ctrl-c"
}
