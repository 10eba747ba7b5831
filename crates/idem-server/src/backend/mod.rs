//! The interface between the public API and the replicated store: the [`Backend`] trait and
//! the types that cross it.
//!
//! The gRPC services translate, validate and decide what a caller may see; they never talk to
//! openraft or RocksDB directly. Everything below the API implements or uses this module, and
//! nothing below imports the API, so the layers read top-down:
//!
//! ```text
//! api (gRPC services) ──► backend (this trait) ◄── groups::Router ──► replica::Replica (one Raft group)
//! ```
//!
//! The node backs the trait with its [`Router`](crate::groups::Router), which sends each call
//! to the Raft group ([`Replica`](crate::replica::Replica)) that decides its tenant; unit tests
//! back it with [`memory::MemoryBackend`], the core's in-memory store and `apply`, which run
//! the very same semantics without a log.

mod error;
pub mod forwarded;
mod membership;
#[cfg(test)]
pub(crate) mod memory;
mod placement;
mod status;

pub use error::RequestError;
pub use membership::{MemberView, MembershipChange, MembershipView};
pub use placement::{GroupView, PlacementAnswer, PlacementCall};
pub use status::{MemberInfo, RaftStatus};

use std::sync::Arc;

use futures::future::BoxFuture;
use idem_core::placement::{ClusterConfig, GroupId, Placement};
use idem_core::{AuditEntry, Command, OperationId, Outcome, Record, RecordKey, Timestamp};
use tokio::sync::watch;

/// `NOT_FOUND` for a group this node does not serve.
pub(crate) fn no_such_group(group: GroupId) -> RequestError {
    RequestError::refused(
        idem_proto::reason::NOT_FOUND,
        format!("no group {group} on this node"),
    )
}

/// The replicated store as the API sees it.
///
/// Writes are proposals whose outcome is decided by the core's `apply` on every replica;
/// reads are local reads of the applied state, made linearizable by calling
/// [`Backend::read_barrier`] first.
pub trait Backend: Send + Sync + 'static {
    /// Proposes `command` (stamped with the leader's clock) and returns the outcome apply
    /// decided. Bounded by the write timeout; a timeout is [`RequestError::OutcomeUnknown`].
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, RequestError>>;

    /// Waits until every write committed before this call is applied locally and this node
    /// is confirmed leader (read index). Bounded by the read timeout.
    fn read_barrier(&self) -> BoxFuture<'_, Result<(), RequestError>>;

    /// The applied record of `key`.
    fn record(&self, key: &RecordKey) -> Result<Option<Record>, RequestError>;

    /// The applied record of an operation id.
    fn operation(&self, id: &OperationId) -> Result<Option<Record>, RequestError>;

    /// Applied records whose encoded key starts with `prefix`, strictly after `after`, in key
    /// order, at most `limit`.
    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, RequestError>;

    /// How many terminal records are past their retention at `now`, counting at most
    /// `limit` (lets the sweep skip proposing empty `Expire` commands).
    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, RequestError>;

    /// The time a read decides with: the leader's clock, never behind the replicated clock.
    fn now(&self) -> Timestamp;

    /// The applied log index, notified on every change (for long polls).
    fn applied(&self) -> watch::Receiver<u64>;

    /// This node's view of the group.
    fn raft_status(&self) -> RaftStatus;

    /// The applied audit entries of `group` with `seq >= from`, in order, at most `limit`
    /// (`NOT_FOUND` for a group this node does not serve). Linearizable after
    /// [`Backend::read_barrier`].
    fn audit(
        &self,
        group: GroupId,
        from: u64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, RequestError>;

    /// [`Backend::read_barrier`] for the group that decides `tenant`'s keys (backends
    /// with one group: the same).
    fn read_barrier_for<'a>(&'a self, _tenant: &'a str) -> BoxFuture<'a, Result<(), RequestError>> {
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

    /// The global group's placement state as applied on this node (not linearizable): the
    /// cluster configuration and the replicated API tokens.
    fn global_placement(&self) -> Arc<Placement>;

    /// Runs a placement call (regions, tenant homes, failover). Backends without regions
    /// refuse it.
    fn placement(
        &self,
        _call: PlacementCall,
    ) -> BoxFuture<'_, Result<PlacementAnswer, RequestError>> {
        Box::pin(async {
            Err(RequestError::refused(
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
    ) -> BoxFuture<'_, Result<MembershipView, RequestError>> {
        Box::pin(async {
            Err(RequestError::refused(
                idem_proto::reason::WRONG_STATE,
                "this backend has no Raft group to change",
            ))
        })
    }
}
