//! Crashes: kill -9 and restart.
//!
//! SIGKILL gives the node no chance to flush or say goodbye: whatever it acknowledged must
//! already be durable (the log's flush callback fires only after the WAL is synced,
//! docs/design.md §4). The node restarts from the same data directory and config at heal.

use crate::cluster::Cluster;

/// SIGKILLs `nodes`.
pub fn kill(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<()> {
    for &id in nodes {
        cluster.node(id).kill()?;
    }
    Ok(())
}

/// Restarts `nodes` (those not running).
pub fn restart(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<()> {
    for &id in nodes {
        cluster.node(id).start()?;
    }
    Ok(())
}
