//! Prerequisites: root, the system tools, idemd.
//!
//! Network namespaces, iptables and tc need root; the harness says so up front instead of
//! failing halfway through building a network. Missing Debian packages (iproute2, iptables,
//! libfaketime) are installed with apt-get when possible (`scripts/bootstrap.sh` does the
//! same for the whole project), else named in the error.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use super::clock;
use super::command::Cmd;

/// Fails with a clear message unless running as root.
pub fn require_root() -> anyhow::Result<()> {
    if !rustix::process::geteuid().is_root() {
        bail!(
            "idem-jepsen needs root for network namespaces, iptables and tc: run it with sudo (or as root)"
        );
    }
    Ok(())
}

/// What a run needs from the system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// libfaketime, for clock skew.
    pub faketime: bool,
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The Debian packages missing for `needs`.
pub fn missing_packages(needs: Needs) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !on_path("ip") || !on_path("tc") {
        missing.push("iproute2");
    }
    if !on_path("iptables") {
        missing.push("iptables");
    }
    if needs.faketime && clock::find_library().is_none() {
        missing.push("libfaketime");
    }
    missing
}

/// Installs missing packages with apt-get when possible; errors naming what is still missing.
pub fn ensure_tools(needs: Needs) -> anyhow::Result<()> {
    let missing = missing_packages(needs);
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("prerequisites: installing {}", missing.join(" "));
    if on_path("apt-get") {
        let _ = Cmd::new(["apt-get", "update", "-qq"]).run();
        let mut install = vec!["apt-get", "install", "-y", "-qq", "--no-install-recommends"];
        install.extend(&missing);
        if let Err(e) = Cmd::new(install).run() {
            eprintln!("prerequisites: {e:#}");
        }
    }
    let still = missing_packages(needs);
    if !still.is_empty() {
        bail!(
            "missing system packages: {} (install them, e.g. scripts/bootstrap.sh)",
            still.join(" ")
        );
    }
    Ok(())
}

/// True when the kernel can delay packets (`tc qdisc ... netem`), tried on `ns`'s loopback.
pub fn netem_available(ns: &str) -> bool {
    let add = Cmd::in_netns(
        ns,
        Cmd::new([
            "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
        ]),
    );
    let ok = add.run_quietly();
    if ok {
        Cmd::in_netns(ns, Cmd::new(["tc", "qdisc", "del", "dev", "lo", "root"])).run_quietly();
    }
    ok
}

/// The idemd binary: `explicit`, else `idemd` next to this executable (or one directory up,
/// for test binaries in `target/release/deps`).
pub fn locate_idemd(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    locate_binary("idemd", explicit)
}

/// A binary of the workspace (`idemd`, `idemctl`): `explicit`, else next to this executable
/// (or one directory up, for test binaries in `target/release/deps`).
pub fn locate_binary(name: &str, explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(path.to_path_buf());
        }
        bail!("--{name} {}: no such file", path.display());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let mut dir = exe.parent().map(Path::to_path_buf);
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let candidate = d.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    bail!(
        "{name} not found next to {}: build it (cargo build --release --bin {name}) or pass --{name} PATH",
        exe.display()
    )
}
