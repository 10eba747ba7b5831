//! What the API services need from the replicated store, as a small object-safe trait.
//!
//! The gRPC services translate, validate and decide what a caller may see; they never talk to
//! openraft or RocksDB directly. The node backs this trait with Raft
//! ([`crate::raft::RaftBackend`]); unit tests back it with the core's in-memory store and
//! `apply`, which runs the very same semantics without a log. Swapping the one-voter group
//! for a replicated one, or forwarding to the leader, changes the backend only.

use futures::future::BoxFuture;
use idem_core::placement::ClusterConfig;
use idem_core::{Command, OperationId, Outcome, Record, RecordKey, Timestamp};
use tokio::sync::watch;

use crate::api::{
    ApiError, GroupView, MembershipChange, MembershipView, PlacementAnswer, PlacementCall,
};

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

/// The replicated store as the API sees it.
///
/// Writes are proposals whose outcome is decided by the core's `apply` on every replica;
/// reads are local reads of the applied state, made linearizable by calling
/// [`Backend::read_barrier`] first.
pub trait Backend: Send + Sync + 'static {
    /// Proposes `command` (stamped with the leader's clock) and returns the outcome apply
    /// decided. Bounded by the write timeout; a timeout is [`ApiError::OutcomeUnknown`].
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, ApiError>>;

    /// Waits until every write committed before this call is applied locally and this node
    /// is confirmed leader (read index). Bounded by the read timeout.
    fn read_barrier(&self) -> BoxFuture<'_, Result<(), ApiError>>;

    /// The applied record of `key`.
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, ApiError>;

    /// The applied record of an operation id.
    fn operation(&self, id: &OperationId) -> Result<Option<Record>, ApiError>;

    /// Applied records whose encoded key starts with `prefix`, strictly after `after`, in key
    /// order, at most `limit`.
    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, ApiError>;

    /// How many terminal records are past their retention at `now`, counting at most
    /// `limit` (lets the sweep skip proposing empty `Expire` commands).
    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, ApiError>;

    /// The time a read decides with: the leader's clock, never behind the replicated clock.
    fn now(&self) -> Timestamp;

    /// The applied log index, notified on every change (for long polls).
    fn applied(&self) -> watch::Receiver<u64>;

    /// This node's view of the group.
    fn raft_status(&self) -> RaftStatus;

    /// [`Backend::read_barrier`] for the group that decides `tenant`'s keys (backends
    /// with one group: the same).
    fn read_barrier_for<'a>(&'a self, _tenant: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
        self.read_barrier()
    }

    /// [`Backend::applied`] of the group that decides `tenant`'s keys.
    fn applied_for(&self, _tenant: &str) -> watch::Receiver<u64> {
        self.applied()
    }

    /// True when this node leads the group that decides `tenant`'s keys.
    fn leads_for(&self, _tenant: &str) -> bool {
        self.raft_status().is_leader()
    }

    /// Every group as this node sees it, the global group first.
    fn groups(&self) -> Vec<GroupView> {
        let status = self.raft_status();
        vec![GroupView {
            leader_id: status.leader_id,
            leader_home: true,
            term: status.term,
            commit_index: status.commit_index,
            applied_index: status.applied_index,
            ..GroupView::default()
        }]
    }

    /// The cluster configuration as applied on this node (not linearizable).
    fn cluster_config(&self) -> ClusterConfig {
        ClusterConfig::default()
    }

    /// Runs a placement call (regions, tenant homes, failover). Backends without regions
    /// refuse it.
    fn placement(&self, _call: PlacementCall) -> BoxFuture<'_, Result<PlacementAnswer, ApiError>> {
        Box::pin(async {
            Err(ApiError::refused(
                idem_proto::reason::PLACEMENT_CONFLICT,
                "this backend has no regions",
            ))
        })
    }

    /// Runs a membership call on the leader (forwarded from a follower), bounded by the
    /// write timeout. Backends without a Raft group refuse it.
    fn membership(
        &self,
        _change: MembershipChange,
    ) -> BoxFuture<'_, Result<MembershipView, ApiError>> {
        Box::pin(async {
            Err(ApiError::refused(
                idem_proto::reason::WRONG_STATE,
                "this backend has no Raft group to change",
            ))
        })
    }
}
