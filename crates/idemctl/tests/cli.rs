//! The built binary's contract without a server: one JSON object on stdout in `-w json`
//! mode, and the documented exit codes (0 help, 2 usage/invalid input, 3 unavailable).

use std::process::{Command, Output};

fn idemctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idemctl"))
        .args(args)
        .env_remove("IDEMCTL_ENDPOINTS")
        .env("IDEMCTL_TENANT", "acme")
        .env("IDEMCTL_ENV", "prod")
        .env("IDEMCTL_ACTOR", "user-42")
        .env("IDEMCTL_ENDPOINT", "POST /v1/charges")
        .output()
        .expect("idemctl runs")
}

/// The single JSON object printed on stdout.
fn json(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout:?}");
    serde_json::from_str(&stdout).unwrap()
}

/// An address where nothing listens (connections are refused at once).
fn dead_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn unreachable_cluster_exits_3_with_a_json_error() {
    let endpoint = dead_endpoint();
    let out = idemctl(&[
        "-w",
        "json",
        "--endpoints",
        &endpoint,
        "--max-attempts",
        "2",
        "claim",
        "--key",
        "k1",
        "--body",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let error = json(&out);
    assert_eq!(error["error"], "UNAVAILABLE");
    assert!(error["message"].as_str().unwrap().contains("2 attempt(s)"));
    assert_eq!(error.as_object().unwrap().len(), 2, "{error}");
}

#[test]
fn invalid_input_exits_2_before_anything_is_sent() {
    let endpoint = dead_endpoint();
    let out = idemctl(&[
        "-w",
        "json",
        "--endpoints",
        &endpoint,
        "get",
        "--key",
        "not a key",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["error"], "INVALID_KEY");

    let out = idemctl(&["-w", "json", "claim", "--key", "k1", "--body", "{nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["error"], "INVALID_ARGUMENT");
}

#[test]
fn region_commands_check_their_input_before_anything_is_sent() {
    let endpoint = dead_endpoint();
    let cases: [(&[&str], &str); 4] = [
        (&["region", "add", "EU West"], "INVALID_ARGUMENT"),
        (
            &["tenant", "bind", "bad tenant", "--home", "eu-west"],
            "INVALID_SCOPE",
        ),
        (&["tenant", "unbind", "bad tenant"], "INVALID_SCOPE"),
        (
            &[
                "failover",
                "confirm",
                "--group",
                "1",
                "--new-home",
                "us east",
                "--reason",
                "x",
            ],
            "INVALID_ARGUMENT",
        ),
    ];
    for (args, reason) in cases {
        let mut all = vec!["-w", "json", "--endpoints", &endpoint];
        all.extend_from_slice(args);
        let out = idemctl(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(json(&out)["error"], reason, "{args:?}");
    }
    let out = idemctl(&["-w", "json", "cluster", "mode", "sideways"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["error"], "USAGE");
    let out = idemctl(&[
        "-w",
        "json",
        "--endpoints",
        &endpoint,
        "--max-attempts",
        "1",
        "failover",
        "status",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["error"], "UNAVAILABLE");
}

#[test]
fn usage_errors_exit_2_and_are_json_when_asked() {
    let out = idemctl(&["-w", "json", "start", "--key", "k1"]);
    assert_eq!(out.status.code(), Some(2));
    let error = json(&out);
    assert_eq!(error["error"], "USAGE");
    assert!(error["message"].as_str().unwrap().contains("--fence"));

    let out = idemctl(&["start", "--key", "k1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fence"));
}

#[test]
fn table_errors_go_to_stderr() {
    let endpoint = dead_endpoint();
    let out = idemctl(&["--endpoints", &endpoint, "--max-attempts", "1", "status"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("Error: UNAVAILABLE: "), "{stderr}");
}

#[test]
fn help_exits_0() {
    for args in [
        &["--help"][..],
        &["op", "list", "--help"],
        &["claim", "-h"],
        &["failover", "--help"],
        &["tenant", "bind", "--help"],
    ] {
        let out = idemctl(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
}
