//! Graceful shutdown on SIGTERM or SIGINT.
//!
//! One [`CancellationToken`] per node is the single shutdown signal: the gRPC and HTTP
//! servers stop accepting and drain, long polls (`Wait`) answer at once, the sweep stops.
//! The node then waits (bounded by `shutdown_grace`) for the servers to finish, shuts Raft
//! down and drops the store, which closes RocksDB.
//!
//! The handlers are installed before the node starts ([`Signals::install`]), not after:
//! a SIGTERM that arrives between "node started" and the first poll of a spawned listener
//! would otherwise meet the default disposition and kill the process without a clean stop.
//! A signal received while the node is still starting is kept and stops it once started.

use tokio_util::sync::CancellationToken;

/// The process's shutdown signal streams, listening from the moment they are installed.
pub struct Signals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Installs the SIGTERM and SIGINT handlers. Call inside the runtime, before the node
    /// starts. If they cannot be installed, the error is logged and only SIGKILL stops the
    /// node.
    #[cfg(unix)]
    pub fn install() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let streams = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Some((term, int)),
            _ => {
                tracing::error!("cannot install signal handlers; stop the node with SIGKILL");
                None
            }
        };
        Self { streams }
    }

    #[cfg(not(unix))]
    pub fn install() -> Self {
        Self {}
    }

    /// Waits for the first SIGTERM or SIGINT, then cancels `token`. Returns the signal's name.
    pub async fn cancel_on_first(self, token: CancellationToken) -> &'static str {
        let name = self.first().await;
        tracing::info!(signal = name, "shutdown requested");
        token.cancel();
        name
    }

    #[cfg(unix)]
    async fn first(self) -> &'static str {
        let Some((mut term, mut int)) = self.streams else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    }

    #[cfg(not(unix))]
    async fn first(self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    }
}
