//! Disk faults under a running node (docs/guarantees.md, "Disk faults"):
//!
//! - a failed fsync (idem-faultfs `fail-fsync on` under one node of three): that node's
//!   Raft stops for good, it answers `NODE_STOPPED` to writes and reads alike, `/healthz`
//!   says why, it acknowledges nothing more while the other two go on; restarted on the
//!   same directory once the fault is cleared, it catches up from its peers;
//! - a full disk (a small tmpfs filled with a ballast file): writes are refused with
//!   `DISK_FULL`, reads and replays go on, and writes resume by themselves once space is
//!   freed, with nothing acknowledged lost.
//!
//! The fault filesystem is served by a child process (this test binary again, see
//! [`child_process`]): a process must not run a store on a FUSE mount it serves itself.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use idem_proto::reason;
use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_server::config::AuthConfig;
use idem_server::{ClusterConfig, Config, InitialMember, Node, NodeHandle};
use openraft::async_runtime::WatchReceiver;
use support::{member, node_config, shutdown, start_all};
use tonic::transport::Channel;
use tonic::Code;

/// Set in the child: `<backing>|<mountpoint>` to serve.
const CHILD_ENV: &str = "IDEM_DISK_FAULTS_CHILD";

/// Not a test on its own: the fault filesystem's server for the tests below (does nothing
/// unless one of them runs it, with `CHILD_ENV` set). Serves until its stdin closes.
#[test]
fn child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (backing, mnt) = spec.split_once('|').unwrap();
    let mount = idem_faultfs::mount(
        Path::new(backing),
        Path::new(mnt),
        &idem_faultfs::Options::default(),
    )
    .unwrap();
    println!("mounted");
    let _ = std::io::stdin().read(&mut [0u8; 1]);
    wait_until_unused(Path::new(mnt));
    mount.unmount().unwrap();
}

/// Returns once the test process holds no file under `mnt`, or has exited. A store may
/// close its last files after its handle is gone (RocksDB's background threads), and one
/// that stopped after a failed fsync may keep them to the end: unmounting under it would
/// fail (`EBUSY`) and leave its files on a dead mount, whose next error RocksDB's WAL writer
/// turns into an abort of the test process.
fn wait_until_unused(mnt: &Path) {
    let parent = std::os::unix::process::parent_id();
    let holds_a_file = || {
        std::fs::read_dir(format!("/proc/{parent}/fd")).is_ok_and(|fds| {
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(mnt)))
        })
    };
    while std::os::unix::process::parent_id() == parent && holds_a_file() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fault filesystem served by a child process; unmounted when dropped.
struct FaultMount {
    child: Child,
    /// Kept open until the child is done: its test harness reports on it after unmounting.
    _stdout: BufReader<ChildStdout>,
    mnt: PathBuf,
}

impl FaultMount {
    /// Mounts one at `dir/mnt` over `dir/backing`; `None` (after saying why) without FUSE.
    fn spawn(dir: &Path) -> Option<FaultMount> {
        if !Path::new("/dev/fuse").exists() {
            eprintln!("skipped: /dev/fuse is absent (the faultfs tests need FUSE and root)");
            return None;
        }
        let (backing, mnt) = (dir.join("backing"), dir.join("mnt"));
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let spec = format!("{}|{}", backing.display(), mnt.display());
        let mut child = Command::new(std::env::current_exe().unwrap())
            // The test's full name in the suite's binary (tests/main.rs).
            .args(["disk_faults::child_process", "--exact", "--nocapture"])
            .env(CHILD_ENV, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        while !line.contains("mounted") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "the mount failed");
        }
        Some(FaultMount {
            child,
            _stdout: out,
            mnt,
        })
    }

    fn control(&self, command: &str) {
        idem_faultfs::control(&self.mnt, command).unwrap();
    }
}

impl Drop for FaultMount {
    /// Tells the child to unmount, and waits a while for it: it unmounts only once this
    /// process holds no file there (see [`wait_until_unused`]), at the latest when it exits.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn client(node: &NodeHandle) -> IdempotencyClient<Channel> {
    IdempotencyClient::connect(format!("http://{}", node.api_addr()))
        .await
        .unwrap()
}

fn scope() -> pb::Scope {
    requests::scope("acme")
}

/// Claims and completes `key` through `node`; the error of the first call that fails.
async fn write(node: &NodeHandle, key: &str) -> Result<(), tonic::Status> {
    let mut c = client(node).await;
    let claim = c
        .claim(requests::claim(scope(), key, "w", r#"{"n": 1}"#))
        .await?
        .into_inner();
    if claim.outcome() != pb::ClaimOutcome::Acquired {
        return Ok(());
    }
    c.complete(requests::complete(scope(), key, claim.fence))
        .await?;
    Ok(())
}

/// The state of `key` read through `node`.
async fn read(node: &NodeHandle, key: &str) -> Result<i32, tonic::Status> {
    let request = pb::GetRequest {
        scope: Some(scope()),
        key: key.into(),
    };
    let record = client(node).await.get(request).await?.into_inner();
    Ok(record.record.map_or(-1, |r| r.state))
}

/// A claim of a finished `key` through `node`: its outcome.
async fn replay(node: &NodeHandle, key: &str) -> Result<pb::ClaimOutcome, tonic::Status> {
    let request = requests::claim(scope(), key, "w2", r#"{"n": 1}"#);
    Ok(client(node)
        .await
        .claim(request)
        .await?
        .into_inner()
        .outcome())
}

/// `/healthz` of `addr`: status code and body.
fn healthz(addr: SocketAddr) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let code = text[9..12].parse().unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (code, body)
}

/// Writes through the healthy `nodes` until `done` (an election may be under way: a write
/// whose outcome is unknown is retried with the same key).
async fn write_until(nodes: &[&NodeHandle], key: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for attempt in 0.. {
        match write(nodes[attempt % nodes.len()], key).await {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("{key}: {e:?}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{key} never succeeded: {e:?}"),
        }
    }
}

fn configs(dir: &Path, faulty_dir: PathBuf) -> Vec<Config> {
    let members: Vec<InitialMember> = (1..=3).map(member).collect();
    let cluster = ClusterConfig {
        initial_members: members.clone(),
        join: false,
    };
    members
        .iter()
        .map(|m| {
            let data = if m.id == 3 {
                faulty_dir.clone()
            } else {
                dir.join(format!("n{}", m.id))
            };
            node_config(data, m, cluster.clone(), AuthConfig::off())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_fsync_stops_the_node_and_a_restart_recovers_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = FaultMount::spawn(dir.path()) else {
        return;
    };
    let configs = configs(dir.path(), fs.mnt.join("n3"));
    let mut nodes = start_all(configs.clone()).await;
    write_until(&[&nodes[0]], "before").await;

    fs.control("fail-fsync on");
    let faulty = nodes.pop().unwrap();
    let healthy: Vec<&NodeHandle> = nodes.iter().collect();
    // Writes go on through the other two; node 3 stops at its first failed fsync.
    for i in 0.. {
        write_until(&healthy, &format!("during-{i}")).await;
        if !faulty.backend().raft_status().running || i == 200 {
            break;
        }
    }
    let status = faulty.backend().raft_status();
    assert!(!status.running, "node 3 still runs after failed fsyncs");
    let (code, body) = healthz(faulty.http_addr());
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("raft stopped") && body.contains("rocksdb"),
        "{body}"
    );

    // Fail closed: no writes, no reads, no local replays.
    support::refused(
        &write(&faulty, "refused").await.unwrap_err(),
        Code::Unavailable,
        reason::NODE_STOPPED,
    );
    support::refused(
        &read(&faulty, "before").await.unwrap_err(),
        Code::Unavailable,
        reason::NODE_STOPPED,
    );
    support::refused(
        &replay(&faulty, "before").await.unwrap_err(),
        Code::Unavailable,
        reason::NODE_STOPPED,
    );

    // It acknowledges nothing more: its log does not grow while the others commit.
    let last = faulty.raft().metrics().borrow_watched().last_log_index;
    for i in 0..5 {
        write_until(&healthy, &format!("after-{i}")).await;
    }
    assert_eq!(
        faulty.raft().metrics().borrow_watched().last_log_index,
        last
    );

    // Restarted on the same directory with the fault cleared, it catches up from its peers.
    if let Err(e) = faulty.shutdown().await {
        eprintln!("node 3 stopped with: {e}");
    }
    fs.control("fail-fsync off");
    let restarted = Node::start(configs[2].clone())
        .await
        .expect("node 3 restarts");
    restarted.wait_ready(Duration::from_secs(20)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match read(&restarted, "after-4").await {
            Ok(state) if state == pb::State::Completed as i32 => break,
            other if Instant::now() < deadline => {
                eprintln!("node 3 not caught up yet: {other:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => panic!("node 3 never caught up: {other:?}"),
        }
    }
    assert_eq!(
        read(&restarted, "before").await.unwrap(),
        pb::State::Completed as i32
    );
    nodes.push(restarted);
    shutdown(nodes).await;
}

/// Mounts a tmpfs of `bytes` at `dir`; `false` (after saying why) where that is not allowed.
fn tmpfs(dir: &Path, bytes: u64) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
        .arg(dir)
        .status();
    match mounted {
        Ok(status) if status.success() => true,
        other => {
            eprintln!("skipped: cannot mount a tmpfs ({other:?}; the test needs root)");
            false
        }
    }
}

/// Unmounts the tmpfs at `dir` when dropped.
struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

/// Free bytes on the filesystem of `dir`.
fn free(dir: &Path) -> u64 {
    let stat = rustix::fs::statvfs(dir).unwrap();
    stat.f_bavail * stat.f_frsize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_refuses_writes_and_serves_reads_until_space_is_freed() {
    const RESERVE: u64 = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    if !tmpfs(&small, 96 << 20) {
        return;
    }
    let _unmount = Unmount(&small);
    let data = small.join("data");
    let mut config = node_config(
        data,
        &member(1),
        ClusterConfig::default(),
        AuthConfig::off(),
    );
    config.limits.disk_reserve = RESERVE;
    let node = start_all([config]).await.pop().unwrap();
    for i in 0..20 {
        write(&node, &format!("k{i}")).await.unwrap();
    }

    // Fill the disk to 1 MiB under the reserve.
    let ballast = small.join("ballast");
    let fill = free(&small) - RESERVE + (1 << 20);
    std::fs::write(&ballast, vec![7u8; fill as usize]).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    support::refused(
        &write(&node, "new").await.unwrap_err(),
        Code::ResourceExhausted,
        reason::DISK_FULL,
    );
    let (code, body) = healthz(node.http_addr());
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("disk full"), "{body}");
    assert_eq!(node.metrics().disk_full.get(), 1);
    // Reads and replays of finished keys go on.
    assert_eq!(
        read(&node, "k3").await.unwrap(),
        pb::State::Completed as i32
    );
    assert_eq!(
        replay(&node, "k3").await.unwrap(),
        pb::ClaimOutcome::Completed
    );

    // Space freed: writes resume by themselves; nothing acknowledged was lost.
    std::fs::remove_file(&ballast).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    write(&node, "new").await.unwrap();
    for i in 0..20 {
        assert_eq!(
            read(&node, &format!("k{i}")).await.unwrap(),
            pb::State::Completed as i32
        );
    }
    assert_eq!(node.metrics().disk_full.get(), 0);
    node.shutdown().await.unwrap();
}
