//! Membership change: remove a voter from the Raft group, then add it back.
//!
//! A removed node must stop counting: the group decides without it, and nothing it still
//! believes may contradict what the group acknowledged since. Re-added as a learner, it must
//! catch up (by log or snapshot) before it is promoted to voter again. The changes go through
//! the real `idemctl` (`member remove`, `member add`, `member promote`), as an operator runs
//! them, against the other live nodes (any node forwards membership calls to the leader).
//! A call that exits 3 (no node answered, or the outcome is unknown; membership calls are
//! idempotent) or answers `WRONG_STATE` (another change still in progress) is retried.
//! The removed node keeps running with its data, so re-adding it tests a stale member
//! rejoining under its old id.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::cluster::{tools, Cluster};

/// Attempts of one idemctl call (each bounded by the server's own timeouts, a few seconds):
/// a change that cannot get a quorum (other faults in force) gives up rather than hold the
/// fault open; the final heal adds removed nodes back once everything else is healed.
const ATTEMPTS: usize = 5;

/// Runs membership changes through idemctl.
#[derive(Debug, Clone)]
pub struct Membership {
    idemctl: PathBuf,
}

impl Membership {
    /// Finds idemctl (`explicit`, else next to idem-jepsen) and checks that it has the
    /// `member` commands.
    pub fn locate(explicit: Option<&Path>) -> anyhow::Result<Membership> {
        let idemctl = tools::locate_binary("idemctl", explicit)?;
        let help = Command::new(&idemctl)
            .args(["member", "--help"])
            .output()
            .with_context(|| format!("running {}", idemctl.display()))?;
        if !help.status.success() {
            bail!(
                "the membership nemesis needs `idemctl member add|promote|remove`, which {} does not have",
                idemctl.display()
            );
        }
        Ok(Membership { idemctl })
    }

    /// Removes `node` from the group.
    pub fn remove(&self, cluster: &Cluster, node: usize) -> anyhow::Result<()> {
        // No such member: the node is out already (a retry after an unknown outcome that
        // took effect, or an earlier removal), which is what was asked; re-added at heal.
        let args = ["member", "remove", &node.to_string()];
        self.ctl(cluster, node, &args, Some("NOT_FOUND")).map(drop)
    }

    /// Adds `node` back: as a learner (returns once it caught up), then promoted to voter.
    pub fn add(&self, cluster: &Cluster, node: usize) -> anyhow::Result<()> {
        let t = &cluster.topology;
        let id = node.to_string();
        let (raft, api) = (t.raft_addr(node), t.api_addr(node));
        let (region, zone) = (
            cluster.regions.region_name(node),
            cluster.regions.zone_name(node),
        );
        self.ctl(
            cluster,
            node,
            &[
                "member",
                "add",
                "--id",
                &id,
                "--raft-addr",
                &raft,
                "--api-addr",
                &api,
                "--region",
                &region,
                "--zone",
                &zone,
            ],
            None,
        )?;
        self.ctl(cluster, node, &["member", "promote", &id], None)
            .map(drop)
    }

    /// Runs `idemctl -w json ARGS` against the live nodes other than `target`; an answer
    /// containing `already_done` counts as success.
    fn ctl(
        &self,
        cluster: &Cluster,
        target: usize,
        args: &[&str],
        already_done: Option<&str>,
    ) -> anyhow::Result<String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let endpoints: Vec<String> = cluster
                .live_nodes()
                .into_iter()
                .filter(|&n| n != target)
                .map(|n| cluster.topology.api_addr(n))
                .collect();
            if endpoints.is_empty() {
                bail!("no live node to send `idemctl {}` to", args.join(" "));
            }
            let out = cluster
                .admin_access()
                .idemctl(&self.idemctl)
                .args(["--endpoints", &endpoints.join(","), "-w", "json"])
                .args(args)
                .output()
                .with_context(|| format!("running {}", self.idemctl.display()))?;
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() || already_done.is_some_and(|m| stdout.contains(m)) {
                return Ok(stdout);
            }
            last = format!(
                "exit {:?}: {stdout}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            if out.status.code() != Some(3) && !stdout.contains("WRONG_STATE") {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        bail!("idemctl {}: {last}", args.join(" "))
    }
}
