//! The README's idemctl session, driven through the real binary against a real node:
//! claim, retry, complete, replay, mismatch, errors as JSON with exit codes, admin reads.

use std::process::Command;

use idem_tests::{idemctl, Node, NodeOptions};
use serde_json::Value;

const SCOPE: [&str; 8] = [
    "--tenant",
    "acme",
    "--env",
    "test",
    "--actor",
    "user-42",
    "--endpoint",
    "POST /v1/charges",
];

/// Runs `idemctl -w json ARGS` against `node`; returns the exit code and the one JSON object.
fn ctl(node: &Node, args: &[&str]) -> (i32, Value) {
    let output = Command::new(idemctl())
        .args(["--endpoints", &node.endpoint(), "-w", "json"])
        .args(args)
        .output()
        .expect("run idemctl");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "exactly one JSON object for {args:?}: {stdout}"
    );
    let json = serde_json::from_str(lines[0]).expect("JSON output");
    (output.status.code().unwrap_or(-1), json)
}

fn scoped<'a>(command: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![command];
    args.extend_from_slice(&SCOPE);
    args.extend_from_slice(rest);
    args
}

#[test]
fn an_operator_session_through_idemctl() {
    let node = Node::start(NodeOptions::default());
    let body = r#"{"amount":1000,"currency":"EUR"}"#;

    let (code, first) = ctl(&node, &scoped("claim", &["--key", "k1", "--body", body]));
    assert_eq!(
        (code, first["outcome"].as_str()),
        (0, Some("ACQUIRED")),
        "{first}"
    );
    assert_eq!(first["fence"], 1);
    assert_eq!(first["state"], "PENDING");
    assert_eq!(first["version"], 1);
    let operation_id = first["operation_id"].as_str().unwrap().to_owned();

    let (code, retry) = ctl(&node, &scoped("claim", &["--key", "k1", "--body", body]));
    assert_eq!(
        (code, retry["outcome"].as_str()),
        (0, Some("IN_PROGRESS")),
        "{retry}"
    );
    assert!(retry["fence"].is_null(), "only the owner sees the fence");

    let complete = scoped(
        "complete",
        &[
            "--key",
            "k1",
            "--fence",
            "1",
            "--status",
            "201",
            "--resource-id",
            "ch_1",
            "--field",
            "amount=1000",
        ],
    );
    let (code, done) = ctl(&node, &complete);
    assert_eq!(
        (code, done["state"].as_str()),
        (0, Some("COMPLETED")),
        "{done}"
    );

    let reordered = r#"{ "currency": "EUR", "amount": 1000 }"#;
    let (code, replay) = ctl(
        &node,
        &scoped("claim", &["--key", "k1", "--body", reordered]),
    );
    assert_eq!(
        (code, replay["outcome"].as_str()),
        (0, Some("COMPLETED")),
        "{replay}"
    );
    assert_eq!(replay["result"]["resource_id"], "ch_1");

    let other = r#"{"amount":2000,"currency":"EUR"}"#;
    let (code, mismatch) = ctl(&node, &scoped("claim", &["--key", "k1", "--body", other]));
    assert_eq!(
        (code, mismatch["outcome"].as_str()),
        (0, Some("FINGERPRINT_MISMATCH"))
    );

    let (code, stale) = ctl(&node, &scoped("start", &["--key", "k1", "--fence", "7"]));
    assert_eq!(
        (code, stale["error"].as_str()),
        (1, Some("STALE_FENCE")),
        "{stale}"
    );
    assert!(stale["message"].is_string());

    let (code, invalid) = ctl(
        &node,
        &scoped("claim", &["--key", "bad key", "--body", body]),
    );
    assert_eq!(
        (code, invalid["error"].as_str()),
        (2, Some("INVALID_KEY")),
        "{invalid}"
    );

    let (code, shown) = ctl(&node, &["op", "show", &operation_id]);
    assert_eq!(
        (code, shown["outcome"].as_str()),
        (0, Some("COMPLETED")),
        "{shown}"
    );

    let (code, _) = ctl(&node, &scoped("claim", &["--key", "k2", "--body", body]));
    assert_eq!(code, 0);
    let (code, listed) = ctl(&node, &["op", "list", "--state", "PENDING"]);
    assert_eq!(code, 0, "{listed}");
    assert_eq!(
        listed["records"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    let (code, status) = ctl(&node, &["status"]);
    assert_eq!(code, 0, "{status}");
}

#[test]
fn unreachable_cluster_exits_3_with_a_json_error() {
    let port = idem_tests::free_port();
    let output = Command::new(idemctl())
        .args([
            "--endpoints",
            &port.to_string(),
            "-w",
            "json",
            "--max-attempts",
            "1",
        ])
        .args(["status"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["error"], "UNAVAILABLE");
}

/// `idemctl audit list --kind KIND`: (admin, reason) of each entry.
fn audited(node: &Node, kind: &str) -> Vec<(String, String)> {
    let (code, listed) = ctl(node, &["audit", "list", "--kind", kind]);
    assert_eq!(code, 0, "{listed}");
    listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap().to_owned();
            (field("admin"), field("reason"))
        })
        .collect()
}

#[test]
fn admin_changes_carry_their_reason_into_the_audit_log() {
    let node = Node::start(NodeOptions::default());
    let (code, added) = ctl(&node, &["region", "add", "r1", "--reason", "CHG-42"]);
    assert_eq!(code, 0, "{added}");
    let by_env = Command::new(idemctl())
        .args(["--endpoints", &node.endpoint(), "-w", "json"])
        .args(["cluster", "mode", "region-affinity"])
        .env("IDEMCTL_REASON", "CHG-43 from the environment")
        .output()
        .unwrap();
    assert_eq!(by_env.status.code(), Some(0), "{by_env:?}");
    let (code, _) = ctl(&node, &["region", "add", "r2"]);
    assert_eq!(code, 0);
    let who = || "unauthenticated".to_owned();
    assert_eq!(
        audited(&node, "add_region"),
        vec![
            (who(), "CHG-42".to_owned()),
            (who(), "(no reason given)".to_owned())
        ]
    );
    assert_eq!(
        audited(&node, "set_mode"),
        vec![(who(), "CHG-43 from the environment".to_owned())]
    );
    let long = "r".repeat(1025);
    let (code, refused) = ctl(&node, &["region", "add", "r3", "--reason", &long]);
    assert_eq!(
        (code, refused["error"].as_str()),
        (2, Some("INVALID_ARGUMENT"))
    );

    // Replicated tokens through idemctl, audited with their reason; the secret is shown once.
    let create = [
        "auth", "token", "create", "--name", "ci", "--tenant", "acme", "--reason", "CHG-44",
    ];
    let (code, created) = ctl(&node, &create);
    assert_eq!(code, 0, "{created}");
    let secret = created["token"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("idem_"), "{created}");
    let (code, listed) = ctl(&node, &["auth", "token", "list"]);
    assert_eq!(code, 0, "{listed}");
    assert_eq!(listed["tokens"][0]["name"], "ci");
    assert_eq!(listed["tokens"][0]["role"], "worker");
    assert!(!listed.to_string().contains(&secret[5..]));
    let (code, again) = ctl(&node, &create);
    assert_eq!((code, again["error"].as_str()), (1, Some("TOKEN_EXISTS")));
    let (code, _) = ctl(&node, &["auth", "token", "revoke", "--name", "ci"]);
    assert_eq!(code, 0);
    assert_eq!(
        audited(&node, "create_token"),
        vec![(who(), "CHG-44".to_owned())]
    );
    assert_eq!(
        audited(&node, "revoke_token"),
        vec![(who(), "(no reason given)".to_owned())]
    );
}
