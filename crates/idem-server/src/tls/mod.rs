//! TLS for the node's two gRPC ports (rustls with ring; no OpenSSL).
//!
//! The API port may require client certificates (`[tls] client_auth`); the Raft port
//! always does once `[peer_tls]` is set, so only certificates of the cluster CA may vote,
//! append, install snapshots or forward. Certificates reload without a restart
//! ([`ReloadingTls`]: file changes and SIGHUP). A verified client certificate becomes a
//! [`ClientIdentity`] on each request of its connection ([`identity_layer`]) for the
//! authorization layer.
//!
//! tonic's own server TLS cannot swap certificates, so both ports are served with
//! `serve_with_incoming` over [`port_incoming`]: our accept loop, a `tokio-rustls` acceptor
//! over the current configuration, and [`PortConnection`]s that carry what the handshake
//! established. Without TLS the same stream passes TCP connections through.

mod connection;
mod connection_info;
mod error;
mod identity;
mod incoming;
mod layer;
mod pem;
mod reloading;
mod source;

pub use connection::PortConnection;
pub use connection_info::ConnectionInfo;
pub use error::TlsError;
pub use identity::ClientIdentity;
pub use incoming::{port_incoming, PortIncoming, HANDSHAKE_TIMEOUT};
pub use layer::{attach_identity, identity_layer};
pub use reloading::{ReloadingTls, RELOAD_POLL};
pub use source::{Built, TlsSource};
