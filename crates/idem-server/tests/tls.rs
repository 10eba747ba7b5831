//! TLS on both ports, end to end with real nodes on loopback: what a client or a peer
//! without the right certificate gets (a failed handshake, nothing else), certificate
//! rotation under load, and a 3-node cluster running entirely on TLS.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_client::{
    ClaimOutcome, ClaimRequest, Client, ClientOptions, RetryPolicy, Target, TlsOptions,
};
use idem_core::fingerprint::CanonicalRequest;
use idem_core::{IdempotencyKey, RecordKey, Scope};
use idem_proto::raft_v1 as rpb;
use idem_server::config::{ClientAuth, PeerTlsConfig, TlsConfig};
use idem_server::{ClusterConfig, Config, InitialMember, Node, NodeHandle};
use openraft::async_runtime::WatchReceiver;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tonic::transport::Endpoint;

/// A throwaway CA writing its certificates as PEM files into a directory.
struct Ca {
    dir: PathBuf,
    name: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and key file pair.
#[derive(Clone)]
struct Pair {
    cert: PathBuf,
    key: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        Ca {
            dir: dir.to_owned(),
            name: name.to_owned(),
            issuer: Issuer::new(params, key),
        }
    }

    fn cert_path(&self) -> PathBuf {
        self.dir.join(format!("{}.pem", self.name))
    }

    /// A certificate for `cn`, valid as server and client, naming localhost and 127.0.0.1.
    fn issue(&self, cn: &str) -> Pair {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().unwrap()),
            SanType::IpAddress("127.0.0.1".parse().unwrap()),
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let pair = Pair {
            cert: self.dir.join(format!("{}-{cn}.pem", self.name)),
            key: self.dir.join(format!("{}-{cn}-key.pem", self.name)),
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }
}

/// A loopback address whose port was free a moment ago.
fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

fn api_tls(ca: &Ca, pair: &Pair, client_auth: ClientAuth) -> TlsConfig {
    TlsConfig {
        cert: pair.cert.clone(),
        key: pair.key.clone(),
        ca: Some(ca.cert_path()),
        client_auth,
    }
}

fn peer_tls(ca: &Ca, pair: &Pair) -> PeerTlsConfig {
    PeerTlsConfig {
        cert: pair.cert.clone(),
        key: pair.key.clone(),
        ca: ca.cert_path(),
    }
}

/// A node's configuration with authentication off (`IDEM_AUTH=off`, read like idemd reads
/// its environment): these tests are about the transport; principals are tested elsewhere.
fn config(dir: &Path, id: u64) -> Config {
    let env = |name: &str| (name == "IDEM_AUTH").then(|| "off".to_owned());
    let mut config = Config {
        node_id: id,
        data_dir: dir.join(format!("n{id}")),
        api_addr: "127.0.0.1:0".parse().unwrap(),
        raft_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        shutdown_grace: Duration::from_secs(1),
        ..Config::load(["idemd"], &env).unwrap().config
    };
    config.raft.heartbeat_interval = Duration::from_millis(100);
    config.raft.election_timeout = Duration::from_millis(500);
    config
}

async fn start(config: Config) -> NodeHandle {
    let node = Node::start(config).await.expect("node starts");
    node.wait_ready(Duration::from_secs(20)).await.unwrap();
    node
}

fn options(tls: Option<TlsOptions>) -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(3),
        retry: RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            total_budget: Duration::from_secs(5),
        },
        tls,
        ..ClientOptions::default()
    }
}

fn claim(key: &str) -> ClaimRequest {
    let scope = Scope::new("acme", "prod", "user-1", "POST /v1/charges").unwrap();
    let target: Target = RecordKey::new(scope, IdempotencyKey::new(key).unwrap());
    let request = CanonicalRequest::new("POST", "/v1/charges")
        .unwrap()
        .with_json_body(r#"{"amount":100}"#);
    ClaimRequest::for_request(target, &request, 1).unwrap()
}

/// Claims `key` once through a new client of `endpoint`.
async fn claim_once(
    endpoint: String,
    tls: Option<TlsOptions>,
    key: &str,
) -> Result<ClaimOutcome, String> {
    let client = Client::connect(vec![endpoint], options(tls)).map_err(|e| e.to_string())?;
    client
        .claim(claim(key))
        .await
        .map(|c| c.outcome)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_plaintext_client_is_refused_by_a_tls_node() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let node = start(Config {
        tls: Some(api_tls(&ca, &ca.issue("node1"), ClientAuth::Optional)),
        ..config(dir.path(), 1)
    })
    .await;
    let addr = node.api_addr().to_string();

    let plaintext = claim_once(addr.clone(), None, "k-plain").await;
    assert!(plaintext.is_err(), "{plaintext:?}");
    let tls = Some(TlsOptions::with_ca(ca.cert_path()));
    let served = claim_once(addr.clone(), tls.clone(), "k-tls")
        .await
        .unwrap();
    assert!(
        matches!(served, ClaimOutcome::Acquired { .. }),
        "{served:?}"
    );
    // The plaintext attempt wrote nothing: its key is still free.
    let after = claim_once(addr, tls, "k-plain").await.unwrap();
    assert!(matches!(after, ClaimOutcome::Acquired { .. }), "{after:?}");
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn client_certificates_of_another_ca_are_refused_when_required() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other");
    let node = start(Config {
        tls: Some(api_tls(&ca, &ca.issue("node1"), ClientAuth::Require)),
        ..config(dir.path(), 1)
    })
    .await;
    let addr = node.api_addr().to_string();
    let trusting = || TlsOptions::with_ca(ca.cert_path());

    let foreign = other.issue("mallory");
    let refused = claim_once(
        addr.clone(),
        Some(trusting().client_cert(&foreign.cert, &foreign.key)),
        "k1",
    )
    .await;
    assert!(
        refused.is_err(),
        "another CA's client certificate: {refused:?}"
    );
    let anonymous = claim_once(addr.clone(), Some(trusting()), "k1").await;
    assert!(anonymous.is_err(), "no client certificate: {anonymous:?}");

    let admin = ca.issue("admin");
    let served = claim_once(
        addr,
        Some(trusting().client_cert(&admin.cert, &admin.key)),
        "k1",
    )
    .await;
    assert!(
        matches!(served, Ok(ClaimOutcome::Acquired { .. })),
        "the CA's client certificate: {served:?}"
    );
    node.shutdown().await.unwrap();
}

/// The leaf certificate a TLS handshake with `addr` gets.
async fn served_certificate(addr: SocketAddr, ca: &Path) -> CertificateDer<'static> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

fn file_certificate(path: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(path).unwrap()
}

#[tokio::test]
async fn certificates_rotate_without_a_restart_or_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let first = ca.issue("node-first");
    let live = Pair {
        cert: dir.path().join("live.pem"),
        key: dir.path().join("live-key.pem"),
    };
    std::fs::copy(&first.cert, &live.cert).unwrap();
    std::fs::copy(&first.key, &live.key).unwrap();
    let node = start(Config {
        tls: Some(api_tls(&ca, &live, ClientAuth::Optional)),
        ..config(dir.path(), 1)
    })
    .await;
    let addr = node.api_addr();
    assert_eq!(
        served_certificate(addr, &ca.cert_path()).await,
        file_certificate(&first.cert)
    );

    // Under load: one long-lived client, and a new client (a new handshake) per request.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tls = TlsOptions::with_ca(ca.cert_path());
    let long_lived = Client::connect(vec![addr.to_string()], options(Some(tls.clone()))).unwrap();
    let load = {
        let (stop, done, failed) = (Arc::clone(&stop), Arc::clone(&done), Arc::clone(&failed));
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let fresh =
                    claim_once(addr.to_string(), Some(tls.clone()), &format!("fresh-{i}")).await;
                let kept = long_lived.claim(claim(&format!("kept-{i}"))).await;
                for ok in [fresh.is_ok(), kept.is_ok()] {
                    let counter = if ok { &done } else { &failed };
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Rotate: the new pair replaces the files (key, then certificate, as a deploy tool
    // would; the half-rotated state in between must not be served).
    let second = ca.issue("node-second");
    std::fs::copy(&second.key, &live.key).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::copy(&second.cert, &live.cert).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while served_certificate(addr, &ca.cert_path()).await != file_certificate(&second.cert) {
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served within 10s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    assert!(done.load(Ordering::SeqCst) > 4, "the load ran: {done:?}");
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "requests failed during the rotation"
    );
    node.shutdown().await.unwrap();
}

/// A request some RPC of the Raft port would get (its payload need not decode: a call that
/// passes the handshake is answered by the service, one that does not never gets there).
fn raft_request() -> rpb::RaftRequest {
    rpb::RaftRequest {
        group: 0,
        format: 0,
        payload: vec![1, 2, 3].into(),
        entry_version: 0,
    }
}

/// Calls AppendEntries, Vote, InstallSnapshot and Forward.Propose on `channel`; the codes.
async fn peer_calls(
    channel: tonic::transport::Channel,
) -> Vec<(&'static str, Result<(), tonic::Status>)> {
    let mut raft = rpb::raft_client::RaftClient::new(channel.clone());
    let mut forward = rpb::forward_client::ForwardClient::new(channel);
    let chunk = rpb::SnapshotChunk {
        group: 0,
        format: 0,
        chunk: Some(rpb::snapshot_chunk::Chunk::Data(vec![0; 16].into())),
    };
    vec![
        (
            "AppendEntries",
            raft.append_entries(raft_request()).await.map(drop),
        ),
        ("Vote", raft.vote(raft_request()).await.map(drop)),
        (
            "InstallSnapshot",
            raft.install_snapshot(futures::stream::iter([chunk]))
                .await
                .map(drop),
        ),
        (
            "Forward.Propose",
            forward
                .propose(rpb::ForwardRequest {
                    group: 0,
                    payload: vec![1, 2, 3].into(),
                    principal: None,
                })
                .await
                .map(drop),
        ),
    ]
}

/// True when `status` comes from a connection that never got established (the handshake
/// failed: tonic reports a transport error, never an answer of the service).
fn is_handshake_failure(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown
    ) && status.message().contains("transport error")
}

fn peer_client_config(ca: &Ca, pair: &Pair) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(file_certificate(&ca.cert_path())).unwrap();
    let certs = CertificateDer::pem_file_iter(&pair.cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&pair.key).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(certs, key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

#[tokio::test]
async fn the_raft_port_refuses_peers_of_another_ca_and_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other");
    let node = start(Config {
        peer_tls: Some(peer_tls(&ca, &ca.issue("node1"))),
        ..config(dir.path(), 1)
    })
    .await;
    let term = || node.raft().metrics().borrow_watched().current_term;
    let term_before = term();
    let endpoint = Endpoint::from_shared(format!("http://{}", node.raft_addr()))
        .unwrap()
        .connect_timeout(Duration::from_secs(2));

    // A certificate of another CA (the client trusts the node's CA, so only the node's
    // check of the client certificate can refuse it), then plaintext.
    let foreign = idem_raft::PeerTls::new(peer_client_config(&ca, &other.issue("mallory")));
    for channel in [foreign.connect_lazy(&endpoint), endpoint.connect_lazy()] {
        for (rpc, answer) in peer_calls(channel).await {
            let status = answer.expect_err(rpc);
            assert!(is_handshake_failure(&status), "{rpc}: {status:?}");
        }
    }
    // (An eager connect may still "succeed": in TLS 1.3 the client finishes its side of
    // the handshake before the node checks its certificate; the node's alert then fails
    // the first call, as above.)

    // A certificate of the cluster CA passes the handshake: the services answer (and
    // refuse the junk payloads on their own terms).
    let peer = idem_raft::PeerTls::new(peer_client_config(&ca, &ca.issue("node9")));
    for (rpc, answer) in peer_calls(peer.connect_lazy(&endpoint)).await {
        if let Err(status) = answer {
            assert!(!is_handshake_failure(&status), "{rpc}: {status:?}");
        }
    }
    assert_eq!(
        term(),
        term_before,
        "no refused call changed the Raft state"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_three_node_cluster_runs_on_tls_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let members: Vec<InitialMember> = (1..=3)
        .map(|id| InitialMember {
            id,
            raft_addr: free_addr(),
            api_addr: free_addr(),
            region: None,
            zone: None,
        })
        .collect();
    let cluster = ClusterConfig {
        initial_members: members.clone(),
        join: false,
    };
    let starts = members.iter().map(|m| {
        let pair = ca.issue(&format!("node{}", m.id));
        Node::start(Config {
            api_addr: m.api_addr,
            raft_addr: m.raft_addr,
            cluster: cluster.clone(),
            tls: Some(api_tls(&ca, &pair, ClientAuth::Require)),
            peer_tls: Some(peer_tls(&ca, &pair)),
            ..config(dir.path(), m.id)
        })
    });
    let nodes: Vec<NodeHandle> = futures::future::join_all(starts)
        .await
        .into_iter()
        .map(|n| n.expect("node starts"))
        .collect();
    for node in &nodes {
        node.wait_ready(Duration::from_secs(20)).await.unwrap();
    }
    let admin = ca.issue("admin");
    let tls = TlsOptions::with_ca(ca.cert_path()).client_cert(&admin.cert, &admin.key);

    // Through every node: the leader decides (a follower forwards or redirects over the
    // peer TLS), and the record is replicated to all three.
    let leader = nodes[0]
        .raft()
        .metrics()
        .borrow_watched()
        .current_leader
        .unwrap();
    for node in &nodes {
        let key = format!("via-{}", node.node_id());
        let outcome = claim_once(node.api_addr().to_string(), Some(tls.clone()), &key).await;
        assert!(
            matches!(outcome, Ok(ClaimOutcome::Acquired { .. })),
            "node {}: {outcome:?}",
            node.node_id()
        );
    }
    let everyone: Vec<String> = nodes.iter().map(|n| n.api_addr().to_string()).collect();
    let client = Client::connect(everyone, options(Some(tls))).unwrap();
    let replay = client.claim(claim("via-1")).await.unwrap();
    assert!(
        matches!(replay.outcome, ClaimOutcome::InProgress { .. }),
        "{:?}",
        replay.outcome
    );
    let leader_node = nodes.iter().find(|n| n.node_id() == leader).unwrap();
    let applied = leader_node.raft().metrics().borrow_watched().last_applied;
    let deadline = Instant::now() + Duration::from_secs(10);
    for node in &nodes {
        while node.raft().metrics().borrow_watched().last_applied < applied {
            assert!(
                Instant::now() < deadline,
                "node {} did not catch up",
                node.node_id()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
