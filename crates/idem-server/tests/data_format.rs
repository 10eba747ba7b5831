//! The on-disk format version, through the `idemd` binary: a data directory written by a
//! newer format is refused at start with exit code 2, naming `node.toml` and both versions,
//! before anything in it is opened; a directory from before the marker (no `data_format`)
//! starts as format 1, and a new directory records the current format.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use idem_store::DATA_FORMAT_VERSION;

fn idemd(data_dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_idemd"));
    for (name, _) in std::env::vars() {
        if name.starts_with("IDEM_") {
            command.env_remove(name);
        }
    }
    command.args([
        "--log-format",
        "json",
        "--auth",
        "off",
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--api-addr",
        "127.0.0.1:0",
        "--raft-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    command
}

/// Kills the child if the test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts idemd on `data_dir`, waits for its "node started" line (which names the data
/// format), then stops it with SIGTERM and checks it exits cleanly.
fn start_and_stop(data_dir: &std::path::Path) {
    let child = idemd(data_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Running(child);
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut log = Vec::new();
    let started = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no start:\n{}", log.join("\n")));
        if line.contains("node started") {
            break line;
        }
        log.push(line);
    };
    assert!(
        started.contains(&format!("\"data_format\":{DATA_FORMAT_VERSION}")),
        "{started}"
    );
    let pid = child.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_directory_of_a_newer_format_is_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let newer = DATA_FORMAT_VERSION + 1;
    std::fs::write(
        dir.path().join("node.toml"),
        format!("node_id = 1\ndata_format = {newer}\n"),
    )
    .unwrap();
    let output = idemd(dir.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let file = dir.path().join("node.toml");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(stderr.contains(&format!("data format {newer}")), "{stderr}");
    assert!(
        stderr.contains(&format!("reads up to {DATA_FORMAT_VERSION}")),
        "{stderr}"
    );
    // Nothing was opened or created next to the identity file.
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["node.toml"], "{entries:?}");
}

#[test]
fn a_directory_without_a_marker_starts_and_a_new_one_records_the_format() {
    let dir = tempfile::tempdir().unwrap();
    // A directory created before the marker existed (identity only).
    let old = dir.path().join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("node.toml"), "node_id = 1\n").unwrap();
    start_and_stop(&old);
    assert_eq!(
        std::fs::read_to_string(old.join("node.toml")).unwrap(),
        "node_id = 1\n",
        "an unmarked directory is left as it is"
    );

    let new = dir.path().join("new");
    start_and_stop(&new);
    let identity: toml::Table = std::fs::read_to_string(new.join("node.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        identity["data_format"].as_integer(),
        Some(i64::from(DATA_FORMAT_VERSION))
    );
}
