//! The typed requests and answers of reads and admin calls.
//!
//! Claims have their own module ([`crate::claim`]); worker commands answer the changed
//! [`Record`]. These types replace the wire messages' "zero means absent" conventions with
//! `Option`s and the wire enums with idem-core's; the conversions live in [`crate::convert`].

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::{ClaimKind, ErrorSummary, OperationId, Record, State, StoredResult};

/// A record and what a claim with a matching fingerprint would decide now (`get`,
/// `get_operation`, `wait`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// The record.
    pub record: Record,
    /// What a matching claim would decide right now, without changing anything.
    pub outcome: ClaimKind,
    /// True when the record is terminal (COMPLETED, TERMINAL_FAILURE, CANCELLED).
    pub terminal: bool,
}

/// How a worker's failure is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// RETRYABLE_FAILURE: the next claim takes over; never replayed (e.g. 429, 503).
    Retryable,
    /// TERMINAL_FAILURE: replayed to every later matching claim (e.g. a validation error).
    Terminal,
}

/// A filter for [`crate::Client::list_operations`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only records in one of these states; empty means every state.
    pub states: Vec<State>,
    /// Only records unchanged for at least this long.
    pub older_than: Option<Duration>,
    /// Page size; `None` is the server default (100, capped at 1000).
    pub limit: Option<u32>,
    /// The previous page's [`Page::next_page_token`].
    pub page_token: Option<String>,
    /// Only records of this tenant.
    pub tenant: Option<String>,
    /// Only stuck records: PENDING or IN_PROGRESS, unchanged for longer than their
    /// endpoint's `stuck_after` (or `older_than`, when set).
    pub stuck: bool,
}

/// One page of [`crate::Client::list_operations`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The records, ordered by operation id (creation time).
    pub records: Vec<Record>,
    /// The token of the next page; `None` on the last page.
    pub next_page_token: Option<String>,
}

/// The decision of a reconciliation: the state to move to and what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReconcileTarget {
    /// COMPLETED with the result to replay (e.g. the downstream's resource id).
    Completed(StoredResult),
    /// RETRYABLE_FAILURE (the next claim takes over), optionally with an error for diagnosis.
    RetryableFailure(Option<ErrorSummary>),
    /// TERMINAL_FAILURE with the error to replay.
    TerminalFailure(ErrorSummary),
    /// CANCELLED: nothing irreversible happened (the downstream has no trace of it); every
    /// later claim answers CANCELLED. Only from NEEDS_RECONCILIATION or stage CALLING.
    Cancelled,
}

impl ReconcileTarget {
    /// The state this target moves the record to.
    pub fn state(&self) -> State {
        match self {
            ReconcileTarget::Completed(_) => State::Completed,
            ReconcileTarget::RetryableFailure(_) => State::RetryableFailure,
            ReconcileTarget::TerminalFailure(_) => State::TerminalFailure,
            ReconcileTarget::Cancelled => State::Cancelled,
        }
    }
}

/// An operator's decision on a record, for [`crate::Client::reconcile`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconciliation {
    /// The record.
    pub operation_id: OperationId,
    /// The version the decision is based on; any other is `VERSION_MISMATCH`.
    pub expected_version: u64,
    /// The state to move to and its result or error.
    pub target: ReconcileTarget,
    /// Why (stored in the audit entry, e.g. a ticket reference). Required.
    pub reason: String,
    /// Who decided (stored in the audit entry).
    pub operator: String,
}

/// One member of a node's Raft group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Raft node id.
    pub id: u64,
    /// Region of the node.
    pub region: String,
    /// Availability zone of the node.
    pub zone: String,
    /// Node-to-node Raft address.
    pub raft_addr: String,
    /// Public API address.
    pub api_addr: String,
    /// True for a voter, false for a learner.
    pub voter: bool,
}

/// One node's view of itself and its group ([`crate::Client::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node's Raft id.
    pub node_id: u64,
    /// The leader it knows of, if any.
    pub leader_id: Option<u64>,
    /// Current Raft term.
    pub term: u64,
    /// Highest committed log index.
    pub commit_index: u64,
    /// Highest applied log index.
    pub applied_index: u64,
    /// Highest log index in the node's log.
    pub last_log_index: u64,
    /// The group's members.
    pub membership: Vec<Member>,
    /// The idemd version.
    pub version: String,
    /// Records per state name (`PENDING`, `COMPLETED`, ...; unknown wire names kept as is).
    pub records_by_state: BTreeMap<String, u64>,
    /// Age of the oldest PENDING or IN_PROGRESS record, if any.
    pub oldest_pending_age: Option<Duration>,
    /// The node's region.
    pub region: String,
    /// The node's zone.
    pub zone: String,
    /// True while the group is in region failover.
    pub failover: bool,
}
