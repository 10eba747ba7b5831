//! The public gRPC port: Idempotency, Admin, Backup, gRPC health and reflection, and the task
//! that keeps the health status in step with Raft.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_proto::v1::admin_server::AdminServer;
use idem_proto::v1::backup_server::BackupServer;
use idem_proto::v1::idempotency_server::IdempotencyServer;
use openraft::async_runtime::WatchReceiver;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic_health::ServingStatus;

use super::error::NodeError;
use super::listen::incoming;
use crate::api::{
    request_too_large_layer, AdminService, ApiContext, BackupService, IdempotencyService,
    StreamBounds,
};
use crate::auth::AuthLayer;
use crate::config::Config;
use crate::groups::GroupSet;
use crate::limits::AdmissionLayer;
use crate::replica::Raft;
use crate::tls::{identity_layer, port_incoming, ReloadingTls, TlsSource};

/// How often the health reporter looks at Raft.
pub(super) const HEALTH_POLL: Duration = Duration::from_secs(1);

pub(super) type GrpcTask = JoinHandle<Result<(), tonic::transport::Error>>;

/// Builds and spawns the gRPC server; returns it with its health reporter.
pub(super) fn spawn_grpc(
    config: &Config,
    ctx: Arc<ApiContext>,
    auth: AuthLayer,
    groups: GroupSet,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(GrpcTask, tonic_health::server::HealthReporter), NodeError> {
    let tls = ReloadingTls::watched("API", config.tls.clone().map(TlsSource::Api))?;
    let admission = AdmissionLayer::new(config.limits.max_in_flight, Arc::clone(&ctx.metrics));
    let limit = config.max_request_bytes;
    let idempotency = IdempotencyServer::new(IdempotencyService::new(Arc::clone(&ctx)))
        .max_decoding_message_size(limit);
    let bounds = StreamBounds {
        idle: config.limits.backup_idle_timeout,
        total: config.limits.backup_max_duration,
    };
    let backup = BackupServer::new(BackupService::new(
        Arc::clone(&ctx),
        groups,
        config.node_id,
        bounds,
    ))
    .max_decoding_message_size(limit);
    let admin = AdminServer::new(AdminService::new(ctx)).max_decoding_message_size(limit);
    let (reporter, health) = tonic_health::server::health_reporter();
    let reflection_error = |e: tonic_reflection::server::Error| NodeError::Serve {
        what: "gRPC reflection",
        message: e.to_string(),
    };
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(idem_proto::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(reflection_error)?;
    // Older grpcurl versions only speak v1alpha.
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(idem_proto::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(reflection_error)?;
    let server = tonic::transport::Server::builder()
        .max_concurrent_streams(config.limits.max_concurrent_streams)
        .http2_keepalive_interval(Some(config.limits.keepalive_interval))
        .http2_keepalive_timeout(Some(config.limits.keepalive_timeout))
        .layer(admission)
        .layer(identity_layer())
        .layer(request_too_large_layer())
        .layer(auth)
        .add_service(idempotency)
        .add_service(admin)
        .add_service(backup)
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(
            port_incoming(incoming(listener), tls),
            shutdown.cancelled_owned(),
        );
    Ok((tokio::spawn(server), reporter))
}

/// The gRPC health service names a node reports: the whole server (`""`) and each API.
pub(super) fn health_names() -> [&'static str; 3] {
    [
        "",
        <IdempotencyServer<IdempotencyService> as NamedService>::NAME,
        <AdminServer<AdminService> as NamedService>::NAME,
    ]
}

/// Keeps the gRPC health status in line with Raft: SERVING while Raft runs and a leader
/// is known, NOT_SERVING otherwise and from the start of shutdown. `serving` mirrors what
/// was last reported, so [`NodeHandle::wait_ready`] returns only once clients see SERVING.
pub(super) async fn report_health(
    raft: Raft,
    reporter: tonic_health::server::HealthReporter,
    serving: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
    let mut metrics = raft.metrics();
    let mut current = None;
    let mut raft_gone = false;
    loop {
        let ready = !raft_gone && !shutdown.is_cancelled() && {
            let m = metrics.borrow_watched();
            m.running_state.is_ok() && m.current_leader.is_some()
        };
        if current != Some(ready) {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            for name in health_names() {
                reporter.set_service_status(name, status).await;
            }
            serving.store(ready, Ordering::SeqCst);
            tracing::info!(serving = ready, "health status changed");
            current = Some(ready);
        }
        if shutdown.is_cancelled() {
            return;
        }
        if raft_gone {
            shutdown.cancelled().await;
            continue;
        }
        tokio::select! {
            () = shutdown.cancelled() => {}
            changed = metrics.changed() => raft_gone = changed.is_err(),
            // A fallback in case a change notification is ever missed.
            () = tokio::time::sleep(HEALTH_POLL) => {}
        }
    }
}
