//! The `idemd` binary: configuration errors, `--print-config`, `--help`, and a graceful
//! stop on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn idemd() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_idemd"));
    // A clean environment: no IDEM_* variable of the machine leaks in.
    for (name, _) in std::env::vars() {
        if name.starts_with("IDEM_") {
            command.env_remove(name);
        }
    }
    command
}

#[test]
fn invalid_configuration_exits_2_with_one_line_per_problem() {
    let output = idemd()
        .args([
            "--sweep-batch",
            "0",
            "--write-timeout",
            "soon",
            "--auth",
            "off",
        ])
        .env("IDEM_API_ADDR", "nowhere")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(lines
        .iter()
        .all(|l| l.starts_with("idemd: invalid configuration: ")));
    assert!(stderr.contains("sweep_batch = \"0\" (from flag --sweep-batch)"));
    assert!(stderr.contains("api_addr = \"nowhere\" (from environment IDEM_API_ADDR)"));
}

#[test]
fn a_node_without_credentials_refuses_to_start_and_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let output = idemd()
        .args(["--data-dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("idemd: invalid configuration: auth.credentials: required"),
        "{stderr}"
    );
    assert!(stderr.contains("--auth-credentials FILE"), "{stderr}");
    assert!(stderr.contains("--auth off"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn print_config_shows_the_effective_configuration() {
    let output = idemd()
        .args([
            "--print-config",
            "--node-id",
            "4",
            "--auth-credentials",
            "/etc/idem/credentials.toml",
        ])
        .env("IDEM_REGION", "eu-west")
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("node_id = 4"), "{text}");
    assert!(text.contains("region = \"eu-west\""), "{text}");
    assert!(text.contains("api_addr = \"127.0.0.1:7400\""), "{text}");
    assert!(text.contains("[policy]"), "{text}");
    let printed: toml::Table = text.parse().unwrap();
    assert_eq!(printed["auth"]["mode"].as_str(), Some("on"), "{text}");
}

#[test]
fn help_explains_every_flag() {
    let output = idemd().arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in [
        "--config",
        "--print-config",
        "--node-id",
        "--data-dir",
        "--api-addr",
        "--raft-addr",
        "--http-addr",
        "--write-timeout",
        "--sweep-interval",
        "--max-request-bytes",
        "--default-risk",
        "IDEM_WRITE_TIMEOUT",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

#[cfg(unix)]
#[test]
fn sigterm_stops_the_node_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = idemd()
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--api-addr",
            "127.0.0.1:0",
            "--raft-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--raft-heartbeat-interval",
            "50ms",
            "--raft-election-timeout",
            "300ms",
            "--auth",
            "off",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = Vec::new();
    // Waits until every needle has appeared, in any order: "health status changed" and
    // "node started" are logged by different tasks and may come either way round.
    let wait_for = |needles: &[&str], log: &mut Vec<String>| {
        let mut missing: Vec<&str> = needles.to_vec();
        while !missing.is_empty() {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("no {missing:?} in log:\n{}", log.join("\n")));
            missing.retain(|needle| !line.contains(needle));
            log.push(line);
        }
    };
    wait_for(
        &["\"message\":\"node started\"", "health status changed"],
        &mut log,
    );
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for(&["node stopped"], &mut log);
    let mut child = child;
    let exit = child.0.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "{}", log.join("\n"));
    assert!(log.iter().any(|l| l.contains("SIGTERM")));
}

/// Kills the child if the test fails before it exits.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
