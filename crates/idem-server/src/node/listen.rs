//! Binding the node's listening sockets, with errors that name the port.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

use super::error::NodeError;

/// Accepted connections with `TCP_NODELAY`: a server built with
/// `serve_with_incoming*` does not apply the builder's setting, and Nagle's algorithm
/// holds small replies (a claim's answer, an append acknowledgement) for up to ~40 ms.
pub(super) fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

pub(super) async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, NodeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| NodeError::Bind { what, addr, source })
}

pub(super) fn local_addr(
    what: &'static str,
    listener: &TcpListener,
    addr: SocketAddr,
) -> Result<SocketAddr, NodeError> {
    listener
        .local_addr()
        .map_err(|source| NodeError::Bind { what, addr, source })
}
