//! idem-raft: the Raft transport of idem, node to node over gRPC (`idem.raft.v1`,
//! `proto/idem/v1/raft.proto`).
//!
//! openraft decides *what* to send; this crate moves it between nodes and picks the
//! timing:
//!
//! - [`Network`] is openraft's `RaftNetworkFactory`: one lazily connected, reused tonic
//!   channel per peer (and lane: replication, heartbeat, snapshot), pipelined
//!   AppendEntries, chunked snapshots, deadlines from openraft's `RPCOption`, exponential
//!   backoff for unreachable peers. Configured by [`NetworkOptions`].
//! - [`RaftService`] is the receiving gRPC service; it routes every RPC by its `group` to
//!   the Raft registered in a [`GroupRegistry`] (`NOT_FOUND` for a group it does not serve).
//! - [`RaftTimeouts`] (with [`LogPolicy`]) builds the openraft `Config`: LAN defaults and
//!   presets for cross-region round trips.
//!
//! Why groups: a node runs the global group ([`GLOBAL_GROUP`], 0: the cluster configuration,
//! and every tenant in global mode) and, in region-affinity mode, one Raft group per region
//! (1, 2, ...), all over the same connections (docs/design.md §3). Every RPC carries its
//! group, and one [`RaftService`] serves every group a node runs.
//!
//! Why openraft's own types as bincode payloads rather than a protobuf mirror: see the
//! `codec` module; the format is versioned by the `format` field of every message.
//!
//! Wiring, in short:
//!
//! ```no_run
//! # async fn wire(
//! #     id: u64, log: idem_store::LogStore, sm: idem_store::StateMachine,
//! #     listener: tokio::net::TcpListener,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use idem_raft::{GroupRegistry, Network, NetworkOptions, RaftService, RaftTimeouts, GLOBAL_GROUP};
//!
//! let options = NetworkOptions::default();
//! let config = RaftTimeouts::lan().config("idem")?;
//! let network = Network::new(id, options.clone());
//! let raft = idem_store::Raft::new(id, Arc::new(config), network, log, sm).await?;
//!
//! let registry = GroupRegistry::new();
//! registry.insert(GLOBAL_GROUP, raft.clone());
//! let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
//! idem_raft::server_builder(&options)
//!     .add_service(RaftService::server(registry))
//!     .serve_with_incoming(incoming)
//!     .await?;
//! # Ok(()) }
//! ```

mod codec;
mod network;
mod peer_tls;
mod server;
mod timeouts;

pub use codec::{ENTRY_VERSION_READ, ENTRY_VERSION_WRITTEN};
pub use network::{Network, NetworkOptions, Peer};
pub use peer_tls::PeerTls;
pub use server::{
    GroupRegistry, RaftService, RefusalHook, DEFAULT_MAX_SNAPSHOT_BYTES, SNAPSHOT_TOO_LARGE,
    STALE_VOTE,
};
pub use timeouts::{LogPolicy, RaftTimeouts};

/// idem-core's placement defines the group ids; re-exported for the Raft port's wiring.
pub use idem_core::placement::GLOBAL_GROUP;

/// Default largest Raft message, sent or accepted: 64 MiB (an AppendEntries batch of
/// `max_payload_entries` commands with their results, a snapshot chunk). tonic's own
/// default, 4 MiB, is too small for a full batch of large results.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 << 20;

/// A `tonic` server builder suited to the Raft port: `TCP_NODELAY`, HTTP/2 keepalive from
/// `options` (so half-open peer connections are dropped), adaptive flow-control windows (so
/// snapshot and append throughput is not capped by the default window on long round trips).
///
/// Add [`RaftService::server`] to it and serve on the node's `raft_addr`.
pub fn server_builder(options: &NetworkOptions) -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(options.keepalive_interval))
        .http2_keepalive_timeout(Some(options.keepalive_timeout))
        .http2_adaptive_window(Some(true))
}
