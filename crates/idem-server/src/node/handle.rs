//! A running node: its bound addresses, its groups, and an orderly shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::error::NodeError;
use super::grpc::GrpcTask;
use super::raft_port::RaftPort;
use crate::backend::Backend;
use crate::groups::{GroupSet, Router};
use crate::metrics::Metrics;
use crate::replica::Raft;

/// A running node.
pub struct NodeHandle {
    /// This node's Raft id (the same in every group).
    pub(super) node_id: u64,
    /// The bound gRPC API address (the real port when configured with port 0).
    pub(super) api_addr: SocketAddr,
    /// The bound HTTP address (`/metrics`, `/healthz`).
    pub(super) http_addr: SocketAddr,
    /// The bound Raft address, as recorded in the membership.
    pub(super) raft_addr: SocketAddr,
    /// The global group's Raft handle (tests read its metrics).
    pub(super) raft: Raft,
    /// Every group this node runs; shut down one by one at the end.
    pub(super) groups: GroupSet,
    /// The node-to-node port; stopped only after Raft, so peers never see a half-alive node.
    pub(super) raft_port: RaftPort,
    /// The backend the API runs on: the router over the groups.
    pub(super) backend: Arc<Router>,
    /// The node's metrics registry.
    pub(super) metrics: Arc<Metrics>,
    /// Cancelled to stop the node (SIGTERM does it); every task watches it.
    pub(super) shutdown: CancellationToken,
    /// True while the health reporter sees a ready node (read by `/healthz`).
    pub(super) serving: Arc<AtomicBool>,
    /// How long in-flight requests may take to finish after shutdown begins.
    pub(super) grace: Duration,
    /// The gRPC server task.
    pub(super) grpc: GrpcTask,
    /// The HTTP server task.
    pub(super) http: JoinHandle<io::Result<()>>,
    /// The sweep, the steward, the provisioner and the health reporter.
    pub(super) background: Vec<JoinHandle<()>>,
}

impl NodeHandle {
    /// This node's Raft id.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The bound gRPC API address (the real port when configured with port 0).
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// The bound HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The bound Raft address (recorded in the membership).
    pub fn raft_addr(&self) -> SocketAddr {
        self.raft_addr
    }

    /// The Raft handle (metrics, tests).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The backend the API runs on.
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    /// The node's metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Cancelling this token shuts the node down (what SIGTERM does in `idemd`).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// True while the node reports SERVING on gRPC health (Raft runs, a leader is known).
    pub fn is_serving(&self) -> bool {
        self.serving.load(Ordering::SeqCst)
    }

    /// Waits until the node reports SERVING (for a single node: once it elected itself), at
    /// most `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), NodeError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.is_serving() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(NodeError::Raft(format!(
                    "no leader after {}",
                    crate::config::format_duration(timeout)
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Shuts the node down now and waits until it has stopped.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        self.shutdown.cancel();
        self.stopped().await
    }

    /// Waits for the shutdown token (a signal, or [`Self::shutdown`]), then stops the node:
    /// servers drain within the grace period, Raft shuts down, the store closes. A server
    /// that stops on its own also stops the node, and is reported as the error.
    pub async fn stopped(self) -> Result<(), NodeError> {
        let NodeHandle {
            raft,
            groups,
            raft_port,
            backend,
            shutdown,
            grace,
            grpc,
            http,
            background,
            ..
        } = self;
        let (mut grpc, mut http) = (grpc, http);
        let ended = tokio::select! {
            // A server ends by itself once the token is cancelled: look at the token first.
            biased;
            () = shutdown.cancelled() => Ended::Shutdown,
            joined = &mut grpc => Ended::Server("gRPC", flatten_result("gRPC", joined)),
            joined = &mut http => Ended::Server("HTTP", flatten_result("HTTP", joined)),
        };
        let (mut grpc, mut http) = (Some(grpc), Some(http));
        let mut failure = None;
        if let Ended::Server(what, result) = ended {
            if what == "gRPC" {
                grpc = None;
            } else {
                http = None;
            }
            let error = result.err().unwrap_or(NodeError::Serve {
                what,
                message: "stopped unexpectedly".into(),
            });
            tracing::error!(%error, "a server stopped; shutting the node down");
            failure = Some(error);
            shutdown.cancel();
        }
        tracing::info!(
            grace = %crate::config::format_duration(grace),
            "shutting down: draining in-flight requests"
        );
        let drained = tokio::time::timeout(grace, async {
            let g = join_server("gRPC", grpc.as_mut()).await;
            let h = join_server("HTTP", http.as_mut()).await;
            g.and(h)
        })
        .await;
        match drained {
            Ok(Ok(())) => {}
            Ok(Err(error)) => failure = failure.or(Some(error)),
            Err(_elapsed) => {
                tracing::warn!("grace period over; cutting off remaining requests");
                for task in [
                    grpc.as_ref().map(JoinHandle::abort_handle),
                    http.as_ref().map(JoinHandle::abort_handle),
                ]
                .into_iter()
                .flatten()
                {
                    task.abort();
                }
            }
        }
        finish(raft, groups, raft_port, backend, background, failure).await
    }
}

/// How waiting for the shutdown signal ended.
pub(super) enum Ended {
    /// The token was cancelled.
    Shutdown,
    /// A server task ended first.
    Server(&'static str, Result<(), NodeError>),
}

pub(super) async fn join_server<E: std::fmt::Display>(
    what: &'static str,
    task: Option<&mut JoinHandle<Result<(), E>>>,
) -> Result<(), NodeError> {
    match task {
        Some(task) => flatten_result(what, task.await),
        None => Ok(()),
    }
}

pub(super) fn flatten_result<E: std::fmt::Display>(
    what: &'static str,
    joined: Result<Result<(), E>, tokio::task::JoinError>,
) -> Result<(), NodeError> {
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(NodeError::Serve {
            what,
            message: e.to_string(),
        }),
        Err(e) if e.is_cancelled() => Ok(()),
        Err(e) => Err(NodeError::Serve {
            what,
            message: e.to_string(),
        }),
    }
}

pub(super) async fn finish(
    raft: Raft,
    groups: GroupSet,
    raft_port: RaftPort,
    backend: Arc<Router>,
    background: Vec<JoinHandle<()>>,
    failure: Option<NodeError>,
) -> Result<(), NodeError> {
    for task in background {
        let _ = task.await;
    }
    groups.unregister_all();
    for group in groups.all() {
        stop_raft(group.id(), group.raft().clone()).await;
    }
    raft_port.stop().await;
    // The last references to the stores: dropping them closes RocksDB.
    drop(backend);
    drop(groups);
    drop(raft);
    tracing::info!("node stopped");
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Shuts one group's Raft down, in a task of its own: after a fatal storage error, openraft
/// (0.10.0-alpha.37) can panic here. A caller that was cancelled while it waited for the
/// stopped core leaves the core's state half-finished; the next waiter then hits
/// `unreachable!` and poisons the lock that `shutdown` takes. The core is gone by then, so
/// the panic is logged and the node's shutdown goes on (closing its stores).
async fn stop_raft(group: idem_core::placement::GroupId, raft: Raft) {
    match tokio::spawn(async move { raft.shutdown().await }).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(group, error = %e, "raft did not shut down cleanly"),
        Err(e) => tracing::error!(
            group,
            error = %e,
            "raft's shutdown panicked (its core had already stopped, e.g. after a storage failure)"
        ),
    }
}
