//! An accepted connection of a port as tonic's server consumes it: plaintext TCP, or TLS
//! once the handshake completed.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;

use super::{ClientIdentity, ConnectionInfo};

/// A connection carrying its [`ConnectionInfo`] (so a client certificate's name is parsed
/// once per connection, not once per request).
pub struct PortConnection {
    io: Io,
    info: ConnectionInfo,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl PortConnection {
    /// A plaintext connection.
    pub fn plain(tcp: TcpStream) -> Self {
        let info = ConnectionInfo {
            local_addr: tcp.local_addr().ok(),
            remote_addr: tcp.peer_addr().ok(),
            identity: None,
        };
        PortConnection {
            io: Io::Plain(tcp),
            info,
        }
    }

    /// A completed TLS handshake; its verified client certificate (if any) names the
    /// [`ClientIdentity`].
    pub fn tls(stream: TlsStream<TcpStream>) -> Self {
        let (tcp, session) = stream.get_ref();
        let identity = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(ClientIdentity::from_certificate);
        let info = ConnectionInfo {
            local_addr: tcp.local_addr().ok(),
            remote_addr: tcp.peer_addr().ok(),
            identity,
        };
        PortConnection {
            io: Io::Tls(Box::new(stream)),
            info,
        }
    }
}

impl Connected for PortConnection {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

impl AsyncRead for PortConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PortConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(tcp) => tcp.is_write_vectored(),
            Io::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
