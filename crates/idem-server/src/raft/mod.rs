//! The Raft side of a node: proposing commands, read-index barriers, the group's status.
//!
//! [`RaftBackend`] is the [`Backend`] the API runs on. Its two rules:
//!
//! - **The leader stamps time.** A command is stamped with the wall clock of the node that
//!   proposes it, and only the leader proposes (a follower answers `NOT_LEADER` before
//!   stamping), so lease expiry is decided by the leader's clock and, through
//!   `max(stamp, last stamp)` in apply, identically on every replica.
//! - **Nothing waits unboundedly, and a timeout is never a "no".** openraft does not step a
//!   leader down when it loses its quorum, so every `client_write` and every read-index is
//!   wrapped in a timeout. A write that times out may still commit: it is reported as
//!   `UNAVAILABLE_OUTCOME_UNKNOWN` and the client retries with the same key, holder or
//!   fence, which the state machine makes safe. The same holds for an entry discarded by a
//!   leader change (`LogEntryDiscarded`): it may have committed elsewhere.

pub mod network;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use idem_core::{Command, OperationId, Outcome, Record, RecordKey, Timestamp};
use idem_store::{NodeInfo, Request, StateReader, TypeConfig};
use openraft::async_runtime::WatchReceiver;
use openraft::error::{ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError};
use openraft::{RaftMetrics, ReadPolicy};
use tokio::sync::watch;

use crate::api::{ApiError, Backend, MemberInfo, RaftStatus};
use crate::failpoint::{Failpoints, Phase};
use crate::metrics::Metrics;

/// A Raft node over the idem store.
pub type Raft = idem_store::Raft;

/// The [`Backend`] of a node: Raft for writes and barriers, the store's reader for reads.
pub struct RaftBackend {
    raft: Raft,
    reader: StateReader,
    node_id: u64,
    write_timeout: Duration,
    read_timeout: Duration,
    metrics: Arc<Metrics>,
    failpoints: Failpoints,
}

impl RaftBackend {
    /// A backend over a running Raft node and its store's reader.
    pub fn new(
        raft: Raft,
        reader: StateReader,
        node_id: u64,
        write_timeout: Duration,
        read_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        RaftBackend {
            raft,
            reader,
            node_id,
            write_timeout,
            read_timeout,
            metrics,
            failpoints: Failpoints::default(),
        }
    }

    /// Arms crash failpoints (tests only, see [`crate::failpoint`]).
    pub fn with_failpoints(mut self, failpoints: Failpoints) -> Self {
        self.failpoints = failpoints;
        self
    }

    /// The Raft handle.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Proposes `command`, stamped with this leader's clock, and returns apply's outcome.
    pub async fn propose(&self, command: Command) -> Result<Outcome, ApiError> {
        command.validate()?;
        self.ensure_leader()?;
        let name = command.name();
        self.failpoints.check(name, Phase::BeforeCommit);
        let request = Request {
            stamp: Timestamp::now(),
            command,
        };
        let started = Instant::now();
        let result =
            tokio::time::timeout(self.write_timeout, self.raft.client_write(request)).await;
        self.metrics
            .raft_write_duration
            .with_label_values(&[name])
            .observe(started.elapsed().as_secs_f64());
        match result {
            Err(_elapsed) => {
                self.metrics
                    .raft_timeouts
                    .with_label_values(&["write"])
                    .inc();
                Err(ApiError::OutcomeUnknown(format!(
                    "{name} not confirmed within {}: it may or may not have been applied; retry with the same key",
                    crate::config::format_duration(self.write_timeout)
                )))
            }
            Ok(Ok(response)) => {
                self.failpoints.check(name, Phase::AfterCommit);
                response.data.outcome.ok_or_else(|| {
                    ApiError::Internal(format!("{name}: the state machine returned no outcome"))
                })
            }
            Ok(Err(error)) => Err(write_error(name, error)),
        }
    }

    /// Confirms leadership with a quorum and waits until everything committed before the
    /// call is applied locally (read index), within the read timeout.
    pub async fn read_barrier(&self) -> Result<(), ApiError> {
        let barrier = self.raft.ensure_linearizable(ReadPolicy::ReadIndex);
        match tokio::time::timeout(self.read_timeout, barrier).await {
            Err(_elapsed) => {
                self.metrics
                    .raft_timeouts
                    .with_label_values(&["read"])
                    .inc();
                Err(ApiError::OutcomeUnknown(format!(
                    "could not confirm leadership within {}; retry",
                    crate::config::format_duration(self.read_timeout)
                )))
            }
            Ok(Ok(_read_log_id)) => Ok(()),
            Ok(Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(forward)))) => {
                Err(self.not_leader(&forward))
            }
            Ok(Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(e)))) => Err(
                ApiError::OutcomeUnknown(format!("could not confirm leadership: {e}; retry")),
            ),
            Ok(Err(RaftError::Fatal(fatal))) => {
                Err(ApiError::Internal(format!("raft stopped: {fatal}")))
            }
        }
    }

    /// `NOT_LEADER` unless this node currently is the leader.
    fn ensure_leader(&self) -> Result<(), ApiError> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        if metrics.current_leader == Some(self.node_id) {
            return Ok(());
        }
        if let Err(fatal) = &metrics.running_state {
            return Err(ApiError::Internal(format!("raft stopped: {fatal}")));
        }
        let leader_addr = metrics.current_leader.and_then(|id| {
            metrics
                .membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.api_addr.clone())
        });
        Err(ApiError::NotLeader {
            leader_id: metrics.current_leader,
            leader_addr,
        })
    }

    fn not_leader(&self, forward: &ForwardToLeader<TypeConfig>) -> ApiError {
        ApiError::NotLeader {
            leader_id: forward.leader_id,
            leader_addr: forward.leader_node.as_ref().map(|n| n.api_addr.clone()),
        }
    }
}

fn write_error(name: &str, error: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> ApiError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => ApiError::NotLeader {
            leader_id: forward.leader_id,
            leader_addr: forward.leader_node.map(|n| n.api_addr),
        },
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(forward)) => {
            ApiError::OutcomeUnknown(format!(
                "{name}: leadership changed while the write was in flight (new leader {:?}); it may have been applied; retry with the same key",
                forward.leader_id
            ))
        }
        RaftError::APIError(other) => ApiError::Internal(format!("{name}: {other}")),
        RaftError::Fatal(fatal) => ApiError::Internal(format!("{name}: raft stopped: {fatal}")),
    }
}

fn store_error(error: idem_store::StoreError) -> ApiError {
    ApiError::Internal(format!("store: {error}"))
}

/// This node's view of its group, from openraft's metrics.
pub fn raft_status(node_id: u64, metrics: &RaftMetrics<TypeConfig>) -> RaftStatus {
    let membership = metrics.membership_config.membership();
    let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
    let members = membership
        .nodes()
        .map(|(id, node): (&u64, &NodeInfo)| MemberInfo {
            id: *id,
            region: node.region.clone(),
            zone: node.zone.clone(),
            raft_addr: node.raft_addr.clone(),
            api_addr: node.api_addr.clone(),
            voter: voters.contains(id),
        })
        .collect();
    RaftStatus {
        node_id,
        leader_id: metrics.current_leader,
        term: metrics.current_term,
        commit_index: metrics
            .cluster_committed
            .as_ref()
            .map_or(0, |id| id.index()),
        applied_index: metrics.last_applied.as_ref().map_or(0, |id| id.index()),
        last_log_index: metrics.last_log_index.unwrap_or(0),
        members,
        running: metrics.running_state.is_ok(),
    }
}

impl Backend for RaftBackend {
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, ApiError>> {
        Box::pin(RaftBackend::propose(self, command))
    }

    fn read_barrier(&self) -> BoxFuture<'_, Result<(), ApiError>> {
        Box::pin(RaftBackend::read_barrier(self))
    }

    fn record(&self, key: &RecordKey) -> Result<Option<Record>, ApiError> {
        self.reader.record(key).map_err(store_error)
    }

    fn operation(&self, id: &OperationId) -> Result<Option<Record>, ApiError> {
        self.reader.operation(id).map_err(store_error)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, ApiError> {
        self.reader.scan(prefix, after, limit).map_err(store_error)
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, ApiError> {
        self.reader
            .due(now, limit)
            .map(|due| due.len())
            .map_err(store_error)
    }

    fn now(&self) -> Timestamp {
        let replicated = self.reader.meta().map_or(Timestamp::ZERO, |m| m.last_stamp);
        Timestamp::now().max(replicated)
    }

    fn applied(&self) -> watch::Receiver<u64> {
        self.reader.subscribe()
    }

    fn raft_status(&self) -> RaftStatus {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        raft_status(self.node_id, &metrics)
    }
}
