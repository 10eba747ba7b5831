//! Admin commands: reconcile a record by hand, purge a subject's derived data, note a
//! membership change.
//!
//! Both go through the same state machine as workers and write their audit entry in the
//! same write set as their change: no audit, no change.

use crate::apply::{check_size, Ctx};
use crate::audit::{AuditAction, AuditEntry, MembershipNote};
use crate::command::{Audited, PurgeSubject, Reconcile, ReconcileTarget};
use crate::error::StoreError;
use crate::outcome::{Outcome, Rejection};
use crate::record::{Record, RecordKey, Stage, State};
use crate::store::StateStore;

pub(crate) fn reconcile<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    reconcile: &Reconcile,
) -> Result<Outcome, StoreError> {
    let record = match state.operation(&reconcile.operation_id)? {
        Some(key) => state.record(&key)?,
        None => None,
    };
    let Some(record) = record else {
        return Ok(Outcome::Rejected(Rejection::NotFound));
    };
    Ok(match decide(ctx, reconcile, record) {
        Ok(outcome) => outcome,
        Err(rejection) => Outcome::Rejected(rejection),
    })
}

fn decide(ctx: &mut Ctx, reconcile: &Reconcile, old: Record) -> Result<Outcome, Rejection> {
    if old.version != reconcile.expected_version {
        return Err(Rejection::VersionMismatch {
            current: old.version,
        });
    }
    if old.state.is_terminal() {
        return Err(Rejection::AlreadyTerminal { state: old.state });
    }
    let now = ctx.now;
    let mut record = old.clone();
    // Revoke whoever holds the key: a late worker now gets STALE_FENCE.
    record.fence += 1;
    record.lease = None;
    match &reconcile.target {
        ReconcileTarget::Completed(result) => {
            check_size(result, record.policy.max_result_bytes)?;
            record.stage = Stage::LocalDone;
            record.result = Some(result.clone());
            record.finish(State::Completed, now);
        }
        ReconcileTarget::RetryableFailure(error) => {
            check_size(error, record.policy.max_result_bytes)?;
            record.error = Some(error.clone());
            record.state = State::RetryableFailure;
            record.touch(now);
        }
        ReconcileTarget::TerminalFailure(error) => {
            check_size(error, record.policy.max_result_bytes)?;
            record.error = Some(error.clone());
            record.finish(State::TerminalFailure, now);
        }
        ReconcileTarget::Cancelled => {
            cancellable(&old)?;
            record.finish(State::Cancelled, now);
        }
    }
    let action = AuditAction::ReconcileRecord {
        tenant: record.key.scope.tenant().to_owned(),
        operation_id: record.operation_id,
        from: old.state,
        to: record.state,
        version: record.version,
    };
    audit(ctx, &reconcile.admin, &reconcile.reason, action);
    ctx.writes.put_record(Some(&old), record.clone());
    Ok(Outcome::Record(record))
}

/// Whether an operator may cancel `record`: CANCELLED promises that nothing irreversible
/// happened. A record at NOT_CALLED is cancelled by its holder (or sent back to
/// RETRYABLE_FAILURE), so reconcile cancels only records whose outcome was unknown: stage
/// CALLING, or NEEDS_RECONCILIATION, where the operator's "the downstream has no trace of
/// it" is the missing evidence. A confirmed or stored result contradicts that answer.
fn cancellable(record: &Record) -> Result<(), Rejection> {
    match record.stage {
        Stage::RemoteConfirmed | Stage::LocalDone => Err(Rejection::IrreversibleStage {
            stage: record.stage,
        }),
        Stage::Calling => Ok(()),
        Stage::NotCalled if record.state == State::NeedsReconciliation => Ok(()),
        Stage::NotCalled => Err(Rejection::WrongState {
            state: record.state,
        }),
    }
}

pub(crate) fn purge_subject<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    purge: &PurgeSubject,
) -> Result<Outcome, StoreError> {
    let prefix = RecordKey::subject_prefix(&purge.tenant, &purge.actor);
    let after = purge.after.as_ref().map(RecordKey::encode);
    let limit = usize::try_from(purge.limit).unwrap_or(usize::MAX);
    let batch = state.scan(&prefix, after.as_deref(), limit)?;
    let next = (batch.len() == limit)
        .then(|| batch.last().map(|r| r.key.clone()))
        .flatten();
    let mut scrubbed = 0;
    for old in batch {
        if let Some(record) = scrub(&old, ctx) {
            ctx.writes.put_record(Some(&old), record);
            scrubbed += 1;
        }
    }
    let action = AuditAction::PurgeSubject {
        tenant: purge.tenant.clone(),
        actor: purge.actor.clone(),
        scrubbed,
    };
    audit(ctx, &purge.admin, &purge.reason, action);
    Ok(Outcome::Purged { scrubbed, next })
}

/// The scrubbed copy of `old`, or `None` if it holds nothing to scrub. The tombstone
/// (scope, key, fingerprint, state, operation id) stays so the key still cannot run twice.
fn scrub(old: &Record, ctx: &Ctx) -> Option<Record> {
    let has_fields = old.result.as_ref().is_some_and(|r| !r.purged);
    let has_message = old.error.as_ref().is_some_and(|e| !e.message.is_empty());
    if !has_fields && !has_message {
        return None;
    }
    let mut record = old.clone();
    if let Some(result) = record.result.as_mut() {
        result.scrub();
    }
    if let Some(error) = record.error.as_mut() {
        error.scrub();
    }
    record.touch(ctx.now);
    Some(record)
}

/// Writes the audit entry of a membership change committed before this command. The
/// answer is the entry itself.
pub(crate) fn note_membership(ctx: &mut Ctx, note: &Audited<MembershipNote>) -> Outcome {
    let action = AuditAction::Membership(note.change.clone());
    let seq = audit(ctx, &note.admin, &note.reason, action);
    Outcome::Audited { seq }
}

/// Appends an audit entry to the command's write set; answers its sequence number.
pub(crate) fn audit(ctx: &mut Ctx, admin: &str, reason: &str, action: AuditAction) -> u64 {
    let seq = ctx.meta.take_audit_seq();
    let entry = AuditEntry {
        seq,
        at: ctx.now,
        admin: admin.to_owned(),
        reason: reason.to_owned(),
        action,
    };
    ctx.writes.audit.push(entry);
    seq
}
