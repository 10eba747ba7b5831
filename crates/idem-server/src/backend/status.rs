//! This node's view of one Raft group: the members and the log positions `Admin.Status`,
//! `/healthz` and the metrics report.

/// One member of the Raft group, as reported by `Admin.Status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemberInfo {
    /// Raft node id.
    pub id: u64,
    /// Region of the node.
    pub region: String,
    /// Zone of the node.
    pub zone: String,
    /// Node-to-node Raft address.
    pub raft_addr: String,
    /// Public API address.
    pub api_addr: String,
    /// Voter (true) or learner (false).
    pub voter: bool,
}

/// This node's view of its Raft group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftStatus {
    /// This node's id.
    pub node_id: u64,
    /// The leader this node knows of.
    pub leader_id: Option<u64>,
    /// The current term.
    pub term: u64,
    /// Highest committed log index.
    pub commit_index: u64,
    /// Highest applied log index.
    pub applied_index: u64,
    /// Highest log index in this node's log.
    pub last_log_index: u64,
    /// Members of the group.
    pub members: Vec<MemberInfo>,
    /// False once the Raft core stopped on a fatal error (storage failure, shutdown).
    pub running: bool,
    /// Why it stopped, once it did (openraft's fatal error: the failed operation and file).
    pub stopped: Option<String>,
}

impl RaftStatus {
    /// True when this node is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader_id == Some(self.node_id)
    }

    /// True when the node can serve requests: Raft runs and a leader is known.
    pub fn is_ready(&self) -> bool {
        self.running && self.leader_id.is_some()
    }
}
