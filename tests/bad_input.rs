//! Bad input gets a clear error with a machine-readable reason and changes nothing; a
//! malformed configuration stops idemd at start with a one-line message.

use std::process::Command;

use idem_proto::status::reason_of;
use idem_proto::v1;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_tests::{binary, claim, client, result, target, Node, NodeOptions, ENDPOINT};

fn scope(tenant: &str) -> Option<v1::Scope> {
    Some(v1::Scope {
        tenant: tenant.into(),
        environment: "test".into(),
        actor: "user-42".into(),
        endpoint: ENDPOINT.into(),
    })
}

fn raw_claim(tenant: &str, key: &str, body: Vec<u8>) -> v1::ClaimRequest {
    v1::ClaimRequest {
        scope: scope(tenant),
        key: key.into(),
        request: Some(v1::CanonicalRequest {
            method: "POST".into(),
            route: "/v1/charges".into(),
            body_json: Some(body),
            ..Default::default()
        }),
        holder: "raw-client-1".into(),
        ..Default::default()
    }
}

async fn raw(node: &Node) -> IdempotencyClient<tonic::transport::Channel> {
    IdempotencyClient::connect(format!("http://{}", node.endpoint()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_are_rejected_with_reasons_and_change_nothing() {
    let node = Node::start(NodeOptions::default());
    let mut grpc = raw(&node).await;
    let cases = [
        (raw_claim("acme", "bad key!", b"{}".to_vec()), "INVALID_KEY"),
        (
            raw_claim("acme", &"k".repeat(256), b"{}".to_vec()),
            "INVALID_KEY",
        ),
        (raw_claim("", "good-key", b"{}".to_vec()), "INVALID_SCOPE"),
        (
            raw_claim("ac me", "good-key", b"{}".to_vec()),
            "INVALID_SCOPE",
        ),
        (
            raw_claim("acme", "good-key", b"{not json".to_vec()),
            "INVALID_FINGERPRINT",
        ),
        (
            raw_claim("acme", "good-key", big_json(1_200_000)),
            "BODY_TOO_LARGE",
        ),
        (
            v1::ClaimRequest {
                holder: String::new(),
                ..raw_claim("acme", "good-key", b"{}".to_vec())
            },
            "INVALID_ARGUMENT",
        ),
    ];
    for (request, reason) in cases {
        let status = grpc.claim(request).await.unwrap_err();
        assert_eq!(reason_of(&status).as_deref(), Some(reason), "{status:?}");
    }
    let idem = client(&[node.endpoint()]);
    let missing = idem.get(&target("good-key")).await.unwrap_err();
    assert_eq!(missing.reason(), "NOT_FOUND", "nothing was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_results_are_refused_and_the_record_is_unchanged() {
    let node = Node::start(NodeOptions::default());
    let idem = client(&[node.endpoint()]);
    let key = target("big-result");
    let owned = idem
        .claim(claim(&key, "{}").max_result_bytes(256))
        .await
        .unwrap();
    let fence = owned.fence().unwrap();
    let before = idem.get(&key).await.unwrap().record;
    let mut big = result("ch_big");
    for i in 0..8 {
        big.fields.insert(format!("field{i}"), "x".repeat(100));
    }
    let refused = idem.complete(&key, fence, &big).await.unwrap_err();
    assert_eq!(refused.reason(), "RESULT_TOO_LARGE", "{refused}");
    assert_eq!(idem.get(&key).await.unwrap().record, before);
}

#[test]
fn malformed_configuration_exits_with_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("idemd.toml");
    std::fs::write(&config, "write_timeout = \"soon\"\n").unwrap();
    let cases: [(Vec<String>, &str); 3] = [
        (
            vec!["--config".into(), config.display().to_string()],
            "write_timeout",
        ),
        (vec!["--node-id".into(), "0".into()], "node_id"),
        (vec!["--api-addr".into(), "not-an-address".into()], "api"),
    ];
    for (args, mention) in cases {
        let output = Command::new(binary("idemd"))
            .args(&args)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            // A development node: the only problem is the one under test.
            .args(["--auth", "off"])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?} must fail");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<_> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty() && lines.len() <= 2, "{args:?}: {stderr}");
        assert!(stderr.contains(mention), "{args:?}: {stderr}");
    }
}

fn big_json(bytes: usize) -> Vec<u8> {
    format!("{{\"blob\":\"{}\"}}", "x".repeat(bytes)).into_bytes()
}
