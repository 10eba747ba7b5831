//! Commands of the lease holder: start, record an external call, renew, complete, fail,
//! release, cancel.
//!
//! Each one first checks that the record exists and that the fence is the record's current
//! fence: a late worker whose lease was taken over gets `STALE_FENCE` and changes nothing.
//! Re-sending a command that already took effect (same fence, same content) answers the
//! record again without a second change, so clients may retry transport errors blindly.

use crate::apply::{check_size, Ctx};
use crate::command::{Complete, ExternalCall, Fail, Fenced, RecordExternalCall, Renew};
use crate::error::StoreError;
use crate::outcome::{Outcome, Rejection};
use crate::record::{Lease, Record, Stage, State};
use crate::store::StateStore;

type Decision = Result<Outcome, Rejection>;

pub(crate) fn start<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    owner: &Fenced,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, owner, |ctx, record| match record.state {
        State::Pending => change(ctx, record, |r| r.state = State::InProgress),
        State::InProgress => Ok(Outcome::Record(record)),
        state => Err(not_active(state)),
    })
}

pub(crate) fn record_external_call<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    call: &RecordExternalCall,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, &call.owner, |ctx, record| {
        active(&record)?;
        let (to, remote_ref) = match &call.call {
            ExternalCall::Calling => (Stage::Calling, None),
            ExternalCall::RemoteConfirmed { remote_ref } => {
                (Stage::RemoteConfirmed, Some(remote_ref.clone()))
            }
        };
        // Re-recording the stage reached is allowed (a taker told REMOTE_CONFIRMED that found
        // the same reference downstream), with another reference it is not.
        let same = record.stage == to && (to == Stage::Calling || record.remote_ref == remote_ref);
        if same && record.state == State::InProgress {
            return Ok(Outcome::Record(record));
        }
        if !(same || stage_may_move(record.stage, to)) {
            return Err(Rejection::StageConflict {
                from: record.stage,
                to,
            });
        }
        change(ctx, record, |r| {
            r.state = State::InProgress;
            r.stage = to;
            if remote_ref.is_some() {
                r.remote_ref = remote_ref;
            }
        })
    })
}

pub(crate) fn renew<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    renew: &Renew,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, &renew.owner, |ctx, record| {
        active(&record)?;
        let Some(lease) = record.lease.clone() else {
            // Released: the holder gave the key up and must claim again.
            return Err(Rejection::StaleFence);
        };
        let length = renew.lease.unwrap_or(record.policy.lease);
        let expires_at = ctx.now.plus(length);
        change(ctx, record, |r| {
            r.lease = Some(Lease {
                holder: lease.holder,
                expires_at,
            })
        })
    })
}

pub(crate) fn complete<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    complete: &Complete,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, &complete.owner, |ctx, record| {
        if record.state == State::Completed && record.result.as_ref() == Some(&complete.result) {
            return Ok(Outcome::Record(record));
        }
        active(&record)?;
        check_size(&complete.result, record.policy.max_result_bytes)?;
        let now = ctx.now;
        change(ctx, record, |r| {
            r.stage = Stage::LocalDone;
            r.result = Some(complete.result.clone());
            r.finish(State::Completed, now);
        })
    })
}

pub(crate) fn fail<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    fail: &Fail,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, &fail.owner, |ctx, record| {
        let target = if fail.retryable {
            State::RetryableFailure
        } else {
            State::TerminalFailure
        };
        if record.state == target && record.error.as_ref() == Some(&fail.error) {
            return Ok(Outcome::Record(record));
        }
        active(&record)?;
        check_size(&fail.error, record.policy.max_result_bytes)?;
        let now = ctx.now;
        change(ctx, record, |r| {
            r.error = Some(fail.error.clone());
            if fail.retryable {
                r.state = State::RetryableFailure;
                r.lease = None;
            } else {
                r.finish(State::TerminalFailure, now);
            }
        })
    })
}

pub(crate) fn release<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    owner: &Fenced,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, owner, |ctx, record| {
        active(&record)?;
        reversible(&record)?;
        if record.lease.is_none() {
            return Ok(Outcome::Record(record));
        }
        change(ctx, record, |r| {
            r.state = State::Pending;
            r.lease = None;
        })
    })
}

pub(crate) fn cancel<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    owner: &Fenced,
) -> Result<Outcome, StoreError> {
    with_owned(state, ctx, owner, |ctx, record| {
        if record.state == State::Cancelled {
            return Ok(Outcome::Record(record));
        }
        active(&record)?;
        reversible(&record)?;
        let now = ctx.now;
        change(ctx, record, |r| r.finish(State::Cancelled, now))
    })
}

/// Loads the record, checks the fence, and runs `decide`; rejections change nothing.
fn with_owned<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    owner: &Fenced,
    decide: impl FnOnce(&mut Ctx, Record) -> Decision,
) -> Result<Outcome, StoreError> {
    let Some(record) = state.record(&owner.target)? else {
        return Ok(Outcome::Rejected(Rejection::NotFound));
    };
    if record.fence != owner.fence {
        return Ok(Outcome::Rejected(Rejection::StaleFence));
    }
    Ok(decide(ctx, record).unwrap_or_else(Outcome::Rejected))
}

/// Applies `edit` to a copy of `record`, bumps its version and queues the write.
fn change(ctx: &mut Ctx, record: Record, edit: impl FnOnce(&mut Record)) -> Decision {
    let mut updated = record.clone();
    edit(&mut updated);
    if updated.version == record.version {
        updated.touch(ctx.now);
    }
    ctx.writes.put_record(Some(&record), updated.clone());
    Ok(Outcome::Record(updated))
}

fn active(record: &Record) -> Result<(), Rejection> {
    if record.state.is_active() {
        Ok(())
    } else {
        Err(not_active(record.state))
    }
}

fn reversible(record: &Record) -> Result<(), Rejection> {
    if record.stage.is_irreversible() {
        return Err(Rejection::IrreversibleStage {
            stage: record.stage,
        });
    }
    Ok(())
}

fn not_active(state: State) -> Rejection {
    if state.is_terminal() {
        Rejection::AlreadyTerminal { state }
    } else {
        Rejection::WrongState { state }
    }
}

/// The ledger only moves forward: NOT_CALLED -> CALLING -> REMOTE_CONFIRMED.
fn stage_may_move(from: Stage, to: Stage) -> bool {
    matches!(
        (from, to),
        (Stage::NotCalled, Stage::Calling)
            | (Stage::NotCalled, Stage::RemoteConfirmed)
            | (Stage::Calling, Stage::RemoteConfirmed)
    )
}
