//! Region latency without netem: delaying TCP proxies on the hub.
//!
//! `tc netem` is the natural way to delay packets between regions ([`super::regions`]), but
//! some kernels are built without it (this project's CI VM among them). There the cluster
//! delays node-to-node TCP in user space instead: in each node's namespace, an iptables DNAT
//! rule (nat OUTPUT) sends connections to a node of another region (its API and Raft ports)
//! to a proxy listening on the hub, one listener per (destination node, port, source region);
//! the proxy connects to the real destination and forwards the bytes each way after half the
//! regions' RTT. Ordering is kept and throughput is not throttled: each chunk is stamped when
//! read and written once its time has come.
//!
//! Differences from netem: only TCP between nodes is delayed (clients on the hub are not,
//! as with netem, since the hub has no region), and the destination sees the proxy's address
//! as the source. Partitions therefore also drop, in the sender's OUTPUT chain, connections
//! whose *original* destination (`conntrack --ctorigdst`) is a cut-off node (see
//! [`crate::nemesis::partition`]).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::command::Cmd;
use super::netns::{Topology, API_PORT, RAFT_PORT};
use super::regions::Regions;

/// One delayed path: connections from `src_region` to `dst` port `port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The source region (0-based).
    pub src_region: usize,
    /// The destination node.
    pub dst: usize,
    /// The destination port.
    pub port: u16,
    /// The proxy's port on the hub.
    pub proxy_port: u16,
    /// Delay added in each direction.
    pub one_way: Duration,
}

/// Every delayed path of a cluster.
pub fn routes(topology: &Topology, regions: &Regions) -> Vec<Route> {
    let mut v = Vec::new();
    for dst in topology.ids() {
        for src_region in 0..regions.count() {
            let rtt = regions.rtt(src_region, regions.region_of(dst));
            if src_region == regions.region_of(dst) || rtt.is_zero() {
                continue;
            }
            for (k, port) in [API_PORT, RAFT_PORT].into_iter().enumerate() {
                v.push(Route {
                    src_region,
                    dst,
                    port,
                    proxy_port: 20000 + (dst * 100 + src_region * 10 + k) as u16,
                    one_way: rtt / 2,
                });
            }
        }
    }
    v
}

/// The DNAT rules (to run in node `id`'s namespace) that send its connections to other
/// regions through the proxies.
pub fn dnat_commands(topology: &Topology, regions: &Regions, id: usize) -> Vec<Cmd> {
    let mine = regions.region_of(id);
    routes(topology, regions)
        .into_iter()
        .filter(|r| r.src_region == mine)
        .map(|r| {
            let dst = topology.node_ip(r.dst).to_string();
            let to = format!("{}:{}", topology.hub_ip(), r.proxy_port);
            Cmd::new([
                "iptables",
                "-w",
                "-t",
                "nat",
                "-A",
                "OUTPUT",
                "-p",
                "tcp",
                "-d",
                &dst,
                "--dport",
                &r.port.to_string(),
                "-j",
                "DNAT",
                "--to-destination",
                &to,
            ])
        })
        .collect()
}

/// The running proxies; they stop when dropped.
pub struct DelayProxies {
    tasks: Vec<JoinHandle<()>>,
}

impl DelayProxies {
    /// Starts one listener per route (run it in the hub namespace).
    pub async fn start(topology: &Topology, regions: &Regions) -> anyhow::Result<DelayProxies> {
        let mut tasks = Vec::new();
        for route in routes(topology, regions) {
            let listen = SocketAddr::from((topology.hub_ip(), route.proxy_port));
            let target = SocketAddr::from((topology.node_ip(route.dst), route.port));
            let listener = TcpListener::bind(listen)
                .await
                .with_context(|| format!("delay proxy: binding {listen}"))?;
            tasks.push(tokio::spawn(serve(listener, target, route.one_way)));
        }
        Ok(DelayProxies { tasks })
    }

    /// Number of listeners.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when nothing is delayed.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

impl Drop for DelayProxies {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn serve(listener: TcpListener, target: SocketAddr, delay: Duration) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(target).await else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (in_r, in_w) = inbound.into_split();
            let (out_r, out_w) = outbound.into_split();
            let a = tokio::spawn(pump(in_r, out_w, delay));
            let b = tokio::spawn(pump(out_r, in_w, delay));
            let _ = tokio::join!(a, b);
        });
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read; closes `to` after EOF.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if chunk.is_empty() || to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        let due = Instant::now() + delay;
        if tx.send((due, buf[..n].to_vec())).is_err() || n == 0 {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_route_per_destination_port_and_foreign_region() {
        let t = Topology::new("x", 3);
        let r = Regions::new(3, 3, &[ms(20), ms(40), ms(60)]).unwrap();
        let all = routes(&t, &r);
        assert_eq!(all.len(), 3 * 2 * 2);
        let to_n3_from_r1: Vec<&Route> = all
            .iter()
            .filter(|x| x.dst == 3 && x.src_region == 0)
            .collect();
        assert_eq!(to_n3_from_r1.len(), 2);
        assert_eq!(to_n3_from_r1[0].one_way, ms(20));
        let mut ports: Vec<u16> = all.iter().map(|x| x.proxy_port).collect();
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), all.len());
        let cmds: Vec<String> = dnat_commands(&t, &r, 1)
            .iter()
            .map(Cmd::to_string)
            .collect();
        assert_eq!(cmds.len(), 4);
        assert_eq!(
            cmds[0],
            "iptables -w -t nat -A OUTPUT -p tcp -d 10.77.0.2 --dport 7400 -j DNAT --to-destination 10.77.0.254:20200"
        );
        assert!(dnat_commands(&t, &Regions::single(3), 1).is_empty());
    }

    #[tokio::test]
    async fn proxy_forwards_both_ways_after_the_delay() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = proxy.local_addr().unwrap();
        let task = tokio::spawn(serve(proxy, target, ms(50)));
        let started = std::time::Instant::now();
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        assert!(started.elapsed() >= ms(100), "{:?}", started.elapsed());
        task.abort();
    }
}
