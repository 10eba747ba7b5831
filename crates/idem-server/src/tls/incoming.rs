//! The stream of connections a port serves. Plaintext: the accepted TCP connections as
//! they come. TLS: each accepted connection is handshaken in its own task (so a slow or
//! hostile client cannot hold up the next accept) with the port's current configuration.
//!
//! A failed handshake (no client certificate where one is required, one from another CA,
//! a plaintext client) closes that connection and is logged; it never ends the stream.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::TcpIncoming;

use super::{PortConnection, ReloadingTls};

/// How long a client may take to complete the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections handed to the server but not yet picked up.
const BACKLOG: usize = 64;

/// The connections of a port, for tonic's `serve_with_incoming*`.
pub enum PortIncoming {
    /// No TLS: accepted TCP connections.
    Plain(TcpIncoming),
    /// TLS: connections whose handshake succeeded.
    Tls(ReceiverStream<std::io::Result<PortConnection>>),
}

/// `tcp` (accepted connections, `TCP_NODELAY` already set) served plaintext, or over `tls`.
/// With TLS, accepting stops when the returned stream is dropped.
pub fn port_incoming(tcp: TcpIncoming, tls: Option<Arc<ReloadingTls>>) -> PortIncoming {
    match tls {
        None => PortIncoming::Plain(tcp),
        Some(tls) => {
            let (tx, rx) = mpsc::channel(BACKLOG);
            tokio::spawn(accept_loop(tcp, tls, tx));
            PortIncoming::Tls(ReceiverStream::new(rx))
        }
    }
}

impl Stream for PortIncoming {
    type Item = std::io::Result<PortConnection>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut() {
            PortIncoming::Plain(tcp) => tcp
                .poll_next_unpin(cx)
                .map(|next| next.map(|accepted| accepted.map(PortConnection::plain))),
            PortIncoming::Tls(handshaken) => handshaken.poll_next_unpin(cx),
        }
    }
}

async fn accept_loop(
    mut tcp: TcpIncoming,
    tls: Arc<ReloadingTls>,
    tx: mpsc::Sender<std::io::Result<PortConnection>>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = tcp.next() => accepted,
            () = tx.closed() => return,
        };
        let stream = match accepted {
            Some(Ok(stream)) => stream,
            Some(Err(error)) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(port = tls.port(), %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            None => return,
        };
        let acceptor = TlsAcceptor::from(tls.server_config());
        let port = tls.port();
        let tx = tx.clone();
        tokio::spawn(async move {
            let remote = stream.peer_addr().ok();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send(Ok(PortConnection::tls(stream))).await;
                }
                Ok(Err(error)) => {
                    tracing::info!(port, ?remote, %error, "TLS handshake refused");
                }
                Err(_) => tracing::info!(port, ?remote, "TLS handshake timed out"),
            }
        });
    }
}
