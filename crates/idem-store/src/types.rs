//! The Raft type configuration of idem: what a log entry carries, what apply answers, and
//! what the cluster knows about each node.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The application data of a normal Raft log entry: one command, stamped by the leader.
///
/// The stamp is the proposing leader's wall clock; apply uses `max(stamp, last applied
/// stamp)` so every replica decides lease expiry identically (docs/design.md §2, Time).
///
/// The command is shared, not owned: openraft hands out entries by value, and on a leader
/// each entry is cloned out of the cache of recent entries once for apply and once per
/// follower it is sent to. Behind an `Arc` those clones copy a pointer, not the command's
/// strings and result bytes. The command is encoded as itself (the `shared` module), so the
/// log, the snapshots and the wire are unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The leader's clock when it proposed the command.
    pub stamp: idem_core::Timestamp,
    /// The command to apply.
    #[serde(with = "shared")]
    pub command: Arc<idem_core::Command>,
}

/// Serde of an `Arc<T>` as a plain `T` (what serde's own `rc` feature does, without turning
/// that feature on for every crate of the build).
mod shared {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        value: &Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        T::serialize(value, serializer)
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(deserializer).map(Arc::new)
    }
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

#[cfg(test)]
mod tests {
    use idem_core::testing::{Harness, BODY_A};
    use idem_core::{Command, MemoryStore, Timestamp};
    use serde::Serialize;

    use super::*;

    /// What a `Request` was before its command was shared.
    #[derive(Serialize)]
    struct Owned<'a> {
        stamp: Timestamp,
        command: &'a Command,
    }

    #[test]
    fn a_shared_command_encodes_as_the_owned_one_did() {
        let mut h = Harness::new(MemoryStore::new());
        let key = Harness::<MemoryStore>::target("k-1");
        let command = h.claim_command(&key, BODY_A, "w1");
        let owned = Owned {
            stamp: Timestamp(1_000_000),
            command: &command,
        };
        let request = Request {
            stamp: Timestamp(1_000_000),
            command: Arc::new(command.clone()),
        };
        let bytes = crate::codec::encode(&request).unwrap();
        assert_eq!(bytes, crate::codec::encode(&owned).unwrap());
        assert_eq!(crate::codec::decode::<Request>(&bytes).unwrap(), request);
    }
}
