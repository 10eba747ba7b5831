//! `idemctl reconcile run`, the real binary, against a real `idemd` and the payment
//! example's fake provider on loopback:
//!
//! - a payment service process killed (`kill -9`) between the provider's charge and
//!   `Complete` leaves its record at `CALLING`; a dry run reports it and changes nothing;
//!   two runs at once settle it once, `COMPLETED` with the provider's reference; the
//!   restarted service replays it and the provider never charges twice;
//! - the provider behind HTTPS with a test CA: with the wrong CA every check fails and
//!   nothing is settled (counted as check errors); with the right one the charged
//!   operation completes and the never-charged one becomes `RETRYABLE_FAILURE`;
//! - the external-command check (a shell script asking the provider with curl) decides the
//!   same way.

use crate::common;

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{dying_worker, listen, post, target, ENDPOINT};
use http::StatusCode;
use idem_client::idem_core::{Risk, Stage, State};
use idem_client::{Client, ClientOptions};
use idem_tests::{free_port, idemctl, Node, NodeOptions};
use payments::provider::{Mode, Provider};
use payments::provider_client::ProviderClient;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

const BODY: &str = r#"{"amount":1000,"currency":"EUR"}"#;

/// How long a record must sit unchanged at CALLING before the runs below examine it.
const STUCK_AFTER: &str = "1s";

/// `idemctl -w json --endpoints <node> reconcile run --tenant acme --endpoint <charges>
/// --stuck-after 1s ARGS`, started.
fn reconcile(node: &Node, args: &[&str]) -> Child {
    Command::new(idemctl())
        .args(["--endpoints", &node.endpoint(), "-w", "json"])
        .args([
            "reconcile",
            "run",
            "--tenant",
            "acme",
            "--endpoint",
            ENDPOINT,
        ])
        .args([
            "--stuck-after",
            STUCK_AFTER,
            "--rate",
            "100",
            "--burst",
            "10",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idemctl")
}

/// The pass report of a finished run (exit code 0, one JSON object).
fn report(child: Child) -> Value {
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&stdout);
    assert!(
        status.success(),
        "{status}: {stdout} {}",
        String::from_utf8_lossy(&stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

/// The counts of a report, in the order scanned, completed, retryable_failure,
/// check_errors, conflicts.
fn counts(report: &Value) -> [u64; 5] {
    [
        "scanned",
        "completed",
        "retryable_failure",
        "check_errors",
        "conflicts",
    ]
    .map(|name| {
        report[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {report}"))
    })
}

/// Waits until `addr` accepts connections.
async fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The payment service binary on `addr`, charging through the provider at `provider`.
async fn payment_service(node: &Node, addr: SocketAddr, provider: SocketAddr) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_payments-example"))
        .args(["--idem", &node.endpoint(), "--listen", &addr.to_string()])
        .args(["--provider", &format!("http://{provider}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start payments-example");
    wait_listening(addr).await;
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_worker_is_settled_by_idemctl_without_a_second_charge() {
    let node = Node::start(NodeOptions::default());
    let provider = Arc::new(Provider::default());
    let provider_addr = listen(provider.clone().router()).await;
    let service_addr = free_port();
    let mut service = payment_service(&node, service_addr, provider_addr).await;

    // The provider charges at once and answers late; the worker is killed in between.
    provider.push(&[Mode::Timeout]);
    let call = tokio::spawn(async move { post(service_addr, "order-killed", BODY).await });
    let deadline = Instant::now() + Duration::from_secs(10);
    while provider.charges_made() == 0 {
        assert!(Instant::now() < deadline, "the provider was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    service.kill().unwrap();
    service.wait().unwrap();
    call.abort();
    let idem = Client::connect(vec![node.endpoint()], ClientOptions::default()).unwrap();
    let left = idem.get(&target("order-killed")).await.unwrap().record;
    assert_eq!(
        (left.state, left.stage),
        (State::InProgress, Stage::Calling)
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let template = format!("http://{provider_addr}/charges/{{operation_id}}");
    let http = ["--http-template", &template, "--completed-status", "201"];

    // A dry run says what it would do and writes nothing.
    let dry = report(reconcile(&node, &[&http[..], &["--dry-run"]].concat()));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(counts(&dry), [1, 1, 0, 0, 0], "{dry}");
    assert_eq!(dry["records"][0]["detail"], "psp_1", "{dry}");
    let after_dry = idem.get(&target("order-killed")).await.unwrap().record;
    assert_eq!(after_dry.version, left.version, "the dry run wrote");

    // Two runs at once: one settles the record; the other lost the race (a conflict) or
    // listed it already settled.
    let (a, b) = (reconcile(&node, &http), reconcile(&node, &http));
    let (a, b) = (counts(&report(a)), counts(&report(b)));
    assert_eq!(a[1] + b[1], 1, "settled once: {a:?} {b:?}");
    for run in [a, b] {
        assert_eq!(
            run[0],
            run[1] + run[4],
            "settled or conflicted: {a:?} {b:?}"
        );
    }
    let settled = idem.get(&target("order-killed")).await.unwrap().record;
    assert_eq!(settled.state, State::Completed);
    let result = settled.result.unwrap();
    assert_eq!((result.status_code, &*result.resource_id), (201, "psp_1"));

    // The restarted service replays the settled charge; the provider charged once.
    let mut service = payment_service(&node, service_addr, provider_addr).await;
    let retry = post(service_addr, "order-killed", BODY).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{:?}", retry.json);
    assert!(retry.replayed);
    assert_eq!(retry.json["id"], "psp_1");
    assert_eq!(provider.charges_made(), 1, "no second charge");
    let again = report(reconcile(&node, &http));
    assert_eq!(counts(&again), [0; 5], "nothing left: {again}");
    service.kill().unwrap();
    service.wait().unwrap();
}

/// A throwaway CA.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// Writes the CA certificate to `dir/name`.
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &self.pem).unwrap();
        path
    }

    /// A TLS acceptor presenting a certificate for 127.0.0.1 issued by this CA.
    fn acceptor(&self) -> TlsAcceptor {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![SanType::IpAddress("127.0.0.1".parse().unwrap())];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }
}

/// A TLS listener for `axum::serve`: connections whose handshake fails (a client that
/// does not trust the certificate) are dropped, and the next one is accepted.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// Serves `router` over TLS with `acceptor` on a fresh loopback port.
async fn listen_tls(router: axum::Router, acceptor: TlsAcceptor) -> SocketAddr {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    tokio::spawn(axum::serve(TlsListener { tcp, acceptor }, router).into_future());
    addr
}

/// The lookup script of the command check: asks the provider with curl; exit 0 and the
/// reference when it has the charge, 10 when it answers 404, 1 otherwise.
const LOOKUP: &str = r#"#!/bin/sh
answer=$(curl -s -w '\n%{http_code}' "$1/charges/$2") || exit 1
case "$(printf '%s\n' "$answer" | tail -n 1)" in
  200) printf '%s\n' "$answer" | head -n 1 | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; exit 0 ;;
  404) exit 10 ;;
esac
exit 1
"#;

/// Writes the lookup script to `dir`, executable.
fn lookup_script(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("psp-lookup");
    std::fs::write(&path, LOOKUP).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn https_and_command_checks_settle_only_what_the_provider_answers() {
    let node = Node::start(NodeOptions::default());
    let dir = tempfile::TempDir::new().unwrap();
    let (ca, stranger) = (Ca::new(), Ca::new());
    let provider = Arc::new(Provider::default());
    let plain = listen(provider.clone().router()).await;
    let tls = listen_tls(provider.clone().router(), ca.acceptor()).await;
    let psp = ProviderClient::new(format!("http://{plain}"), Duration::from_secs(5));
    let idem = Client::connect(vec![node.endpoint()], ClientOptions::default()).unwrap();

    // Over HTTPS: one charged operation, one never charged.
    let (charged, _) = dying_worker(&idem, &psp, "order-tls", Risk::Normal, true).await;
    dying_worker(&idem, &psp, "order-tls-never", Risk::Normal, false).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let template = format!("https://{tls}/charges/{{operation_id}}");
    let https = |ca_file: &Path| {
        let ca_file = ca_file.to_str().unwrap().to_owned();
        reconcile(
            &node,
            &["--http-template", &template, "--http-cacert", &ca_file],
        )
    };
    let before = idem.get(&target("order-tls")).await.unwrap().record;
    let wrong = report(https(&stranger.write(dir.path(), "stranger.pem")));
    assert_eq!(counts(&wrong), [2, 0, 0, 2, 0], "{wrong}");
    assert_eq!(wrong["records"][0]["action"], "check_error", "{wrong}");
    let untouched = idem.get(&target("order-tls")).await.unwrap().record;
    assert_eq!(untouched.version, before.version, "a failed check settled");
    let right = report(https(&ca.write(dir.path(), "ca.pem")));
    assert_eq!(counts(&right), [2, 1, 1, 0, 0], "{right}");
    let found = idem.get(&target("order-tls")).await.unwrap().record;
    assert_eq!(found.state, State::Completed);
    assert_eq!(found.result.unwrap().resource_id, "psp_1");
    assert_eq!(
        psp.find(&charged.to_string()).await.unwrap().unwrap().id,
        "psp_1"
    );
    let never = idem.get(&target("order-tls-never")).await.unwrap().record;
    assert_eq!(never.state, State::RetryableFailure);

    // The external command: the same decisions, from a script's exit code.
    dying_worker(&idem, &psp, "order-cmd", Risk::High, true).await;
    dying_worker(&idem, &psp, "order-cmd-never", Risk::High, false).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let line = format!(
        "{} http://{plain} {{operation_id}}",
        lookup_script(dir.path()).display()
    );
    let by_command = report(reconcile(&node, &["--command", &line]));
    assert_eq!(counts(&by_command), [2, 1, 1, 0, 0], "{by_command}");
    let found = idem.get(&target("order-cmd")).await.unwrap().record;
    assert_eq!(found.state, State::Completed);
    assert_eq!(found.result.unwrap().resource_id, "psp_2");
    let never = idem.get(&target("order-cmd-never")).await.unwrap().record;
    assert_eq!(never.state, State::RetryableFailure);
    assert_eq!(provider.charges_made(), 2, "the checks charged nothing");
}
