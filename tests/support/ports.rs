//! Loopback ports for test nodes.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::sync::Mutex;

/// Ports handed out by this process: the OS may give a just-closed ephemeral port again,
/// and two nodes of one cluster must never be configured with the same one.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback address whose port was free a moment ago (the OS picks it), never one this
/// process handed out before.
pub fn free_port() -> SocketAddr {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let seen = handed_out.get_or_insert_with(HashSet::new);
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let addr = listener.local_addr().expect("ephemeral address");
        if seen.insert(addr.port()) {
            return addr;
        }
    }
}
