//! The node-to-node port: every group's Raft RPCs and the `Forward` service, served before
//! bootstrap so peers can reach the node from the start.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::listen::incoming;
use crate::groups::{ForwardService, GroupSet};
use crate::limits::LimitsConfig;
use crate::metrics::Metrics;
use crate::tls::{port_incoming, ReloadingTls};

/// The Raft port: the Raft RPCs of every group this node serves and the `Forward` service.
pub(super) struct RaftPort {
    groups: GroupSet,
    stop: CancellationToken,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl RaftPort {
    pub(super) fn spawn(
        limits: &LimitsConfig,
        metrics: &std::sync::Arc<Metrics>,
        groups: GroupSet,
        listener: TcpListener,
        tls: Option<Arc<ReloadingTls>>,
        auth: crate::auth::AuthMode,
    ) -> Self {
        let stop = CancellationToken::new();
        let options = idem_raft::NetworkOptions {
            keepalive_interval: limits.keepalive_interval,
            keepalive_timeout: limits.keepalive_timeout,
            ..idem_raft::NetworkOptions::default()
        };
        let metrics = std::sync::Arc::clone(metrics);
        let raft = idem_raft::RaftService::new(groups.registry().clone())
            .with_max_snapshot_bytes(limits.max_snapshot_bytes)
            .on_refusal(std::sync::Arc::new(move |reason: &'static str| {
                metrics
                    .limit_refusals
                    .with_label_values(&[reason, "snapshot"])
                    .inc();
            }));
        let server = idem_raft::server_builder(&options)
            .max_concurrent_streams(limits.max_concurrent_streams)
            .add_service(raft.into_server())
            .add_service(ForwardService::server(groups.clone(), auth))
            .serve_with_incoming_shutdown(
                port_incoming(incoming(listener), tls),
                stop.clone().cancelled_owned(),
            );
        RaftPort {
            groups,
            stop,
            task: tokio::spawn(server),
        }
    }

    /// Stops serving (after Raft shut down, so peers see it unreachable, not half-alive).
    pub(super) async fn stop(self) {
        self.groups.unregister_all();
        self.stop.cancel();
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "raft port stopped with an error"),
            Ok(Err(e)) => tracing::warn!(error = %e, "raft port task failed"),
            Err(_elapsed) => tracing::warn!("raft port did not stop within 5s"),
        }
    }
}
