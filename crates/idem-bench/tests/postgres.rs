//! The Postgres baseline end to end: `scripts/bench/postgres.sh up` on a free port, a short
//! `idem-bench sweep --backend postgres` of every workload with one connection per client and
//! the server watched as a process tree, then `down`.
//!
//! It checks what the unit tests cannot: the SQL against a real server (claims acquire,
//! completes match their fence, retries replay, hot keys contend without errors) and that the
//! whole server's CPU is counted. Machines without PostgreSQL (`make test` on a fresh CI
//! machine; `make bench` installs it) skip it with the reason printed.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench/postgres.sh")
}

/// Runs `postgres.sh <command>` on `dir` and `port`; its stdout.
fn postgres_sh(command: &str, dir: &Path, port: u16) -> Result<String, String> {
    let out = Command::new(script())
        .arg(command)
        .env("IDEM_POSTGRES_DIR", dir)
        .env("IDEM_POSTGRES_PORT", port.to_string())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Stops the server however the test ends.
struct Server {
    dir: PathBuf,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = postgres_sh("down", &self.dir, self.port);
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn every_workload_runs_without_errors_and_counts_the_server_tree() {
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let dir = work.path().join("postgres");
    if let Err(reason) = postgres_sh("bin", &dir, port) {
        eprintln!("skipped: {reason}");
        return;
    }
    // Searchable by the postgres user, which runs the server when the test runs as root.
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    postgres_sh("up", &dir, port).unwrap();
    let server = Server { dir, port };
    let pid = postgres_sh("pids", &server.dir, port).unwrap();
    let out = work.path().join("postgres.json");
    let status = Command::new(env!("CARGO_BIN_EXE_idem-bench"))
        .args(["sweep", "--backend", "postgres", "--connection-per-client"])
        .args(["--endpoints", &format!("127.0.0.1:{port}")])
        .args(["--workloads", "claim,retry,contention", "--clients", "1,4"])
        .args(["--duration", "1s", "--warmup", "200ms", "--pool", "50"])
        .args(["--node-tree", &pid, "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["backend"], "postgres");
    assert_eq!(report["connection_per_client"], true);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    for run in runs {
        let what = format!("{} at {} clients", run["workload"], run["clients"]);
        let counts = &run["counts"];
        assert_eq!(counts["errors"], 0, "{what}: {}", run["first_error"]);
        assert_eq!(counts["other"], 0, "{what}");
        assert!(run["ops"].as_u64().unwrap() > 0, "{what}");
        // Retries replay completed keys; new and hot keys are acquired (and completed).
        let answer = if run["workload"] == "retry" {
            "replayed"
        } else {
            "acquired"
        };
        assert!(counts[answer].as_u64().unwrap() > 0, "{what}: {counts}");
        let server = &run["nodes"][0];
        assert!(server["cpu_ms"].as_f64().unwrap() > 0.0, "{what}: {server}");
        assert!(
            server["rss_mib"].as_f64().unwrap() > 0.0,
            "{what}: {server}"
        );
    }
    drop(server);
}
