//! What apply decided: the answer to each command.
//!
//! Rejections (a stale fence, a wrong state) are outcomes, not errors: they are decided by
//! apply from replicated state, identically on every replica, and change nothing.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Field, ValidationError};
use crate::operation_id::OperationId;
use crate::placement::Placement;
use crate::record::{Record, RecordKey, Stage, State};
use crate::time::Timestamp;

/// The answer to a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The answer to a claim.
    Claim(ClaimOutcome),
    /// A worker or admin command changed (or idempotently confirmed) this record.
    Record(Record),
    /// The command was refused; nothing changed.
    Rejected(Rejection),
    /// These terminal records past retention were deleted.
    Expired {
        /// Their operation ids, oldest first.
        operation_ids: Vec<OperationId>,
    },
    /// A placement change was applied (or was already in place): the state after it.
    Placement(Placement),
    /// A purge batch ran.
    Purged {
        /// Records scrubbed by this batch.
        scrubbed: u64,
        /// Where the next batch resumes, if the subject may have more records.
        next: Option<RecordKey>,
    },
    /// An audit note was written (new variants go last: bincode is positional).
    Audited {
        /// Its sequence number in the group's audit log.
        seq: u64,
    },
}

/// The kind of answer a claim gets (docs/design.md §2, "Claim outcomes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClaimKind {
    /// First claim: run the handler.
    Acquired,
    /// Lease expired or retryable failure: run, checking the remote first if the previous
    /// stage was CALLING.
    TakenOver,
    /// Someone else holds a live lease.
    InProgress,
    /// A stored success: replay it.
    Completed,
    /// A stored terminal failure or cancellation: replay it.
    Failed,
    /// Same scope and key, different request: nothing changed.
    FingerprintMismatch,
    /// The request carries no fingerprint of the record's algorithm and schema version.
    FingerprintUnverifiable,
    /// Outcome unknown on a high-risk key: an operator or reconciler acts.
    NeedsReconciliation,
}

impl ClaimKind {
    /// The API name, e.g. `TAKEN_OVER`.
    pub fn name(self) -> &'static str {
        match self {
            ClaimKind::Acquired => "ACQUIRED",
            ClaimKind::TakenOver => "TAKEN_OVER",
            ClaimKind::InProgress => "IN_PROGRESS",
            ClaimKind::Completed => "COMPLETED",
            ClaimKind::Failed => "FAILED",
            ClaimKind::FingerprintMismatch => "FINGERPRINT_MISMATCH",
            ClaimKind::FingerprintUnverifiable => "FINGERPRINT_UNVERIFIABLE",
            ClaimKind::NeedsReconciliation => "NEEDS_RECONCILIATION",
        }
    }

    /// True when the claimant now owns the key (and may see its fence).
    pub fn owns(self) -> bool {
        matches!(self, ClaimKind::Acquired | ClaimKind::TakenOver)
    }

    /// What a claim with a matching fingerprint would get for `record` at `now`, without
    /// changing anything (used by reads).
    pub fn preview(record: &Record, now: Timestamp) -> ClaimKind {
        match record.state {
            State::Completed => ClaimKind::Completed,
            State::TerminalFailure | State::Cancelled => ClaimKind::Failed,
            State::NeedsReconciliation => ClaimKind::NeedsReconciliation,
            State::RetryableFailure => ClaimKind::TakenOver,
            State::Pending | State::InProgress => match &record.lease {
                Some(lease) if lease.is_live(now) => ClaimKind::InProgress,
                _ if record.policy.risk == crate::policy::Risk::High
                    && record.stage == Stage::Calling =>
                {
                    ClaimKind::NeedsReconciliation
                }
                _ => ClaimKind::TakenOver,
            },
        }
    }
}

/// The answer to a claim, with the record as it stands after the claim.
///
/// The record is the full truth; the API layer decides what a claimant may see (the fence
/// only when [`ClaimKind::owns`], no result on a mismatch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimOutcome {
    /// The kind of answer.
    pub kind: ClaimKind,
    /// The record after the claim.
    pub record: Record,
    /// For `TAKEN_OVER`: the stage the previous holder had reached.
    pub previous_stage: Option<Stage>,
    /// For `IN_PROGRESS`: when the current lease ends.
    pub retry_after: Option<Duration>,
    /// True when the same holder re-sent its claim and got its live ownership back.
    pub redelivered: bool,
}

/// Why a command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Rejection {
    /// The command failed validation.
    #[error("{message}")]
    Invalid {
        /// The offending field.
        field: Field,
        /// The validation error, in words.
        message: String,
    },
    /// No record for this scope and key (or operation id).
    #[error("no such record")]
    NotFound,
    /// The fence is not the record's current fence (a late worker whose lease was taken
    /// over). The current fence is not revealed.
    #[error("stale fence: the lease was taken over or revoked")]
    StaleFence,
    /// The command is not allowed in the record's state.
    #[error("not allowed in state {}", .state.name())]
    WrongState {
        /// The record's state.
        state: State,
    },
    /// The record is terminal and differs from what the command asked.
    #[error("record is already terminal ({})", .state.name())]
    AlreadyTerminal {
        /// The record's state.
        state: State,
    },
    /// Something irreversible may have begun: release and cancel are refused.
    #[error("an external call began (stage {}); complete or fail instead", .stage.name())]
    IrreversibleStage {
        /// The record's stage.
        stage: Stage,
    },
    /// The external-call ledger cannot move that way (e.g. back from REMOTE_CONFIRMED).
    #[error("stage {} cannot move to {}", .from.name(), .to.name())]
    StageConflict {
        /// Current stage.
        from: Stage,
        /// Requested stage.
        to: Stage,
    },
    /// The result or error summary exceeds the record's `max_result_bytes`.
    #[error("result is {actual} bytes, limit {limit}")]
    ResultTooLarge {
        /// The record's limit.
        limit: u32,
        /// The encoded size received.
        actual: usize,
    },
    /// Reconcile saw another version than the operator expected.
    #[error("record is at version {current}")]
    VersionMismatch {
        /// The record's version.
        current: u64,
    },
    /// This group does not decide the tenant's keys (the sender's view of the placement
    /// was stale, or the tenant is moving): route again.
    #[error("this group does not decide this tenant's keys; route again")]
    WrongGroup,
    /// The group is in region failover and the claim is HIGH risk.
    #[error("region failover: HIGH-risk claims and takeovers are refused until leadership returns home or an operator confirms a new home")]
    RegionFailover {
        /// When to try again.
        retry_after: Duration,
    },
    /// The tenant already has records in its current group: its home cannot change.
    #[error(
        "tenant {tenant} already has records in its current group; its home region is immutable"
    )]
    TenantHomeImmutable {
        /// The tenant.
        tenant: String,
    },
    /// No region of that name is defined.
    #[error("no region named {region}")]
    UnknownRegion {
        /// The region asked for.
        region: String,
    },
    /// The placement change contradicts the current configuration.
    #[error("{message}")]
    PlacementConflict {
        /// What is in the way.
        message: String,
    },
    /// Confirming a new home needs a failover in progress.
    #[error("the group is not in failover")]
    NotInFailover,
    /// A replicated token of that name (or with that secret) exists: revoke it first.
    #[error("a token named {name} exists: revoke it first")]
    TokenExists {
        /// The name asked for.
        name: String,
    },
}

impl From<ValidationError> for Rejection {
    fn from(error: ValidationError) -> Self {
        Rejection::Invalid {
            field: error.field(),
            message: error.to_string(),
        }
    }
}

impl Rejection {
    /// The machine-readable reason, as documented in docs/api.md.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::Invalid { field, .. } => field.reason(),
            Rejection::NotFound => "NOT_FOUND",
            Rejection::StaleFence => "STALE_FENCE",
            Rejection::WrongState { .. } => "WRONG_STATE",
            Rejection::AlreadyTerminal { .. } => "ALREADY_TERMINAL",
            Rejection::IrreversibleStage { .. } => "IRREVERSIBLE_STAGE",
            Rejection::StageConflict { .. } => "WRONG_STATE",
            Rejection::ResultTooLarge { .. } => "RESULT_TOO_LARGE",
            Rejection::VersionMismatch { .. } => "VERSION_MISMATCH",
            Rejection::WrongGroup => "WRONG_GROUP",
            Rejection::RegionFailover { .. } => "REGION_FAILOVER",
            Rejection::TenantHomeImmutable { .. } => "TENANT_HOME_IMMUTABLE",
            Rejection::UnknownRegion { .. } => "UNKNOWN_REGION",
            Rejection::PlacementConflict { .. } => "PLACEMENT_CONFLICT",
            Rejection::NotInFailover => "NOT_IN_FAILOVER",
            Rejection::TokenExists { .. } => "TOKEN_EXISTS",
        }
    }
}
