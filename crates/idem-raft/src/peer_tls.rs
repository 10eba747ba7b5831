//! The client side of mutual TLS between peers: every outgoing connection to a peer's Raft
//! port (Raft RPCs, and the follower-to-leader `Forward` calls of idem-server) is a TLS
//! connection presenting this node's certificate and verifying the peer's against the
//! cluster CA.
//!
//! The handshake runs in a connector of our own (instead of tonic's built-in client TLS) so
//! that each new connection takes the configuration current at that moment: when the node
//! reloads its certificate, reconnections present the new one without rebuilding channels,
//! and a certificate that expired is never re-presented from a cached channel.

use std::future::Future;
use std::io;
use std::sync::Arc;

use arc_swap::ArcSwap;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint, Uri};

/// The peer TLS client configuration of a node, replaceable while connections use it.
#[derive(Clone)]
pub struct PeerTls {
    config: Arc<ArcSwap<ClientConfig>>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls").finish_non_exhaustive()
    }
}

impl PeerTls {
    /// Connections made with this use `config` (which must offer ALPN `h2`, as tonic
    /// speaks HTTP/2 only) until [`PeerTls::replace`].
    pub fn new(config: Arc<ClientConfig>) -> Self {
        PeerTls {
            config: Arc::new(ArcSwap::new(config)),
        }
    }

    /// Makes every later connection (and reconnection) use `config`; established
    /// connections keep the session they negotiated.
    pub fn replace(&self, config: Arc<ClientConfig>) {
        self.config.store(config);
    }

    /// A lazily connected channel to `endpoint` over this TLS (the endpoint's scheme must
    /// be `http`: the connector, not tonic, does TLS).
    pub fn connect_lazy(&self, endpoint: &Endpoint) -> Channel {
        endpoint.connect_with_connector_lazy(self.connector())
    }

    /// A channel connected now to `endpoint` over this TLS (handshake included).
    pub async fn connect(&self, endpoint: &Endpoint) -> Result<Channel, tonic::transport::Error> {
        endpoint.connect_with_connector(self.connector()).await
    }

    fn connector(
        &self,
    ) -> impl tower::Service<
        Uri,
        Response = TokioIo<TlsStream<TcpStream>>,
        Error = io::Error,
        Future = impl Future<Output = io::Result<TokioIo<TlsStream<TcpStream>>>> + Send,
    > + Send
           + Clone
           + 'static {
        let config = Arc::clone(&self.config);
        tower::service_fn(move |uri: Uri| {
            let config = config.load_full();
            async move { handshake(config, uri).await.map(TokioIo::new) }
        })
    }
}

/// TCP (with `TCP_NODELAY`) and a TLS handshake verifying the peer as `uri`'s host (a DNS
/// name or an IP address, which the peer's certificate must name).
async fn handshake(config: Arc<ClientConfig>, uri: Uri) -> io::Result<TlsStream<TcpStream>> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let host = uri
        .host()
        .ok_or_else(|| invalid(format!("{uri}: no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri
        .port_u16()
        .ok_or_else(|| invalid(format!("{uri}: no port")))?;
    let tcp = TcpStream::connect((host.as_str(), port)).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(host.clone())
        .map_err(|e| invalid(format!("{host}: not a DNS name or IP address: {e}")))?;
    TlsConnector::from(config).connect(name, tcp).await
}
