//! The Raft type configuration of idem: what a log entry carries, what apply answers, and
//! what the cluster knows about each node.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The application data of a normal Raft log entry: one command, stamped by the leader.
///
/// The stamp is the proposing leader's wall clock; apply uses `max(stamp, last applied
/// stamp)` so every replica decides lease expiry identically (docs/design.md §2, Time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The leader's clock when it proposed the command.
    pub stamp: idem_core::Timestamp,
    /// The command to apply.
    pub command: idem_core::Command,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.command.name(), self.stamp.millis())
    }
}

/// What applying one log entry answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The command's outcome; `None` for blank and membership entries.
    pub outcome: Option<idem_core::Outcome>,
}

/// What the cluster records about a node (openraft's `Node` type).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's region (for home-region routing and the failover guard).
    pub region: String,
    /// The node's zone within the region.
    pub zone: String,
    /// Address of the node-to-node Raft service.
    pub raft_addr: String,
    /// Address of the public API.
    pub api_addr: String,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} raft={} api={}",
            self.region, self.zone, self.raft_addr, self.api_addr
        )
    }
}

openraft::declare_raft_types!(
    /// The Raft type configuration of an idem group.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = NodeInfo,
);

/// A log id: the leader that proposed an entry and its index.
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
/// A vote (term, candidate, committed flag).
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
/// A Raft log entry.
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
/// A membership config with the log id that introduced it.
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
/// What a snapshot covers: last log id and membership.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
/// The data of a snapshot: an open file (format: see the crate docs), never bytes in memory.
pub type SnapshotData = crate::SnapshotFile;
/// A snapshot: meta and data.
pub type Snapshot = openraft::alias::SnapshotOf<TypeConfig, SnapshotData>;
/// A Raft node running on these stores.
pub type Raft = openraft::Raft<TypeConfig, crate::StateMachine>;
