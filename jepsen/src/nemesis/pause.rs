//! Pauses: SIGSTOP and SIGCONT.
//!
//! A paused node is the classic "GC pause" or frozen VM: its connections stay open, it
//! misses heartbeats, and when it resumes it still believes whatever it believed before —
//! a paused leader wakes up thinking it leads. Nothing it then says may contradict the new
//! leader's acknowledged decisions.

use crate::cluster::Cluster;

/// Freezes `nodes` (running ones only).
pub fn pause(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<()> {
    for &id in nodes {
        let mut node = cluster.node(id);
        if node.is_running() && !node.is_paused() {
            node.pause()?;
        }
    }
    Ok(())
}

/// Thaws `nodes`.
pub fn resume(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<()> {
    for &id in nodes {
        cluster.node(id).resume()?;
    }
    Ok(())
}
