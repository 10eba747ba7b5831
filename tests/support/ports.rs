//! Loopback ports for test nodes.

use std::net::{SocketAddr, TcpListener};

/// A loopback address whose port was free a moment ago (the OS picks it).
pub fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("ephemeral address")
}
