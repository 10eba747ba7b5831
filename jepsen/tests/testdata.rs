//! The checkers and the `check` command against the stored sample histories in `testdata/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use idem_jepsen::checker::Validity;
use idem_jepsen::{check_all, History, Ledger, Results};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(rel)
}

fn check_dir(dir: &str) -> Results {
    let dir = testdata(dir);
    let history = ["history.edn", "history.jsonl"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .expect("a history file");
    let ledger = ["ledger.edn", "ledger.jsonl"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file());
    let history = History::read(&history).unwrap();
    let ledger = ledger.map(|p| Ledger::read(&p).unwrap());
    check_all(&history, ledger.as_ref())
}

fn verdict(results: &Results, checker: &str) -> Validity {
    results.checkers[checker].valid
}

fn anomaly_types(results: &Results, checker: &str) -> Vec<String> {
    results.checkers[checker]
        .anomalies
        .iter()
        .map(|a| a["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn good_histories_pass_every_checker() {
    for dir in ["good", "good-json", "foreign"] {
        let results = check_dir(dir);
        for (name, r) in &results.checkers {
            assert_eq!(r.valid, Validity::Valid, "{dir}: {name}: {r:?}");
        }
        assert!(results.valid);
    }
}

#[test]
fn the_generated_good_history_exercises_faults_and_unknown_outcomes() {
    let results = check_dir("good");
    let c = &results.counts;
    assert!(c.unknown_outcomes > 0 && c.faults >= 4, "{c:?}");
    let fencing = &results.checkers["fencing"].counts;
    assert!(fencing["stale-fence-rejected"] > 0, "{fencing:?}");
    let at_most_once = &results.checkers["at-most-once"].counts;
    assert!(at_most_once["suppressed-duplicates"] > 0);
    assert!(results.checkers["fingerprint"].counts["refused"] > 0);
}

#[test]
fn edn_and_json_copies_give_the_same_results() {
    let edn = check_dir("good");
    let json = check_dir("good-json");
    assert_eq!(edn.checkers, json.checkers);
}

#[test]
fn double_execution_is_flagged() {
    let r = check_dir("bad/double-execution");
    assert!(!r.valid);
    assert_eq!(
        anomaly_types(&r, "at-most-once"),
        ["multiple-executions", "multiple-operation-ids"]
    );
}

#[test]
fn lost_acknowledgement_is_flagged() {
    let r = check_dir("bad/lost-ack");
    assert_eq!(anomaly_types(&r, "acknowledged"), ["lost-acknowledgement"]);
    assert_eq!(verdict(&r, "linearizable"), Validity::Invalid);
}

#[test]
fn non_linearizable_read_is_flagged() {
    let r = check_dir("bad/non-linearizable");
    assert_eq!(anomaly_types(&r, "linearizable"), ["non-linearizable"]);
    assert_eq!(verdict(&r, "acknowledged"), Validity::Valid);
}

#[test]
fn accepted_mismatch_is_flagged() {
    let r = check_dir("bad/accepted-mismatch");
    assert_eq!(
        anomaly_types(&r, "fingerprint"),
        ["accepted-mismatch", "accepted-mismatch"]
    );
}

#[test]
fn applied_stale_fence_is_flagged() {
    let r = check_dir("bad/stale-fence");
    assert_eq!(
        anomaly_types(&r, "fencing"),
        ["stale-fence-applied", "stale-fence-applied"]
    );
}

fn run_check(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_idem-jepsen"))
        .arg("check")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn check_command_exit_codes_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let good = testdata("good/history.edn");
    let out = dir.path().to_str().unwrap();
    let (code, stdout) = run_check(&[good.to_str().unwrap(), "--out", out]);
    assert_eq!(code, 0);
    let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(printed["valid"], true);
    // The ledger beside the history was found.
    assert_eq!(printed["checkers"]["at-most-once"]["valid"], true);
    let written = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&written).unwrap(),
        printed
    );
    for png in ["latency.png", "rate.png"] {
        assert!(dir.path().join(png).is_file(), "{png}");
    }

    let bad = testdata("bad/stale-fence/history.edn");
    assert_eq!(run_check(&[bad.to_str().unwrap()]).0, 1);
    let ledger = testdata("bad/double-execution/ledger.edn");
    let (code, stdout) = run_check(&[
        testdata("good/history.edn").to_str().unwrap(),
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(run_check(&["/nonexistent/history.edn"]).0, 2);
}
