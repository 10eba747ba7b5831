//! The docs/troubleshooting.md walkthrough "a planted double-key bug" as a test: a client
//! that makes a new key per attempt charges twice after a provider timeout, and the
//! signals the guide names show it (the tenant's claims grow by two with no replay or
//! in-flight answer; `idemctl op list` shows two records of one actor and endpoint with
//! different keys, one attempt each, the first RETRYABLE_FAILURE at stage CALLING). With the
//! key kept across attempts the retry takes over (`idem_takeovers_total{previous_stage=
//! "CALLING"}`), asks the provider, and there is one record and one charge.

use crate::common;

use common::{post, setup, Setup};
use http::StatusCode;
use idem_tests::{idemctl, Node};
use payments::provider::Mode;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;

const BODY: &str = r#"{"amount":700,"currency":"EUR"}"#;

/// The sample of `series` (name and labels exactly as exposed) on the node's `/metrics`,
/// 0 when absent.
async fn metric(http: SocketAddr, series: &str) -> f64 {
    let text = get_metrics(http).await;
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| value.parse().unwrap())
}

/// `GET /metrics` of the node's HTTP address.
async fn get_metrics(http: SocketAddr) -> String {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client as HttpClient;
    use hyper_util::rt::TokioExecutor;
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let uri = format!("http://{http}/metrics").parse().unwrap();
    let response = client.get(uri).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `idemctl -w json op list --tenant acme`: the records.
fn op_list(node: &Node) -> Vec<Value> {
    let output = Command::new(idemctl())
        .args(["--endpoints", &node.endpoint(), "-w", "json"])
        .args(["op", "list", "--tenant", "acme"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    doc["records"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_key_per_attempt_is_seen_in_the_signals_the_guide_names() {
    let Setup {
        node,
        provider,
        addr,
        ..
    } = setup().await;
    let claims = r#"idem_tenant_claims_total{signal="claim",tenant="acme"}"#;
    let replays = r#"idem_tenant_claims_total{signal="replay",tenant="acme"}"#;
    let in_flight = r#"idem_tenant_claims_total{signal="in_flight",tenant="acme"}"#;
    let takeovers = r#"idem_takeovers_total{previous_stage="CALLING"}"#;

    // The bug: a key per attempt. The first attempt times out after the provider charged.
    provider.push(&[Mode::Timeout]);
    let first = post(addr, "5b0c1d2e-attempt-one-3f4a5b6c7d8e", BODY).await;
    assert_eq!(first.status, StatusCode::GATEWAY_TIMEOUT);
    let second = post(addr, "9e8d7c6b-attempt-two-5a4f3e2d1c0b", BODY).await;
    assert_eq!(second.status, StatusCode::CREATED);
    assert_eq!(provider.charges_made(), 2, "charged twice");
    assert_eq!(metric(node.http_addr, claims).await, 2.0);
    assert_eq!(metric(node.http_addr, replays).await, 0.0);
    assert_eq!(metric(node.http_addr, in_flight).await, 0.0);
    let records = op_list(&node);
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(record["endpoint"], "POST /v1/charges");
        assert_eq!(record["actor"], "user-42");
        assert_eq!(record["attempts"], 1);
    }
    assert_ne!(records[0]["key"], records[1]["key"]);
    let mut states: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["state"].as_str().unwrap(), r["stage"].as_str().unwrap()))
        .collect();
    states.sort_unstable();
    assert_eq!(
        states,
        [
            ("COMPLETED", "LOCAL_DONE"),
            ("RETRYABLE_FAILURE", "CALLING")
        ]
    );

    // The fix: one key for both attempts. The retry takes over, told CALLING, and finds
    // the first attempt's charge at the provider.
    provider.push(&[Mode::Timeout]);
    let key = "0f1e2d3c-one-intent-4b5a69788796";
    assert_eq!(
        post(addr, key, BODY).await.status,
        StatusCode::GATEWAY_TIMEOUT
    );
    let retry = post(addr, key, BODY).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(provider.charges_made(), 3, "one charge for the intent");
    assert_eq!(metric(node.http_addr, takeovers).await, 1.0);
    let records = op_list(&node);
    let kept: Vec<_> = records.iter().filter(|r| r["key"] == key).collect();
    assert_eq!(kept.len(), 1, "{records:?}");
    assert_eq!(
        (&kept[0]["state"], &kept[0]["attempts"]),
        (&Value::from("COMPLETED"), &Value::from(2))
    );
}
