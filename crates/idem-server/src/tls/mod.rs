//! TLS for the node's two gRPC ports (rustls; no OpenSSL).
//!
//! The API port may require client certificates (`[tls] client_auth`), the Raft port always
//! does once `[peer_tls]` is set: only certificates of the cluster CA may vote, append,
//! install snapshots or forward. A verified client certificate becomes a
//! [`ClientIdentity`] on each request for the authorization layer.

mod identity;

pub use identity::ClientIdentity;
