//! Commands: every change to the store, as replicated through the Raft log.
//!
//! A command carries everything apply needs to decide deterministically: the proposer has
//! already generated the operation id and resolved the policy. Commands are validated by
//! the proposer (to answer bad input early) and again by apply (so a buggy or hostile
//! proposer cannot write what a well-behaved one could not).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::audit::{MembershipIntent, MembershipNote, MAX_NOTE_MEMBERS};
use crate::error::{check_free_text, check_len, Field, ValidationError};
use crate::fingerprint::Fingerprint;
use crate::operation_id::OperationId;
use crate::placement::{ClusterChange, GroupChange, TokenChange};
use crate::policy::{validate_abandon_after, validate_lease, Policy};
use crate::record::{ErrorSummary, Holder, RecordKey, StoredResult};
use crate::scope::{validate_actor, validate_tenant};

/// Most fingerprints one claim may carry (one per algorithm).
pub const MAX_FINGERPRINTS: usize = 4;
/// Largest `Expire` batch.
pub const MAX_EXPIRE_BATCH: u32 = 10_000;
/// Largest `PurgeSubject` batch.
pub const MAX_PURGE_BATCH: u32 = 10_000;
/// Longest admin reason.
pub const MAX_REASON: usize = 1024;
/// Longest remote reference.
pub const MAX_REMOTE_REF: usize = 256;
/// Most records one `Abandon` command names.
pub const MAX_ABANDON_BATCH: usize = 1000;

/// A change to the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Claim a key: create it, take it over, or learn its state.
    Claim(Claim),
    /// PENDING -> IN_PROGRESS.
    Start(Fenced),
    /// Record the external-call ledger stage.
    RecordExternalCall(RecordExternalCall),
    /// Extend the lease.
    Renew(Renew),
    /// Store the result: -> COMPLETED.
    Complete(Complete),
    /// Store a failure: -> RETRYABLE_FAILURE or TERMINAL_FAILURE.
    Fail(Fail),
    /// Give the key up before anything irreversible began.
    Release(Fenced),
    /// Cancel before anything irreversible began: -> CANCELLED.
    Cancel(Fenced),
    /// Delete terminal records past their retention (leader's sweep).
    Expire(Expire),
    /// Admin repair of a non-terminal record, audited.
    Reconcile(Reconcile),
    /// Admin scrub of one subject's derived data, audited.
    PurgeSubject(PurgeSubject),
    /// Change of the cluster configuration (global group).
    Cluster(ClusterChange),
    /// Change of a region group's own state (region groups).
    Group(GroupChange),
    // bincode encodes a variant by its position: new variants go last, so that log
    // entries written before them still decode (and apply as they did then).
    /// Change of the cluster configuration, audited as `admin` (what proposers send;
    /// `Cluster` is kept for the log entries written before audit existed).
    AuditedCluster(Audited<ClusterChange>),
    /// Change of a region group's own state, audited as `admin` when it is a failover
    /// change (`EnterFailover`/`EndFailover`, proposed by the leader as `node:<id>`).
    AuditedGroup(Audited<GroupChange>),
    /// Audit entry for a membership change committed just before, not atomic with it
    /// (what releases before `MembershipIntent` proposed; kept for their log entries).
    NoteMembership(Audited<MembershipNote>),
    /// Delete abandoned claims that never began anything irreversible (leader's sweep,
    /// per-endpoint `abandon_after`), audited.
    Abandon(Audited<Abandon>),
    /// Create or revoke a replicated API token (global group), audited in the same write.
    Tokens(Audited<TokenChange>),
    /// Who is about to change the membership, and why (global group): the membership
    /// entry that fulfils it is audited when applied (`apply::membership`).
    MembershipIntent(Audited<MembershipIntent>),
}

/// A change with the principal that asked for it and why: written to the audit log in the
/// same write set as the change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audited<T> {
    /// The change.
    pub change: T,
    /// Who (the authenticated principal, or `node:<id>` for automatic changes).
    pub admin: String,
    /// Why.
    pub reason: String,
}

impl<T> Audited<T> {
    /// `change` by `admin` for `reason`.
    pub fn new(change: T, admin: impl Into<String>, reason: impl Into<String>) -> Self {
        Audited {
            change,
            admin: admin.into(),
            reason: reason.into(),
        }
    }
}

/// A claim of `(scope, key)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The key being claimed.
    pub target: RecordKey,
    /// One fingerprint per algorithm the caller can compute; the first is stored.
    pub fingerprints: Vec<Fingerprint>,
    /// The effective policy, resolved by the proposer; used only if the record is new.
    pub policy: Policy,
    /// The claiming worker attempt.
    pub holder: Holder,
    /// The operation id to use if the record is new.
    pub operation_id: OperationId,
}

/// A worker's reference to a record it owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fenced {
    /// The record.
    pub target: RecordKey,
    /// The fence received with the acquisition.
    pub fence: u64,
}

/// The stage of an external call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExternalCall {
    /// The call is about to be made; outcome unknown until confirmed.
    Calling,
    /// The remote side confirmed; `remote_ref` identifies its resource.
    RemoteConfirmed {
        /// The downstream's reference (e.g. its charge id).
        remote_ref: String,
    },
}

/// Record an external call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordExternalCall {
    /// The owned record.
    pub owner: Fenced,
    /// The stage reached.
    pub call: ExternalCall,
}

/// Extend a lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renew {
    /// The owned record.
    pub owner: Fenced,
    /// New lease length from now; the record's policy lease if absent.
    pub lease: Option<Duration>,
}

/// Complete with a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Complete {
    /// The owned record.
    pub owner: Fenced,
    /// What to replay to retries.
    pub result: StoredResult,
}

/// Fail, retryably or for good.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fail {
    /// The owned record.
    pub owner: Fenced,
    /// True: the next claim takes over. False: the error is replayed.
    pub retryable: bool,
    /// What went wrong.
    pub error: ErrorSummary,
}

/// Delete up to `limit` terminal records past retention, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expire {
    /// Batch bound.
    pub limit: u32,
}

/// Delete the named records if, when applied, each is still an abandoned claim: PENDING or
/// IN_PROGRESS, stage NOT_CALLED (nothing irreversible began, before or after a takeover),
/// no live lease, unchanged for at least its `after`, at the version the sweep saw.
/// Apply re-checks every condition, so a record that moved on since the sweep looked at
/// it is left alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abandon {
    /// The records, each with the conditions it must still meet.
    pub targets: Vec<AbandonTarget>,
}

/// One record an `Abandon` command may delete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbandonTarget {
    /// The record.
    pub key: RecordKey,
    /// The version the sweep saw; any other version leaves the record alone.
    pub version: u64,
    /// The endpoint's `abandon_after`: how long the record must have been unchanged.
    pub after: Duration,
}

/// What an operator decided about a record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReconcileTarget {
    /// The side effect happened: store its result.
    Completed(StoredResult),
    /// It did not happen and may be retried.
    RetryableFailure(ErrorSummary),
    /// It did not happen and must not be retried.
    TerminalFailure(ErrorSummary),
    /// It did not happen (the downstream says so) and the key is closed for good: nothing
    /// irreversible happened, which is what CANCELLED promises. Only for a record whose
    /// outcome was unknown (NEEDS_RECONCILIATION, or stage CALLING), never after
    /// REMOTE_CONFIRMED. Last variant on purpose: a node of entry version 1 cannot decode
    /// it and refuses it (it is an entry of version 2).
    Cancelled,
}

/// Admin repair of a record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconcile {
    /// The record.
    pub operation_id: OperationId,
    /// The version the operator looked at; any other version refuses the change.
    pub expected_version: u64,
    /// The decision.
    pub target: ReconcileTarget,
    /// Why (audited).
    pub reason: String,
    /// Who (audited).
    pub admin: String,
}

/// Admin scrub of a subject's derived data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeSubject {
    /// The tenant.
    pub tenant: String,
    /// The actor whose data is purged.
    pub actor: String,
    /// Why (audited).
    pub reason: String,
    /// Who (audited).
    pub admin: String,
    /// Resume after this record (exclusive), from a previous batch's cursor.
    pub after: Option<RecordKey>,
    /// Batch bound.
    pub limit: u32,
}

impl Command {
    /// Validates what the field types cannot: counts, sizes, free text.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            Command::Claim(claim) => claim.validate(),
            Command::Start(_) | Command::Release(_) | Command::Cancel(_) => Ok(()),
            Command::RecordExternalCall(call) => match &call.call {
                ExternalCall::Calling => Ok(()),
                ExternalCall::RemoteConfirmed { remote_ref } => {
                    check_free_text(Field::RemoteRef, remote_ref, 1, MAX_REMOTE_REF)
                }
            },
            Command::Renew(renew) => renew.lease.map_or(Ok(()), validate_lease),
            Command::Complete(complete) => complete.result.validate(),
            Command::Fail(fail) => fail.error.validate(),
            Command::Expire(expire) => check_limit(expire.limit, MAX_EXPIRE_BATCH),
            Command::Reconcile(reconcile) => reconcile.validate(),
            Command::PurgeSubject(purge) => purge.validate(),
            Command::Cluster(change) => change.validate(),
            Command::Group(change) => change.validate(),
            Command::AuditedCluster(audited) => {
                check_admin(&audited.reason, &audited.admin)?;
                audited.change.validate()
            }
            Command::AuditedGroup(audited) => {
                check_admin(&audited.reason, &audited.admin)?;
                audited.change.validate()
            }
            Command::NoteMembership(audited) => {
                check_admin(&audited.reason, &audited.admin)?;
                let members = audited.change.voters.len() + audited.change.learners.len();
                check_len(Field::Limit, members, 0, MAX_NOTE_MEMBERS)
            }
            Command::Abandon(audited) => {
                check_admin(&audited.reason, &audited.admin)?;
                audited.change.validate()
            }
            Command::Tokens(audited) => {
                check_admin(&audited.reason, &audited.admin)?;
                audited.change.validate()
            }
            Command::MembershipIntent(audited) => {
                check_admin(&audited.reason, &audited.admin)?;
                check_member(audited.change.member)
            }
        }
    }

    /// The tenant whose records the command touches, for commands that name one (the
    /// placement decides which group may apply them).
    pub fn tenant(&self) -> Option<&str> {
        let target = match self {
            Command::Claim(claim) => &claim.target,
            Command::Start(owner) | Command::Release(owner) | Command::Cancel(owner) => {
                &owner.target
            }
            Command::RecordExternalCall(call) => &call.owner.target,
            Command::Renew(renew) => &renew.owner.target,
            Command::Complete(complete) => &complete.owner.target,
            Command::Fail(fail) => &fail.owner.target,
            Command::PurgeSubject(purge) => return Some(&purge.tenant),
            Command::Expire(_)
            | Command::Reconcile(_)
            | Command::Cluster(_)
            | Command::Group(_)
            | Command::AuditedCluster(_)
            | Command::AuditedGroup(_)
            | Command::NoteMembership(_)
            | Command::Abandon(_)
            | Command::Tokens(_)
            | Command::MembershipIntent(_) => return None,
        };
        Some(target.scope.tenant())
    }

    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Claim(_) => "claim",
            Command::Start(_) => "start",
            Command::RecordExternalCall(_) => "record_external_call",
            Command::Renew(_) => "renew",
            Command::Complete(_) => "complete",
            Command::Fail(_) => "fail",
            Command::Release(_) => "release",
            Command::Cancel(_) => "cancel",
            Command::Expire(_) => "expire",
            Command::Reconcile(_) => "reconcile",
            Command::PurgeSubject(_) => "purge_subject",
            Command::Cluster(_) => "cluster_config",
            Command::Group(_) => "group_state",
            Command::AuditedCluster(_) => "cluster_config",
            Command::AuditedGroup(_) => "group_state",
            Command::NoteMembership(_) => "note_membership",
            Command::Abandon(_) => "abandon",
            Command::Tokens(_) => "tokens",
            Command::MembershipIntent(_) => "membership_intent",
        }
    }
}

impl Claim {
    fn validate(&self) -> Result<(), ValidationError> {
        check_len(
            Field::Fingerprints,
            self.fingerprints.len(),
            1,
            MAX_FINGERPRINTS,
        )?;
        for (i, fingerprint) in self.fingerprints.iter().enumerate() {
            let duplicate = self.fingerprints[..i]
                .iter()
                .any(|f| f.algorithm == fingerprint.algorithm);
            if duplicate {
                return Err(ValidationError::Rule {
                    field: Field::Fingerprints,
                    rule: "at most one fingerprint per algorithm",
                });
            }
            if fingerprint.algorithm.is_empty() || fingerprint.digest.is_empty() {
                return Err(ValidationError::Rule {
                    field: Field::Fingerprints,
                    rule: "algorithm and digest must be present",
                });
            }
        }
        self.policy.validate()
    }
}

impl Reconcile {
    fn validate(&self) -> Result<(), ValidationError> {
        check_admin(&self.reason, &self.admin)?;
        match &self.target {
            ReconcileTarget::Completed(result) => result.validate(),
            ReconcileTarget::RetryableFailure(error) | ReconcileTarget::TerminalFailure(error) => {
                error.validate()
            }
            ReconcileTarget::Cancelled => Ok(()),
        }
    }
}

impl Abandon {
    fn validate(&self) -> Result<(), ValidationError> {
        check_len(Field::Limit, self.targets.len(), 1, MAX_ABANDON_BATCH)?;
        self.targets
            .iter()
            .try_for_each(|target| validate_abandon_after(target.after))
    }
}

impl PurgeSubject {
    fn validate(&self) -> Result<(), ValidationError> {
        validate_tenant(&self.tenant)?;
        validate_actor(&self.actor)?;
        check_admin(&self.reason, &self.admin)?;
        check_limit(self.limit, MAX_PURGE_BATCH)
    }
}

pub(crate) fn check_admin(reason: &str, admin: &str) -> Result<(), ValidationError> {
    check_free_text(Field::Reason, reason, 1, MAX_REASON)?;
    check_free_text(Field::Admin, admin, 1, 128)
}

/// A member id is ≥ 1.
fn check_member(member: u64) -> Result<(), ValidationError> {
    if member == 0 {
        return Err(ValidationError::Rule {
            field: Field::Limit,
            rule: "a member id is ≥ 1",
        });
    }
    Ok(())
}

fn check_limit(limit: u32, max: u32) -> Result<(), ValidationError> {
    if limit == 0 || limit > max {
        return Err(ValidationError::Range {
            field: Field::Limit,
            value: limit.into(),
            min: 1,
            max: max.into(),
        });
    }
    Ok(())
}
