//! Membership change: remove a voter from the Raft group, then add it back.
//!
//! A removed node must stop deciding anything; once re-added it must catch up (by log or
//! snapshot) before it counts. Driving this needs membership RPCs on the node's admin API
//! (remove a voter by id; add a node as learner, then promote it). `idem.v1.Admin` has none
//! yet (it has `Status`, which reports the membership), so this nemesis is refused at start
//! until they exist; [`supported`] is where it switches on.

use anyhow::bail;

use crate::cluster::Cluster;

/// Why the membership nemesis cannot run yet.
pub const UNSUPPORTED: &str = "the membership nemesis needs membership RPCs in idem.v1.Admin \
(remove a voter; add a learner and promote it), which idemd does not offer yet";

/// True once idemd can change its membership through its API.
pub fn supported() -> bool {
    false
}

/// Removes `node` from the group.
pub fn remove(_cluster: &Cluster, _node: usize) -> anyhow::Result<()> {
    bail!(UNSUPPORTED)
}

/// Adds `node` back to the group.
pub fn add(_cluster: &Cluster, _node: usize) -> anyhow::Result<()> {
    bail!(UNSUPPORTED)
}
