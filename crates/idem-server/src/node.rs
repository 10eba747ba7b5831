//! One node: open the store, build Raft, bootstrap, serve, shut down.
//!
//! [`Node::start`] is the single entry point used by `idemd` and by tests:
//!
//! 1. **Data directory.** Created if missing. `node.toml` records the node id the directory
//!    belongs to; starting it under another id is refused (exit code 2), because a Raft log
//!    reused under a different identity would corrupt a cluster.
//! 2. **Store and Raft.** `idem_store::open` gives the log store, state machine and reader
//!    over one RocksDB; Raft is built over them with the gRPC transport of `idem-raft`.
//!    The Raft port serves the Raft RPCs and the node-internal `Forward` service
//!    ([`crate::raft::forward_service`]) before bootstrap, so peers can reach the node
//!    from the start.
//! 3. **Bootstrap** ([`crate::cluster`]). If the store holds no Raft state: the node with
//!    the lowest initial-member id (or a node alone) initializes the group; the other
//!    initial members and `join` nodes wait for the leader's replication. Otherwise Raft
//!    recovers from its log and the node waits until the state machine has caught up
//!    with what was committed before the restart — a restarted node never initializes.
//! 4. **Serve.** The gRPC port (Idempotency, Admin, health, reflection), the HTTP port
//!    (`/metrics`, `/healthz`), the expiry sweep and the health reporter run as tasks.
//!
//! [`NodeHandle::shutdown`] (or a cancelled [`NodeHandle::shutdown_token`], which is what
//! SIGTERM does) stops accepting, lets in-flight requests finish within `shutdown_grace`,
//! shuts Raft down, stops the Raft port and closes the store.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_core::placement::GLOBAL_GROUP;
use idem_proto::v1::admin_server::AdminServer;
use idem_proto::v1::idempotency_server::IdempotencyServer;
use idem_store::NodeInfo;
use openraft::async_runtime::WatchReceiver;
use openraft::error::{InitializeError, RaftError};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

use crate::api::convert::BodyLimits;
use crate::api::{request_too_large_layer, AdminService, ApiContext, Backend, IdempotencyService};
use crate::cluster::Bootstrap;
use crate::config::Config;
use crate::failpoint::Failpoints;
use crate::groups::{provisioner, Group, GroupKit, GroupSet, Router, Steward};
use crate::http::{self, HttpState};
use crate::metrics::Metrics;
use crate::raft::forward_service::ForwardService;
use crate::raft::{Raft, Shared};
use crate::stats::StatsCache;
use crate::sweep::{self, SweepConfig};

/// Name of the identity file in the data directory.
pub const IDENTITY_FILE: &str = "node.toml";
/// How long a restarted node may take to re-apply its committed log before serving.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the health reporter looks at Raft.
const HEALTH_POLL: Duration = Duration::from_secs(1);

/// Why a node could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The data directory cannot be created, read or written.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The data directory belongs to another node id.
    #[error("data directory {path} belongs to node {found}; this node is configured as {configured} (node_id); use that id or another data directory")]
    IdentityMismatch {
        /// The data directory.
        path: PathBuf,
        /// The id recorded in it.
        found: u64,
        /// The configured id.
        configured: u64,
    },
    /// The store failed to open.
    #[error("store: {0}")]
    Store(#[from] idem_store::StoreError),
    /// Raft failed to start, bootstrap or recover.
    #[error("raft: {0}")]
    Raft(String),
    /// A listening socket could not be bound.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        /// Which port.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: io::Error,
    },
    /// A server task failed.
    #[error("{what} server failed: {message}")]
    Serve {
        /// Which server.
        what: &'static str,
        /// Why.
        message: String,
    },
}

impl NodeError {
    /// The process exit code for this error: 2 for configuration problems, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            NodeError::IdentityMismatch { .. } => 2,
            _ => 1,
        }
    }
}

/// Starts nodes.
pub struct Node;

/// A running node.
pub struct NodeHandle {
    node_id: u64,
    api_addr: SocketAddr,
    http_addr: SocketAddr,
    raft_addr: SocketAddr,
    raft: Raft,
    groups: GroupSet,
    raft_port: RaftPort,
    backend: Arc<Router>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    serving: Arc<AtomicBool>,
    grace: Duration,
    grpc: JoinHandle<Result<(), tonic::transport::Error>>,
    http: JoinHandle<io::Result<()>>,
    background: Vec<JoinHandle<()>>,
}

impl Node {
    /// Opens the data directory, starts Raft and its port, bootstraps (see
    /// [`crate::cluster`]) and serves the gRPC and HTTP ports.
    pub async fn start(config: Config) -> Result<NodeHandle, NodeError> {
        claim_data_dir(&config.data_dir, config.node_id)?;
        let raft_listener = bind("Raft", config.raft_addr).await?;
        // The membership records the address peers can reach (the bound port, not 0).
        let config = Config {
            raft_addr: local_addr("Raft", &raft_listener, config.raft_addr)?,
            ..config
        };
        let metrics = Arc::new(Metrics::new());
        let kit = group_kit(&config, &metrics)?;
        let global = Group::open(&kit, GLOBAL_GROUP).await?;
        let groups = GroupSet::new(global);
        // Stop Raft if anything below fails, so the store closes.
        match Self::serve(config, kit, groups.clone(), metrics, raft_listener).await {
            Ok(handle) => Ok(handle),
            Err(error) => {
                let _ = groups.global().raft().shutdown().await;
                Err(error)
            }
        }
    }

    async fn serve(
        config: Config,
        kit: GroupKit,
        groups: GroupSet,
        metrics: Arc<Metrics>,
        raft_listener: TcpListener,
    ) -> Result<NodeHandle, NodeError> {
        let api_listener = bind("gRPC API", config.api_addr).await?;
        let http_listener = bind("HTTP", config.http_addr).await?;
        let api_addr = local_addr("gRPC API", &api_listener, config.api_addr)?;
        let http_addr = local_addr("HTTP", &http_listener, config.http_addr)?;
        let raft = groups.global().raft().clone();
        let raft_port = RaftPort::spawn(groups.clone(), raft_listener);
        let backend = Arc::new(Router::new(
            groups.clone(),
            config.write_timeout,
            config.read_timeout,
        ));
        // The membership records the address clients can reach (the bound port, not 0).
        let bootstrap_config = Config {
            api_addr,
            ..config.clone()
        };
        if let Err(error) = bootstrap(&raft, &bootstrap_config).await {
            raft_port.stop().await;
            return Err(error);
        }

        let dyn_backend: Arc<dyn Backend> = backend.clone();
        let shutdown = CancellationToken::new();
        let stats = Arc::new(StatsCache::default());
        let serving = Arc::new(AtomicBool::new(false));
        let ctx = Arc::new(ApiContext {
            backend: Arc::clone(&dyn_backend),
            policies: Arc::new(config.policies.clone()),
            limits: BodyLimits {
                max_body_bytes: config.max_body_bytes,
                max_canonical_bytes: config.max_body_bytes + config.max_request_bytes,
            },
            metrics: Arc::clone(&metrics),
            shutdown: shutdown.clone(),
            stats: Arc::clone(&stats),
            region: config.region.clone(),
            zone: config.zone.clone(),
        });

        let (grpc, health) = spawn_grpc(&config, ctx, api_listener, shutdown.clone())?;
        let http = tokio::spawn(http::serve(
            http_listener,
            http::router(HttpState {
                backend: Arc::clone(&dyn_backend),
                metrics: Arc::clone(&metrics),
                stats,
            }),
            shutdown.clone(),
        ));
        let background = vec![
            tokio::spawn(report_health(
                raft.clone(),
                health,
                Arc::clone(&serving),
                shutdown.clone(),
            )),
            tokio::spawn(provisioner::run(groups.clone(), kit, shutdown.clone())),
            tokio::spawn(
                Steward::new(
                    groups.clone(),
                    config.node_id,
                    config.region.clone(),
                    Arc::clone(&metrics),
                )
                .run(shutdown.clone()),
            ),
            tokio::spawn(sweep::run(
                group_backends(groups.clone()),
                SweepConfig {
                    interval: config.sweep_interval,
                    batch: config.sweep_batch,
                },
                Arc::clone(&metrics),
                shutdown.clone(),
            )),
        ];
        tracing::info!(
            node_id = config.node_id,
            %api_addr,
            %http_addr,
            raft_addr = %config.raft_addr,
            data_dir = %config.data_dir.display(),
            region = %config.region,
            zone = %config.zone,
            version = crate::VERSION,
            "node started"
        );
        Ok(NodeHandle {
            node_id: config.node_id,
            api_addr,
            http_addr,
            raft_addr: config.raft_addr,
            raft,
            groups,
            raft_port,
            backend,
            metrics,
            shutdown,
            serving,
            grace: config.shutdown_grace,
            grpc,
            http,
            background,
        })
    }
}

/// What this node's groups are built from.
fn group_kit(config: &Config, metrics: &Arc<Metrics>) -> Result<GroupKit, NodeError> {
    let raft_config = config
        .raft_config()
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    Ok(GroupKit {
        node_id: config.node_id,
        region: config.region.clone(),
        data_dir: config.data_dir.clone(),
        raft_config: Arc::new(raft_config),
        network: idem_raft::Network::new(config.node_id, idem_raft::NetworkOptions::default()),
        shared: Shared {
            write_timeout: config.write_timeout,
            read_timeout: config.read_timeout,
            metrics: Arc::clone(metrics),
            forwarder: Arc::default(),
        },
        failpoints: failpoints(),
    })
}

/// The backends the sweep runs over: every group's, each expiring its own records.
fn group_backends(groups: GroupSet) -> impl Fn() -> Vec<Arc<dyn Backend>> + Send + 'static {
    move || {
        groups
            .all()
            .iter()
            .map(|g| Arc::clone(g.backend()) as Arc<dyn Backend>)
            .collect()
    }
}

/// Crash failpoints armed by `IDEM_FAILPOINTS` (tests only), announced in the log.
fn failpoints() -> Failpoints {
    let failpoints = Failpoints::from_env();
    if !failpoints.is_empty() {
        let armed: Vec<&str> = failpoints.names().collect();
        tracing::warn!(
            failpoints = %armed.join(","),
            "crash failpoints armed ({}): this node aborts when it reaches them",
            crate::failpoint::ENV
        );
    }
    failpoints
}

/// The Raft `Node` record of this node.
pub fn node_info(config: &Config) -> NodeInfo {
    NodeInfo {
        region: config.region.clone(),
        zone: config.zone.clone(),
        raft_addr: config.raft_addr.to_string(),
        api_addr: config.api_addr.to_string(),
    }
}

/// Creates the data directory and checks (or writes) its identity file.
fn claim_data_dir(dir: &Path, node_id: u64) -> Result<(), NodeError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NodeError::DataDir { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = dir.join(IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let found = text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("node_id").and_then(toml::Value::as_integer))
                .and_then(|id| u64::try_from(id).ok())
                .ok_or_else(|| NodeError::DataDir {
                    path: path.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, "expected `node_id = <id>`"),
                })?;
            if found != node_id {
                return Err(NodeError::IdentityMismatch {
                    path: dir.to_path_buf(),
                    found,
                    configured: node_id,
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let text = format!(
                "# Written by idemd {} when this data directory was first used.\n# The Raft log here belongs to this node id: never start it under another.\nnode_id = {node_id}\n",
                crate::VERSION
            );
            let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
            std::fs::write(&tmp, text).map_err(io_error(&tmp))?;
            std::fs::rename(&tmp, &path).map_err(io_error(&path))
        }
        Err(e) => Err(NodeError::DataDir { path, source: e }),
    }
}

/// Recovers on restarts; on a first start initializes the group or waits, by the
/// [`Bootstrap`] rule of the `[cluster]` section.
async fn bootstrap(raft: &Raft, config: &Config) -> Result<(), NodeError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    if initialized {
        tracing::info!("existing raft state found; recovering from the log");
        raft.wait_for_recovery(Some(RECOVERY_TIMEOUT))
            .await
            .map_err(|e| NodeError::Raft(format!("recovering the state machine: {e}")))?;
        return Ok(());
    }
    let members = match config.cluster.bootstrap(config.node_id, node_info(config)) {
        Bootstrap::Wait => {
            tracing::info!(
                node_id = config.node_id,
                join = config.cluster.join,
                "no raft state; waiting to be replicated to by the leader"
            );
            return Ok(());
        }
        Bootstrap::Initialize(members) => members,
    };
    let ids: Vec<u64> = members.keys().copied().collect();
    tracing::info!(node_id = config.node_id, members = ?ids, "no raft state; initializing the group");
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        // Someone initialized it in the meantime: the goal is reached.
        Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(NodeError::Raft(format!("bootstrapping: {e}"))),
    }
}

/// The Raft port: the Raft RPCs of every group this node serves and the `Forward` service.
struct RaftPort {
    groups: GroupSet,
    stop: CancellationToken,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl RaftPort {
    fn spawn(groups: GroupSet, listener: TcpListener) -> Self {
        let stop = CancellationToken::new();
        let server = idem_raft::server_builder(&idem_raft::NetworkOptions::default())
            .add_service(idem_raft::RaftService::server(groups.registry().clone()))
            .add_service(ForwardService::server(groups.clone()))
            .serve_with_incoming_shutdown(incoming(listener), stop.clone().cancelled_owned());
        RaftPort {
            groups,
            stop,
            task: tokio::spawn(server),
        }
    }

    /// Stops serving (after Raft shut down, so peers see it unreachable, not half-alive).
    async fn stop(self) {
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

/// Accepted connections with `TCP_NODELAY`: a server built with
/// `serve_with_incoming*` does not apply the builder's setting, and Nagle's algorithm
/// holds small replies (a claim's answer, an append acknowledgement) for up to ~40 ms.
fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, NodeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| NodeError::Bind { what, addr, source })
}

fn local_addr(
    what: &'static str,
    listener: &TcpListener,
    addr: SocketAddr,
) -> Result<SocketAddr, NodeError> {
    listener
        .local_addr()
        .map_err(|source| NodeError::Bind { what, addr, source })
}

type GrpcTask = JoinHandle<Result<(), tonic::transport::Error>>;

/// Builds and spawns the gRPC server; returns it with its health reporter.
fn spawn_grpc(
    config: &Config,
    ctx: Arc<ApiContext>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(GrpcTask, tonic_health::server::HealthReporter), NodeError> {
    let limit = config.max_request_bytes;
    let idempotency = IdempotencyServer::new(IdempotencyService::new(Arc::clone(&ctx)))
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
        .layer(request_too_large_layer())
        .add_service(idempotency)
        .add_service(admin)
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming(listener), shutdown.cancelled_owned());
    Ok((tokio::spawn(server), reporter))
}

/// The gRPC health service names a node reports: the whole server (`""`) and each API.
fn health_names() -> [&'static str; 3] {
    [
        "",
        <IdempotencyServer<IdempotencyService> as NamedService>::NAME,
        <AdminServer<AdminService> as NamedService>::NAME,
    ]
}

/// Keeps the gRPC health status in line with Raft: SERVING while Raft runs and a leader
/// is known, NOT_SERVING otherwise and from the start of shutdown. `serving` mirrors what
/// was last reported, so [`NodeHandle::wait_ready`] returns only once clients see SERVING.
async fn report_health(
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
enum Ended {
    /// The token was cancelled.
    Shutdown,
    /// A server task ended first.
    Server(&'static str, Result<(), NodeError>),
}

async fn join_server<E: std::fmt::Display>(
    what: &'static str,
    task: Option<&mut JoinHandle<Result<(), E>>>,
) -> Result<(), NodeError> {
    match task {
        Some(task) => flatten_result(what, task.await),
        None => Ok(()),
    }
}

fn flatten_result<E: std::fmt::Display>(
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

async fn finish(
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
        if let Err(e) = group.raft().shutdown().await {
            tracing::error!(group = group.id(), error = %e, "raft did not shut down cleanly");
        }
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
