//! Power losses: kill -9, then every write the disk had not fsynced is gone.
//!
//! A kill alone never loses data that was written but not fsynced (the kernel still holds
//! it), so an fsync missing before an acknowledgement passes every kill test. Here each node's
//! data directory is an idem-faultfs mount ([`crate::cluster::disk`]); the nemesis kills one
//! node, a majority or every node, drops their unsynced writes (files back to their last
//! fsync, names back to their directory's last fsync), and restarts them at heal. Losing one
//! node's unsynced tail is always survivable; losing a majority's at once is survivable only
//! because a write is acknowledged after a majority has it *on disk* — exactly what this
//! fault checks.

use crate::cluster::Cluster;

/// Kills `nodes` and cuts their disks' power; returns the bytes dropped per node.
pub fn power_loss(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<Vec<(usize, u64)>> {
    // Kill every node first: with all of them down at once, none can hand another an entry
    // that was about to be dropped.
    for &id in nodes {
        cluster.node(id).kill()?;
    }
    let mut dropped = Vec::new();
    for &id in nodes {
        dropped.push((id, cluster.node(id).power_loss()?));
    }
    Ok(dropped)
}

/// Describes what was dropped: `n1 (4096 unsynced bytes lost), n3 (nothing unsynced)`.
pub fn describe(dropped: &[(usize, u64)]) -> String {
    dropped
        .iter()
        .map(|&(id, bytes)| match bytes {
            0 => format!("n{id} (nothing unsynced)"),
            b => format!("n{id} ({b} unsynced bytes lost)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_loss_per_node() {
        assert_eq!(
            describe(&[(1, 4096), (3, 0)]),
            "n1 (4096 unsynced bytes lost), n3 (nothing unsynced)"
        );
        assert_eq!(describe(&[]), "");
    }
}
