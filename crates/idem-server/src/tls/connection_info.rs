//! What the API and Raft ports know about a TLS connection, computed once at the
//! handshake and attached by tonic to every request of the connection.

use std::net::SocketAddr;

use super::ClientIdentity;

/// The addresses of a TLS connection and the identity its client certificate proved.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// This end's address.
    pub local_addr: Option<SocketAddr>,
    /// The client's address.
    pub remote_addr: Option<SocketAddr>,
    /// The verified client certificate's name; `None` when the client presented none.
    pub identity: Option<ClientIdentity>,
}
