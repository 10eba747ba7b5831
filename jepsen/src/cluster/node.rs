//! One `idemd` process inside its node namespace.
//!
//! A node is started as `ip netns exec <ns> idemd --config <file>`; `ip netns exec` enters the
//! namespace and then execs idemd, so the child's pid is idemd's own and signals go straight
//! to it: SIGKILL for a crash, SIGSTOP/SIGCONT for a pause, SIGTERM for a clean stop. The
//! child gets its own process group, so a Ctrl-C on the harness's terminal reaches the
//! harness (which cleans up) rather than the nodes directly. stdout and stderr are appended to
//! the node's log, across restarts. A node may keep its data on a [`FaultDisk`], which
//! can lose power after a kill.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rustix::process::{kill_process, Pid, Signal};

use super::clock::FakeClock;
use super::disk::FaultDisk;

/// A node's process and how to (re)start it.
#[derive(Debug)]
pub struct NodeProcess {
    /// Node id.
    pub id: usize,
    ns: String,
    idemd: PathBuf,
    config: PathBuf,
    log: PathBuf,
    clock: Option<FakeClock>,
    child: Option<Child>,
    paused: bool,
    disk: Option<FaultDisk>,
    join: bool,
    replacing: Option<String>,
}

impl NodeProcess {
    /// A node not yet started.
    pub fn new(
        id: usize,
        ns: &str,
        idemd: &Path,
        config: &Path,
        log: &Path,
        clock: Option<FakeClock>,
    ) -> NodeProcess {
        NodeProcess {
            id,
            ns: ns.to_string(),
            idemd: idemd.to_path_buf(),
            config: config.to_path_buf(),
            log: log.to_path_buf(),
            clock,
            child: None,
            paused: false,
            disk: None,
            join: false,
            replacing: None,
        }
    }

    /// The same node with its data directory on `disk`.
    pub fn with_disk(mut self, disk: FaultDisk) -> NodeProcess {
        self.disk = Some(disk);
        self
    }

    /// Crashes the node and cuts its disk's power: SIGKILL, then every write it had not
    /// fsynced is dropped. Returns the bytes dropped.
    pub fn power_loss(&mut self) -> anyhow::Result<u64> {
        if self.disk.is_none() {
            anyhow::bail!(
                "power loss of n{}, whose data is not on idem-faultfs",
                self.id
            );
        }
        self.kill()?;
        self.disk.as_ref().map_or(Ok(0), FaultDisk::power_loss)
    }

    /// From the next start on, start with `--join`: on an empty data directory the node waits
    /// to be added (`idemctl member add`) instead of initializing a group from its config's
    /// initial members (a node replaced after its data was lost).
    pub fn set_join(&mut self, join: bool) {
        self.join = join;
    }

    /// Why the node is being replaced, while it is: its data was wiped and it was started
    /// empty, but it has not been added back to the group yet (no live peer took the call).
    pub fn replacing(&self) -> Option<&str> {
        self.replacing.as_deref()
    }

    /// Records (`Some(why)`) or clears (`None`) a replacement in progress.
    pub fn set_replacing(&mut self, why: Option<String>) {
        self.replacing = why;
    }

    /// The node's fake clock, when it runs under libfaketime.
    pub fn clock(&self) -> Option<&FakeClock> {
        self.clock.as_ref()
    }

    /// The node's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Starts idemd (no-op when it is already running).
    pub fn start(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns])
            .arg(&self.idemd)
            .arg("--config")
            .arg(&self.config)
            .args(self.join.then_some("--join"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if let Some(clock) = &self.clock {
            cmd.envs(clock.env());
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} in {}", self.idemd.display(), self.ns))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    /// The process id while the node runs.
    pub fn pid(&mut self) -> Option<u32> {
        if self.is_running() {
            self.child.as_ref().map(Child::id)
        } else {
            None
        }
    }

    /// True while the process exists (paused counts as running).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// True while the node is stopped by SIGSTOP.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    fn signal(&mut self, signal: Signal) -> anyhow::Result<()> {
        let pid = self.pid().context("node is not running")?;
        let pid = Pid::from_raw(pid as i32).context("bad pid")?;
        kill_process(pid, signal).with_context(|| format!("signalling n{}", self.id))
    }

    /// Crashes the node: SIGKILL, then reaps it.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
        Ok(())
    }

    /// Freezes the node (SIGSTOP).
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.signal(Signal::STOP)?;
        self.paused = true;
        Ok(())
    }

    /// Thaws the node (SIGCONT).
    pub fn resume(&mut self) -> anyhow::Result<()> {
        if self.paused {
            self.signal(Signal::CONT)?;
            self.paused = false;
        }
        Ok(())
    }

    /// Stops the node cleanly: SIGCONT if paused, SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let _ = self.resume();
        if self.signal(Signal::TERM).is_ok() {
            let deadline = Instant::now() + grace;
            while self.is_running() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.kill();
    }

    /// Leaves the process running on its own (`cluster up`); returns its pid.
    pub fn detach(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }
}
