//! The Raft side of a node: proposing commands, read-index barriers, membership, the
//! group's status — on the leader, or forwarded to it from a follower.
//!
//! [`Replica`] is the [`Backend`] the API runs on. Its rules:
//!
//! - **Any node accepts any request.** A follower forwards writes, read barriers and
//!   membership calls to the leader over the node-internal `Forward` service on the Raft
//!   port ([`forward`], and the leader's side in
//!   [`crate::groups::ForwardService`]). While no leader is known, or the leader is
//!   unreachable before anything was sent, it routes again within the timeout; only when
//!   the timeout runs out that way does it answer `NOT_LEADER` with its best hint.
//! - **The leader stamps time.** A command is stamped with the wall clock of the leader
//!   that proposes it (a follower forwards the unstamped command), so lease expiry is
//!   decided by the leader's clock and, through `max(stamp, last stamp)` in apply,
//!   identically on every replica.
//! - **Nothing waits unboundedly, and a timeout is never a "no".** openraft does not step a
//!   leader down when it loses its quorum, so every write and every read index is bounded
//!   (`write_timeout`, `read_timeout`). A write that times out, is discarded by a leader
//!   change (`LogEntryDiscarded`) or loses its connection to the leader after being sent
//!   may still commit: it is `UNAVAILABLE_OUTCOME_UNKNOWN`, and the client retries with the
//!   same key, holder or fence, which the state machine makes safe.
//! - **Follower reads are linearizable.** The follower asks the leader for a read index
//!   (the leader confirms its leadership with a quorum), then waits until its own state
//!   machine applied that index before reading locally.

pub mod caller;
mod failover;
pub mod forward;
pub mod forwardable;
pub mod membership;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use idem_core::placement::{GroupId, Placement};
use idem_core::{AuditEntry, Command, OperationId, Outcome, Record, RecordKey, Timestamp};
use idem_proto::raft_v1::forward_reply::Result as Reply;
use idem_store::{NodeInfo, Request, StateReader, TypeConfig};
use openraft::async_runtime::WatchReceiver;
use openraft::error::{
    ClientWriteError, ForwardReason, ForwardToLeader, LinearizableReadError, RaftError,
};
use openraft::{RaftMetrics, ReadPolicy};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::{
    forwarded, Backend, MemberInfo, MembershipChange, MembershipView, RaftStatus, RequestError,
};
use crate::failpoint::{Failpoints, Phase};
use crate::limits::DiskGuard;
use crate::metrics::Metrics;
use forward::{ForwardFailure, ForwardKind, Forwarder};

/// A Raft node over the idem store.
pub type Raft = idem_store::Raft;

/// Pause before routing a request again (no leader known, leader refused, lease not yet
/// confirmed by a new leader).
const RETRY_PAUSE: Duration = Duration::from_millis(25);

/// Which group a backend serves, on which node.
pub struct GroupPlace {
    /// The Raft group id (0: the global group).
    pub group: u64,
    /// This node's id.
    pub node_id: u64,
    /// This node's region.
    pub region: String,
}

/// What the backends of all groups of a node share: bounds, metrics, connections.
#[derive(Clone)]
pub struct Shared {
    /// Bound of a proposal.
    pub write_timeout: Duration,
    /// Bound of a read barrier.
    pub read_timeout: Duration,
    /// The node's metrics.
    pub metrics: Arc<Metrics>,
    /// Connections to leaders, shared by every group.
    pub forwarder: Arc<Forwarder>,
    /// The node's free-space guard (`DISK_FULL`), shared by every group.
    pub disk: Arc<DiskGuard>,
}

/// Where a request goes now.
enum Route {
    /// This node leads.
    Local,
    /// Another node leads: its id and membership record.
    Remote(u64, NodeInfo),
    /// No leader known (election), or its address is not in the membership.
    Unknown,
}

/// One attempt of a routed request.
enum Attempt<T> {
    /// The answer.
    Done(Result<T, RequestError>),
    /// Nothing happened; route again (the reason, for the final error).
    Retry(String),
}

/// The [`Backend`] of a node: Raft for writes and barriers, the store's reader for reads.
pub struct Replica {
    raft: Raft,
    reader: StateReader,
    group: u64,
    node_id: u64,
    region: String,
    write_timeout: Duration,
    read_timeout: Duration,
    metrics: Arc<Metrics>,
    failpoints: Failpoints,
    forwarder: Arc<Forwarder>,
    disk: Arc<DiskGuard>,
}

impl Replica {
    /// A backend over a running Raft group and its store's reader.
    pub fn new(raft: Raft, reader: StateReader, place: GroupPlace, shared: Shared) -> Self {
        let Shared {
            write_timeout,
            read_timeout,
            metrics,
            forwarder,
            disk,
        } = shared;
        Replica {
            raft,
            reader,
            group: place.group,
            node_id: place.node_id,
            region: place.region,
            write_timeout,
            read_timeout,
            metrics,
            failpoints: Failpoints::default(),
            forwarder,
            disk,
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

    /// The applied state of this group on this node.
    pub fn reader(&self) -> &StateReader {
        &self.reader
    }

    /// Proposes `command` on the leader (here, or forwarded) and returns apply's outcome.
    pub async fn propose(&self, command: Command) -> Result<Outcome, RequestError> {
        self.propose_ref(&command).await
    }

    /// [`Self::propose`] of a borrowed command, for a caller that may route it again: the
    /// command is copied once into the Raft entry (shared by every attempt), not once per layer.
    pub async fn propose_ref(&self, command: &Command) -> Result<Outcome, RequestError> {
        command.validate()?;
        // This node's disk first: a follower short of space would have to append the entry.
        self.disk.admit(command)?;
        if forwardable::check(command).is_err() {
            // A leader-only command (the sweep's Expire): never forwarded.
            return self
                .propose_local(command, Instant::now() + self.write_timeout)
                .await;
        }
        let deadline = Instant::now() + self.write_timeout;
        self.routed(
            ForwardKind::Propose,
            false,
            deadline,
            || encode(command),
            || Box::pin(self.propose_local(command, deadline)),
            |reply| match reply {
                Reply::Ok(bytes) => decode(&bytes),
                _ => Err(RequestError::Internal(
                    "propose: unexpected reply from the leader".into(),
                )),
            },
        )
        .await
    }

    /// Proposes `command` if this node leads (`NOT_LEADER` otherwise): what a forwarded
    /// proposal runs on the leader.
    pub async fn propose_here(&self, command: Command) -> Result<Outcome, RequestError> {
        command.validate()?;
        self.propose_local(&command, Instant::now() + self.write_timeout)
            .await
    }

    /// Confirms a read index with the leader (here, or forwarded) and waits until this node
    /// applied it, within the read timeout.
    pub async fn read_barrier(&self) -> Result<(), RequestError> {
        let deadline = Instant::now() + self.read_timeout;
        let index = self
            .routed(
                ForwardKind::ReadIndex,
                true,
                deadline,
                || Ok(Vec::new()),
                || Box::pin(self.read_index_local(deadline)),
                |reply| match reply {
                    Reply::Index(index) => Ok(index),
                    _ => Err(RequestError::Internal(
                        "read index: unexpected reply from the leader".into(),
                    )),
                },
            )
            .await?;
        self.wait_applied(index, deadline).await
    }

    /// The read index if this node leads (`NOT_LEADER` otherwise): what a forwarded read
    /// barrier runs on the leader.
    pub async fn read_index_here(&self) -> Result<u64, RequestError> {
        self.read_index_local(Instant::now() + self.read_timeout)
            .await
    }

    /// Runs a membership call on the leader (here, or forwarded), within the write timeout.
    pub async fn membership_call(
        &self,
        change: MembershipChange,
    ) -> Result<MembershipView, RequestError> {
        let deadline = Instant::now() + self.write_timeout;
        let read = change.is_read();
        self.routed(
            ForwardKind::Membership,
            read,
            deadline,
            || encode(&change),
            || {
                Box::pin(membership::run(
                    &self.raft,
                    self.node_id,
                    change.clone(),
                    deadline,
                ))
            },
            |reply| match reply {
                Reply::Ok(bytes) => decode(&bytes),
                _ => Err(RequestError::Internal(
                    "membership: unexpected reply from the leader".into(),
                )),
            },
        )
        .await
    }

    /// Runs a membership call if this node leads (`NOT_LEADER` otherwise).
    pub async fn membership_here(
        &self,
        change: MembershipChange,
    ) -> Result<MembershipView, RequestError> {
        let deadline = Instant::now() + self.write_timeout;
        membership::run(&self.raft, self.node_id, change, deadline).await
    }

    /// Runs a request on the leader until `deadline`: `local` when this node leads, else
    /// forwarded as `kind` with the bytes of `payload` (encoded only then: a leader never
    /// pays for it) and the reply decoded by `decode`. `NOT_LEADER`
    /// answers and unsent requests are routed again; `idempotent` requests also after a
    /// transport failure.
    async fn routed<'a, T>(
        &'a self,
        kind: ForwardKind,
        idempotent: bool,
        deadline: Instant,
        payload: impl Fn() -> Result<Vec<u8>, RequestError>,
        local: impl Fn() -> BoxFuture<'a, Result<T, RequestError>>,
        decode: impl Fn(Reply) -> Result<T, RequestError>,
    ) -> Result<T, RequestError> {
        loop {
            let attempt = match self.route()? {
                Route::Local => match local().await {
                    Err(RequestError::NotLeader { .. }) => {
                        Attempt::Retry("leadership moved".into())
                    }
                    done => Attempt::Done(done),
                },
                Route::Remote(id, node) => {
                    self.forward(kind, id, &node, payload()?, deadline, idempotent, &decode)
                        .await
                }
                Route::Unknown => Attempt::Retry("no leader known".into()),
            };
            let why = match attempt {
                Attempt::Done(result) => return result,
                Attempt::Retry(why) => why,
            };
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(self.gave_up(kind, &why));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// One forwarded attempt to the leader `id`.
    #[allow(clippy::too_many_arguments)]
    async fn forward<T>(
        &self,
        kind: ForwardKind,
        id: u64,
        node: &NodeInfo,
        payload: Vec<u8>,
        deadline: Instant,
        idempotent: bool,
        decode: &impl Fn(Reply) -> Result<T, RequestError>,
    ) -> Attempt<T> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let call = self.forwarder.call(
            kind,
            self.group,
            &node.raft_addr,
            payload,
            budget,
            idempotent,
        );
        match call.await {
            Ok(reply) => {
                self.metrics
                    .forwarded
                    .with_label_values(&[kind.label()])
                    .inc();
                if node.region != self.region {
                    self.metrics
                        .cross_region_hops
                        .with_label_values(&[kind.label()])
                        .inc();
                }
                forwarded::note(&node.api_addr);
                Attempt::Done(decode(reply))
            }
            Err(ForwardFailure::Retry(why)) => {
                tracing::debug!(leader = id, %why, kind = kind.label(), "forwarding: routing again");
                Attempt::Retry(why)
            }
            Err(ForwardFailure::Final(error)) => Attempt::Done(Err(error)),
        }
    }

    /// The error when the deadline passed without reaching a leader: nothing was done.
    fn gave_up(&self, kind: ForwardKind, last: &str) -> RequestError {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        let leader_id = metrics.current_leader.filter(|id| *id != self.node_id);
        let op = if kind == ForwardKind::ReadIndex {
            "read"
        } else {
            "write"
        };
        self.metrics.raft_timeouts.with_label_values(&[op]).inc();
        tracing::warn!(kind = kind.label(), %last, "no leader reachable within the timeout");
        RequestError::NotLeader {
            leader_id,
            leader_addr: leader_id.and_then(|id| {
                let membership = metrics.membership_config.membership();
                membership.get_node(&id).map(|n| n.api_addr.clone())
            }),
        }
    }

    fn route(&self) -> Result<Route, RequestError> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        stopped(&metrics)?;
        Ok(match metrics.current_leader {
            Some(id) if id == self.node_id => Route::Local,
            Some(id) => match metrics.membership_config.membership().get_node(&id) {
                Some(node) => Route::Remote(id, node.clone()),
                None => Route::Unknown,
            },
            None => Route::Unknown,
        })
    }

    /// Stamps and proposes `command` on this node (the leader) by `deadline`. A new leader
    /// whose lease is not confirmed yet refuses writes for about a heartbeat: retried here.
    /// The command is copied once into the `Arc` every attempt's entry shares.
    async fn propose_local(
        &self,
        command: &Command,
        deadline: Instant,
    ) -> Result<Outcome, RequestError> {
        self.ensure_leader()?;
        self.disk.admit(command)?;
        if command.tenant().is_some() {
            self.guard(command, deadline).await?;
        }
        let name = command.name();
        self.failpoints.check(name, Phase::BeforeCommit);
        let started = std::time::Instant::now();
        let shared = Arc::new(command.clone());
        let result = loop {
            let request = Request {
                stamp: Timestamp::now(),
                command: Arc::clone(&shared),
            };
            match tokio::time::timeout_at(deadline, self.raft.client_write(request)).await {
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))))
                    if f.reason == ForwardReason::LeaseExpired
                        && Instant::now() + RETRY_PAUSE < deadline =>
                {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                other => break other,
            }
        };
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
                Err(RequestError::OutcomeUnknown(format!(
                    "{name} not confirmed within {}: it may or may not have been applied; retry with the same key",
                    crate::config::format_duration(self.write_timeout)
                )))
            }
            Ok(Ok(response)) => {
                self.failpoints.check(name, Phase::AfterCommit);
                response.data.outcome.ok_or_else(|| {
                    RequestError::Internal(format!("{name}: the state machine returned no outcome"))
                })
            }
            Ok(Err(error)) => Err(write_error(name, error)),
        }
    }

    /// Confirms leadership with a quorum and returns the index to apply before reading.
    async fn read_index_local(&self, deadline: Instant) -> Result<u64, RequestError> {
        loop {
            let read = self.raft.get_read_log_id(ReadPolicy::ReadIndex);
            let error = match tokio::time::timeout_at(deadline, read).await {
                Err(_elapsed) => {
                    self.metrics
                        .raft_timeouts
                        .with_label_values(&["read"])
                        .inc();
                    return Err(RequestError::OutcomeUnknown(format!(
                        "could not confirm leadership within {}; retry",
                        crate::config::format_duration(self.read_timeout)
                    )));
                }
                Ok(Ok((read_log_id, _applied))) => return Ok(read_log_id.index()),
                Ok(Err(error)) => error,
            };
            let retry = Instant::now() + RETRY_PAUSE < deadline;
            match error {
                // A new leader's lease is not confirmed yet, or one heartbeat round missed
                // its quorum (a slow peer): both pass quickly.
                RaftError::APIError(LinearizableReadError::ForwardToLeader(f))
                    if f.reason == ForwardReason::LeaseExpired && retry => {}
                RaftError::APIError(LinearizableReadError::QuorumNotEnough(_)) if retry => {}
                RaftError::APIError(LinearizableReadError::ForwardToLeader(forward)) => {
                    return Err(self.not_leader(&forward))
                }
                RaftError::APIError(LinearizableReadError::QuorumNotEnough(e)) => {
                    return Err(RequestError::OutcomeUnknown(format!(
                        "could not confirm leadership: {e}; retry"
                    )))
                }
                RaftError::Fatal(fatal) => return Err(stopped_error(&fatal)),
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Waits until this node applied `index`, by `deadline`.
    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<(), RequestError> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let waited = self
            .raft
            .wait(Some(budget))
            .applied_index_at_least(Some(index), "read barrier")
            .await;
        waited.map(drop).map_err(|e| {
            self.metrics
                .raft_timeouts
                .with_label_values(&["read"])
                .inc();
            RequestError::OutcomeUnknown(format!(
                "this node did not apply the read index {index} in time ({e}); retry"
            ))
        })
    }

    /// `NODE_STOPPED` once Raft stopped: a node whose storage failed serves no reads either
    /// (its state is no longer kept up to date, and it is not trusted), local replays
    /// included.
    fn serving(&self) -> Result<(), RequestError> {
        stopped(&self.raft.metrics().borrow_watched())
    }

    /// `NOT_LEADER` unless this node currently is the leader.
    fn ensure_leader(&self) -> Result<(), RequestError> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        stopped(&metrics)?;
        if metrics.current_leader == Some(self.node_id) {
            return Ok(());
        }
        Err(RequestError::NotLeader {
            leader_id: metrics.current_leader,
            leader_addr: None,
        })
    }

    fn not_leader(&self, forward: &ForwardToLeader<TypeConfig>) -> RequestError {
        RequestError::NotLeader {
            leader_id: forward.leader_id,
            leader_addr: forward.leader_node.as_ref().map(|n| n.api_addr.clone()),
        }
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, RequestError> {
    bincode::serialize(value).map_err(|e| RequestError::Internal(format!("encoding: {e}")))
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, RequestError> {
    bincode::deserialize(bytes)
        .map_err(|e| RequestError::Internal(format!("undecodable reply from the leader: {e}")))
}

fn write_error(
    name: &str,
    error: RaftError<TypeConfig, ClientWriteError<TypeConfig>>,
) -> RequestError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => RequestError::NotLeader {
            leader_id: forward.leader_id,
            leader_addr: forward.leader_node.map(|n| n.api_addr),
        },
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(forward)) => {
            RequestError::OutcomeUnknown(format!(
                "{name}: leadership changed while the write was in flight (new leader {:?}); it may have been applied; retry with the same key",
                forward.leader_id
            ))
        }
        RaftError::APIError(other) => RequestError::Internal(format!("{name}: {other}")),
        // The entry may be in the log and on the other nodes, which may commit it.
        RaftError::Fatal(fatal) => RequestError::OutcomeUnknown(format!(
            "{name}: this node's raft stopped while the write was in flight ({fatal}); it may have been applied by the other nodes; retry with the same key on another node"
        )),
    }
}

/// [`RequestError::Stopped`] once this node's Raft core stopped on a fatal error.
fn stopped(metrics: &RaftMetrics<TypeConfig>) -> Result<(), RequestError> {
    match &metrics.running_state {
        Ok(()) => Ok(()),
        Err(fatal) => Err(stopped_error(fatal)),
    }
}

fn stopped_error(fatal: &openraft::error::Fatal<TypeConfig>) -> RequestError {
    RequestError::Stopped(format!(
        "this node's raft stopped ({fatal}); it serves nothing until restarted: use another node"
    ))
}

fn store_error(error: idem_store::StoreError) -> RequestError {
    RequestError::Internal(format!("store: {error}"))
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
        stopped: metrics.running_state.as_ref().err().map(|e| e.to_string()),
    }
}

impl Backend for Replica {
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, RequestError>> {
        Box::pin(Replica::propose(self, command))
    }

    fn read_barrier(&self) -> BoxFuture<'_, Result<(), RequestError>> {
        Box::pin(Replica::read_barrier(self))
    }

    fn record(&self, key: &RecordKey) -> Result<Option<Record>, RequestError> {
        self.serving()?;
        self.reader.record(key).map_err(store_error)
    }

    /// This group's placement (the global group's, when this replica is one).
    fn global_placement(&self) -> Arc<Placement> {
        self.reader.placement()
    }

    fn operation(&self, id: &OperationId) -> Result<Option<Record>, RequestError> {
        self.serving()?;
        self.reader.operation(id).map_err(store_error)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, RequestError> {
        self.serving()?;
        self.reader.scan(prefix, after, limit).map_err(store_error)
    }

    fn audit(
        &self,
        group: GroupId,
        from: u64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, RequestError> {
        if group != self.group {
            return Err(crate::backend::no_such_group(group));
        }
        self.reader.audit(from, limit).map_err(store_error)
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, RequestError> {
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

    fn membership(
        &self,
        change: MembershipChange,
    ) -> BoxFuture<'_, Result<MembershipView, RequestError>> {
        Box::pin(self.membership_call(change))
    }
}
