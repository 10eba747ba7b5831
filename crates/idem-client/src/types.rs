//! The typed requests and answers of reads and admin calls.
//!
//! Claims have their own module ([`crate::claim`]); worker commands answer the changed
//! [`Record`]. These types replace the wire messages' "zero means absent" conventions with
//! `Option`s and the wire enums with idem-core's.

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::{ClaimKind, ErrorSummary, OperationId, Record, State, StoredResult};
use idem_proto::v1;

use crate::convert;
use crate::error::ClientError;

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

impl Lookup {
    pub(crate) fn from_get(response: v1::GetResponse) -> Result<Self, ClientError> {
        let record = convert::required_record(response.record)?;
        Ok(Lookup {
            outcome: convert::claim_kind_from_proto(response.outcome)?,
            terminal: record.state.is_terminal(),
            record,
        })
    }

    pub(crate) fn from_wait(response: v1::WaitResponse) -> Result<Self, ClientError> {
        Ok(Lookup {
            record: convert::required_record(response.record)?,
            outcome: convert::claim_kind_from_proto(response.outcome)?,
            terminal: response.terminal,
        })
    }
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
}

impl ListQuery {
    pub(crate) fn to_proto(&self) -> v1::ListOperationsRequest {
        v1::ListOperationsRequest {
            states: self
                .states
                .iter()
                .map(|s| convert::state_to_proto(*s) as i32)
                .collect(),
            older_than_ms: self.older_than.map_or(0, convert::millis),
            limit: self.limit.unwrap_or(0),
            page_token: self.page_token.clone().unwrap_or_default(),
            tenant: self.tenant.clone().unwrap_or_default(),
        }
    }
}

/// One page of [`crate::Client::list_operations`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The records, ordered by operation id (creation time).
    pub records: Vec<Record>,
    /// The token of the next page; `None` on the last page.
    pub next_page_token: Option<String>,
}

impl Page {
    pub(crate) fn from_proto(response: v1::ListOperationsResponse) -> Result<Self, ClientError> {
        Ok(Page {
            records: response
                .records
                .into_iter()
                .map(convert::record_from_proto)
                .collect::<Result<_, convert::DecodeError>>()?,
            next_page_token: (!response.next_page_token.is_empty())
                .then_some(response.next_page_token),
        })
    }
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
}

impl ReconcileTarget {
    /// The state this target moves the record to.
    pub fn state(&self) -> State {
        match self {
            ReconcileTarget::Completed(_) => State::Completed,
            ReconcileTarget::RetryableFailure(_) => State::RetryableFailure,
            ReconcileTarget::TerminalFailure(_) => State::TerminalFailure,
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

impl Reconciliation {
    /// Checks the result or error and the reason before anything is sent.
    pub(crate) fn to_proto(&self) -> Result<v1::ReconcileRequest, ClientError> {
        if self.reason.trim().is_empty() {
            return Err(ClientError::invalid(
                idem_proto::reason::INVALID_ARGUMENT,
                "a reconcile needs a reason",
            ));
        }
        let (result, error) = match &self.target {
            ReconcileTarget::Completed(result) => (Some(result), None),
            ReconcileTarget::RetryableFailure(error) => (None, error.as_ref()),
            ReconcileTarget::TerminalFailure(error) => (None, Some(error)),
        };
        result.map(StoredResult::validate).transpose()?;
        error.map(ErrorSummary::validate).transpose()?;
        Ok(v1::ReconcileRequest {
            operation_id: self.operation_id.to_string(),
            expected_version: self.expected_version,
            target: convert::state_to_proto(self.target.state()) as i32,
            result: result.map(convert::result_to_proto),
            error: error.map(convert::error_to_proto),
            reason: self.reason.clone(),
            operator: self.operator.clone(),
        })
    }
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

impl From<v1::Member> for Member {
    fn from(m: v1::Member) -> Self {
        Member {
            id: m.id,
            region: m.region,
            zone: m.zone,
            raft_addr: m.raft_addr,
            api_addr: m.api_addr,
            voter: m.voter,
        }
    }
}

impl Member {
    /// The wire form (what `AddMember` sends; `voter` is ignored there).
    pub(crate) fn to_proto(&self) -> v1::Member {
        v1::Member {
            id: self.id,
            region: self.region.clone(),
            zone: self.zone.clone(),
            raft_addr: self.raft_addr.clone(),
            api_addr: self.api_addr.clone(),
            voter: self.voter,
            ..v1::Member::default()
        }
    }
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

impl From<v1::StatusResponse> for NodeStatus {
    fn from(s: v1::StatusResponse) -> Self {
        NodeStatus {
            node_id: s.node_id,
            leader_id: (s.leader_id != 0).then_some(s.leader_id),
            term: s.term,
            commit_index: s.commit_index,
            applied_index: s.applied_index,
            last_log_index: s.last_log_index,
            membership: s.membership.into_iter().map(Member::from).collect(),
            version: s.version,
            records_by_state: s
                .records_by_state
                .into_iter()
                .map(|(name, n)| (state_name(name), n))
                .collect(),
            oldest_pending_age: (s.oldest_pending_age_ms != 0)
                .then(|| Duration::from_millis(s.oldest_pending_age_ms)),
            region: s.region,
            zone: s.zone,
            failover: s.failover,
        }
    }
}

/// `STATE_PENDING` → `PENDING`; other names unchanged.
fn state_name(wire: String) -> String {
    match wire.strip_prefix("STATE_") {
        Some(name) => name.to_owned(),
        None => wire,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_query_to_wire() {
        let query = ListQuery {
            states: vec![State::Pending, State::InProgress],
            older_than: Some(Duration::from_secs(300)),
            limit: Some(10),
            page_token: None,
            tenant: Some("acme".into()),
        };
        let wire = query.to_proto();
        assert_eq!(
            wire.states,
            [v1::State::Pending as i32, v1::State::InProgress as i32]
        );
        assert_eq!(wire.older_than_ms, 300_000);
        assert_eq!(wire.limit, 10);
        assert_eq!(wire.page_token, "");
        assert_eq!(wire.tenant, "acme");
        assert_eq!(ListQuery::default().to_proto().limit, 0);
    }

    #[test]
    fn reconciliation_is_checked_before_sending() {
        let mut r = Reconciliation {
            operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap(),
            expected_version: 4,
            target: ReconcileTarget::Completed(StoredResult {
                status_code: 201,
                resource_id: "ch_1".into(),
                ..Default::default()
            }),
            reason: "TICKET-1".into(),
            operator: "ops".into(),
        };
        let wire = r.to_proto().unwrap();
        assert_eq!(wire.target, v1::State::Completed as i32);
        assert_eq!(wire.result.unwrap().status_code, 201);
        assert_eq!(wire.error, None);

        r.target = ReconcileTarget::TerminalFailure(ErrorSummary {
            code: "declined".into(),
            message: String::new(),
        });
        assert_eq!(
            r.to_proto().unwrap().target,
            v1::State::TerminalFailure as i32
        );

        r.target = ReconcileTarget::Completed(StoredResult {
            status_code: 42,
            ..Default::default()
        });
        assert_eq!(r.to_proto().unwrap_err().reason(), "INVALID_RESULT");
        r.target = ReconcileTarget::RetryableFailure(None);
        r.reason = " ".into();
        assert_eq!(r.to_proto().unwrap_err().reason(), "INVALID_ARGUMENT");
    }

    #[test]
    fn status_names_and_zero_values() {
        let status = NodeStatus::from(v1::StatusResponse {
            node_id: 1,
            records_by_state: [("STATE_PENDING".to_owned(), 3), ("ODD".to_owned(), 1)]
                .into_iter()
                .collect(),
            ..Default::default()
        });
        assert_eq!(status.leader_id, None);
        assert_eq!(status.oldest_pending_age, None);
        assert_eq!(status.records_by_state.get("PENDING"), Some(&3));
        assert_eq!(status.records_by_state.get("ODD"), Some(&1));
    }
}
