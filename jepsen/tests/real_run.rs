//! A real, short test run: namespaces, idemd nodes, kills, the register workload.
//!
//! Ignored by default: it needs root, iproute2/iptables and a built idemd (next to the test
//! binary's target directory, or `IDEM_JEPSEN_IDEMD`). `jepsen/ci.sh` is what CI runs; this
//! is the same check from `cargo test`:
//!
//! ```sh
//! cargo build --release --bin idemd
//! sudo -E cargo test --release -p idem-jepsen --test jepsen real_run:: -- --ignored
//! ```

use std::process::Command;

#[test]
#[ignore = "needs root, network namespaces and a built idemd"]
fn short_run_with_kills_is_valid() {
    let store = tempfile::tempdir().unwrap();
    let nodes = std::env::var("IDEM_JEPSEN_NODES").unwrap_or_else(|_| "1".into());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idem-jepsen"));
    cmd.args(["test", "--nodes", &nodes, "--time-limit", "15"])
        .args(["--nemesis", "partition,kill", "--workload", "register"])
        .args(["--seed", "11", "--prefix", "idemt", "--interval", "4s"])
        .arg("--store")
        .arg(store.path());
    if let Ok(idemd) = std::env::var("IDEM_JEPSEN_IDEMD") {
        cmd.args(["--idemd", &idemd]);
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "test run failed: {status}");
    let results = std::fs::read_to_string(store.path().join("latest/results.json")).unwrap();
    let results: serde_json::Value = serde_json::from_str(&results).unwrap();
    assert_eq!(results["valid"], true);
    for file in ["history.edn", "ledger.edn", "latency.png", "rate.png"] {
        assert!(
            store.path().join("latest").join(file).is_file(),
            "{file} missing"
        );
    }
}
