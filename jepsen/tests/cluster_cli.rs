//! `idem-jepsen cluster up | exec | down` against a real idemd.
//!
//! Ignored by default for the same reasons as `real_run` (root, namespaces, a built idemd):
//!
//! ```sh
//! sudo -E cargo test --release -p idem-jepsen --test jepsen cluster_cli:: -- --ignored
//! ```

use std::process::Command;

fn jepsen(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_idem-jepsen"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs root, network namespaces and a built idemd"]
fn up_exec_down() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let up = jepsen(&[
        "cluster", "up", "--nodes", "1", "--dir", d, "--prefix", "idemu",
    ]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let state: serde_json::Value = serde_json::from_slice(&up.stdout).unwrap();
    assert_eq!(state["nodes"][0]["api_addr"], "10.77.0.1:7400");
    assert!(dir.path().join("cluster.json").is_file());

    // The hub reaches the node; a node's namespace is its own.
    let health = jepsen(&[
        "cluster", "exec", "--dir", d, "hub", "--", "bash", "-c",
        "exec 3<>/dev/tcp/10.77.0.1/7480 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3",
    ]);
    assert!(
        String::from_utf8_lossy(&health.stdout).contains("200"),
        "{health:?}"
    );
    let code = jepsen(&[
        "cluster", "exec", "--dir", d, "n1", "--", "sh", "-c", "exit 3",
    ]);
    assert_eq!(code.status.code(), Some(3));

    let down = jepsen(&["cluster", "down", "--dir", d]);
    assert!(down.status.success());
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&list.stdout).contains("idemu-"));
}
