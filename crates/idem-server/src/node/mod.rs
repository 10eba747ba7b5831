//! One node: open the store, build Raft, bootstrap, serve, shut down.
//!
//! [`Node::start`] is the single entry point used by `idemd` and by tests:
//!
//! 1. **Data directory.** Created if missing. `node.toml` records the node id the directory
//!    belongs to; starting it under another id is refused (exit code 2), because a Raft log
//!    reused under a different identity would corrupt a cluster. It also records the data's
//!    on-disk format: a directory of a newer format than this release reads is refused
//!    (exit code 2).
//! 2. **Store and Raft.** `idem_store::open` gives the log store, state machine and reader
//!    over one RocksDB; Raft is built over them with the gRPC transport of `idem-raft`.
//!    The Raft port serves the Raft RPCs and the node-internal `Forward` service
//!    ([`crate::replica::forward_service`]) before bootstrap, so peers can reach the node
//!    from the start.
//! 3. **Bootstrap** ([`crate::config::cluster`]). If the store holds no Raft state: the node with
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

mod bootstrap;
mod data_dir;
pub mod error;
mod grpc;
mod handle;
mod listen;
mod raft_port;

pub use data_dir::IDENTITY_FILE;
pub use error::NodeError;
pub use handle::NodeHandle;

use data_dir::claim_data_dir;
use grpc::{report_health, spawn_grpc};
use listen::{bind, local_addr};
use raft_port::RaftPort;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use idem_core::placement::GLOBAL_GROUP;
use idem_store::NodeInfo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::decode::BodyLimits;
use crate::api::ApiContext;
use crate::auth::{AuthLayer, Authenticator, ReplicatedTokens};
use crate::backend::Backend;
use crate::config::Config;
use crate::failpoint::Failpoints;
use crate::groups::{provisioner, Group, GroupKit, GroupSet, Router, Steward};
use crate::http::{self, HttpState};
use crate::limits::{DiskGuard, TenantLimits};
use crate::metrics::Metrics;
use crate::replica::forward::Forwarder;
use crate::replica::Shared;
use crate::stats::StatsCache;
use crate::stuck::{self, StuckConfig};
use crate::sweep::{self, SweepConfig};
use crate::tls::{ReloadingTls, TlsSource};

/// Starts nodes.
pub struct Node;

impl Node {
    /// Opens the data directory, starts Raft and its port, bootstraps (see
    /// [`crate::config::cluster`]) and serves the gRPC and HTTP ports.
    pub async fn start(config: Config) -> Result<NodeHandle, NodeError> {
        claim_data_dir(&config.data_dir, config.node_id)?;
        let raft_listener = bind("Raft", config.raft_addr).await?;
        // The membership records the address peers can reach (the bound port, not 0).
        let config = Config {
            raft_addr: local_addr("Raft", &raft_listener, config.raft_addr)?,
            ..config
        };
        let metrics = Arc::new(Metrics::new());
        let peer_tls = ReloadingTls::watched("Raft", config.peer_tls.clone().map(TlsSource::Peer))?;
        let kit = group_kit(&config, &metrics, peer_tls.as_ref())?;
        let global = Group::open(&kit, GLOBAL_GROUP).await?;
        let groups = GroupSet::new(global);
        // Stop Raft if anything below fails, so the store closes.
        match Self::serve(
            config,
            kit,
            groups.clone(),
            metrics,
            raft_listener,
            peer_tls,
        )
        .await
        {
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
        peer_tls: Option<Arc<ReloadingTls>>,
    ) -> Result<NodeHandle, NodeError> {
        set_log_secret(config.log_key_file.as_deref())?;
        let authenticator = Authenticator::new(config.auth.mode, config.auth.credentials.clone())
            .map_err(NodeError::Credentials)?;
        let api_listener = bind("gRPC API", config.api_addr).await?;
        let http_listener = bind("HTTP", config.http_addr).await?;
        let api_addr = local_addr("gRPC API", &api_listener, config.api_addr)?;
        let http_addr = local_addr("HTTP", &http_listener, config.http_addr)?;
        let raft = groups.global().raft().clone();
        let raft_port = RaftPort::spawn(
            &config.limits,
            &metrics,
            groups.clone(),
            raft_listener,
            peer_tls,
            config.auth.mode,
        );
        let backend = Arc::new(Router::new(
            groups.clone(),
            config.write_timeout,
            config.read_timeout,
        ));
        // Tokens created with Admin.CreateToken, as applied by this node's global group.
        let global = groups.global();
        let authenticator =
            authenticator.with_replicated(ReplicatedTokens::new(move || global.placement()));
        // The membership records the address clients can reach (the bound port, not 0).
        let bootstrap_config = Config {
            api_addr,
            ..config.clone()
        };
        if let Err(error) = bootstrap::run(&raft, &bootstrap_config).await {
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
            tenant_limits: Arc::new(TenantLimits::new(
                config.limits.clone(),
                Arc::clone(&metrics),
            )),
            auth: config.auth.mode,
            key_warnings: config.key_warnings,
            hot_keys: Arc::default(),
        });

        let auth_layer = AuthLayer::new(authenticator.clone());
        let (grpc, health) = spawn_grpc(
            &config,
            ctx,
            auth_layer,
            groups.clone(),
            api_listener,
            shutdown.clone(),
        )?;
        let http = tokio::spawn(http::serve(
            http_listener,
            http::router(HttpState {
                backend: Arc::clone(&dyn_backend),
                metrics: Arc::clone(&metrics),
                stats,
                data_dir: config.data_dir.clone(),
                disk: Arc::clone(&kit.shared.disk),
            }),
            shutdown.clone(),
        ));
        let background = vec![
            tokio::spawn(authenticator.watch(shutdown.clone())),
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
            tokio::spawn(stuck::run(
                group_backends(groups.clone()),
                StuckConfig {
                    interval: config.sweep_interval,
                    per_tick: stuck::SCAN_PER_TICK,
                    policies: Arc::new(config.policies.clone()),
                    node_id: config.node_id,
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
            data_format = idem_store::DATA_FORMAT_VERSION,
            entry_version = idem_raft::ENTRY_VERSION_WRITTEN,
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

/// What this node's groups are built from (peers dialled over `peer_tls` when set).
fn group_kit(
    config: &Config,
    metrics: &Arc<Metrics>,
    peer_tls: Option<&Arc<ReloadingTls>>,
) -> Result<GroupKit, NodeError> {
    let peer_client = peer_tls.and_then(|tls| tls.peer_client());
    let raft_config = config
        .raft_config()
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    Ok(GroupKit {
        node_id: config.node_id,
        region: config.region.clone(),
        data_dir: config.data_dir.clone(),
        raft_config: Arc::new(raft_config),
        network: idem_raft::Network::with_tls(
            config.node_id,
            idem_raft::NetworkOptions::default(),
            peer_client.clone(),
        ),
        shared: Shared {
            write_timeout: config.write_timeout,
            read_timeout: config.read_timeout,
            metrics: Arc::clone(metrics),
            forwarder: Arc::new(Forwarder::new(peer_client)),
            disk: Arc::new(DiskGuard::new(
                config.data_dir.clone(),
                config.limits.disk_reserve,
                Arc::clone(metrics),
            )),
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

/// Keys the key hashes in this process's logs with the cluster's secret, when configured.
/// Nodes sharing a process (tests) share the first secret set.
fn set_log_secret(path: Option<&std::path::Path>) -> Result<(), NodeError> {
    let Some(path) = path else {
        return Ok(());
    };
    let error = |source| NodeError::LogKey {
        path: path.to_path_buf(),
        source,
    };
    let secret = std::fs::read(path).map_err(error)?;
    if secret.len() < 16 {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the secret must be at least 16 bytes",
        )));
    }
    if idem_core::log_hash::set_secret(&secret).is_err() {
        tracing::debug!("the log hash secret was already set in this process");
    }
    Ok(())
}
