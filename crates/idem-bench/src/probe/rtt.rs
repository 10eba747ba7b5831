//! Network floor: a TCP ping-pong over loopback with an echo server in this process.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use super::Probe;
use crate::error::BenchError;
use crate::stats::latency_of;

/// Sends `size` bytes and reads them back, `count` times, over one loopback connection
/// (`TCP_NODELAY` on both ends, as gRPC sets it).
pub fn rtt_probe(count: usize, size: usize) -> Result<Probe, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(BenchError::Probe)?;
    let addr = listener.local_addr().map_err(BenchError::Probe)?;
    let size = size.max(1);
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut buf = vec![0u8; size];
        for _ in 0..count {
            stream.read_exact(&mut buf)?;
            stream.write_all(&buf)?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(addr).map_err(BenchError::Probe)?;
    stream.set_nodelay(true).map_err(BenchError::Probe)?;
    let ping = vec![0xa5_u8; size];
    let mut pong = vec![0u8; size];
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        stream.write_all(&ping).map_err(BenchError::Probe)?;
        stream.read_exact(&mut pong).map_err(BenchError::Probe)?;
        samples.push(t.elapsed());
    }
    echo.join()
        .map_err(|_| BenchError::Probe(std::io::Error::other("echo thread panicked")))?
        .map_err(BenchError::Probe)?;
    Ok(Probe {
        name: "rtt".into(),
        what: format!("loopback TCP ping-pong of {size} B"),
        latency: latency_of(samples),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_round_trips() {
        let probe = rtt_probe(50, 64).unwrap();
        assert_eq!(probe.latency.count, 50);
        assert!(probe.latency.p50_ms > 0.0);
    }
}
