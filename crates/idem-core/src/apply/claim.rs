//! Claims: the first one wins; later ones learn the state, take over, or are refused.

use crate::apply::Ctx;
use crate::command::Claim;
use crate::error::StoreError;
use crate::fingerprint::Fingerprint;
use crate::outcome::{ClaimKind, ClaimOutcome, Outcome, Rejection};
use crate::placement::FAILOVER_RETRY_AFTER;
use crate::policy::Risk;
use crate::record::{Lease, Record, Stage, State};
use crate::store::{StateStore, WriteSet};

/// How a claim's fingerprints compare with the stored one.
enum Match {
    Same,
    Different,
    Unverifiable,
}

pub(crate) fn claim<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    claim: &Claim,
    in_failover: bool,
) -> Result<Outcome, StoreError> {
    let Some(record) = state.record(&claim.target)? else {
        if in_failover && claim.policy.risk == Risk::High {
            return Ok(region_failover());
        }
        return Ok(create(ctx, claim));
    };
    if let Some(outcome) = replay(&record, &claim.fingerprints) {
        return Ok(Outcome::Claim(outcome));
    }
    let outcome = match compare(&record.fingerprint, &claim.fingerprints) {
        Match::Different => view(ClaimKind::FingerprintMismatch, record),
        Match::Unverifiable => view(ClaimKind::FingerprintUnverifiable, record),
        Match::Same => existing(ctx, claim, record),
    };
    if in_failover && is_high_risk_takeover(&outcome) {
        // Nothing of the takeover is written: the lost region's worker may still run.
        ctx.writes = WriteSet::default();
        return Ok(region_failover());
    }
    Ok(Outcome::Claim(outcome))
}

/// The answer to a claim of a terminal record, or `None` for a record that may still
/// change. It depends on immutable data only (terminal records never change), so any
/// replica that applied the record may give it without a Raft round trip (docs/design.md §3,
/// local replays); apply gives the very same answer.
pub fn replay(record: &Record, offered: &[Fingerprint]) -> Option<ClaimOutcome> {
    if !record.state.is_terminal() {
        return None;
    }
    let kind = match compare(&record.fingerprint, offered) {
        Match::Different => ClaimKind::FingerprintMismatch,
        Match::Unverifiable => ClaimKind::FingerprintUnverifiable,
        Match::Same => terminal_kind(record.state),
    };
    Some(view(kind, record.clone()))
}

/// What a matching claim of a terminal record learns.
fn terminal_kind(state: State) -> ClaimKind {
    if state == State::Completed {
        ClaimKind::Completed
    } else {
        ClaimKind::Failed
    }
}

/// A new holder taking over a HIGH-risk record (not a lost reply being redelivered).
fn is_high_risk_takeover(outcome: &ClaimOutcome) -> bool {
    outcome.kind == ClaimKind::TakenOver
        && !outcome.redelivered
        && outcome.record.policy.risk == Risk::High
}

fn region_failover() -> Outcome {
    Outcome::Rejected(Rejection::RegionFailover {
        retry_after: FAILOVER_RETRY_AFTER,
    })
}

fn compare(stored: &Fingerprint, offered: &[Fingerprint]) -> Match {
    let comparable = offered
        .iter()
        .find(|f| f.algorithm == stored.algorithm && f.schema_version == stored.schema_version);
    match comparable {
        Some(f) if f.digest == stored.digest => Match::Same,
        Some(_) => Match::Different,
        None => Match::Unverifiable,
    }
}

fn create(ctx: &mut Ctx, claim: &Claim) -> Outcome {
    let now = ctx.now;
    let record = Record {
        key: claim.target.clone(),
        operation_id: claim.operation_id,
        fingerprint: claim.fingerprints[0].clone(),
        state: State::Pending,
        stage: Stage::NotCalled,
        remote_ref: None,
        previous_stage: None,
        fence: 1,
        lease: Some(Lease {
            holder: claim.holder.clone(),
            expires_at: now.plus(claim.policy.lease),
        }),
        attempts: 1,
        version: 1,
        policy: claim.policy.clone(),
        result: None,
        error: None,
        created_at: now,
        updated_at: now,
        completed_at: None,
        expires_at: None,
    };
    ctx.writes.put_record(None, record.clone());
    Outcome::Claim(view(ClaimKind::Acquired, record))
}

/// A claim with a matching fingerprint.
fn existing(ctx: &mut Ctx, claim: &Claim, record: Record) -> ClaimOutcome {
    match record.state {
        State::Completed | State::TerminalFailure | State::Cancelled => {
            view(terminal_kind(record.state), record)
        }
        State::NeedsReconciliation => view(ClaimKind::NeedsReconciliation, record),
        State::RetryableFailure => take_over(ctx, claim, record),
        State::Pending | State::InProgress => active(ctx, claim, record),
    }
}

fn active(ctx: &mut Ctx, claim: &Claim, record: Record) -> ClaimOutcome {
    let now = ctx.now;
    match record.lease.clone() {
        Some(lease) if lease.is_live(now) && lease.holder == claim.holder => redeliver(record),
        Some(lease) if lease.is_live(now) => ClaimOutcome {
            retry_after: Some(now.until(lease.expires_at)),
            ..view(ClaimKind::InProgress, record)
        },
        _ if record.policy.risk == Risk::High && record.stage == Stage::Calling => {
            escalate(ctx, record)
        }
        _ => take_over(ctx, claim, record),
    }
}

/// The holder re-sent its claim (its reply was lost): it keeps what it has.
fn redeliver(record: Record) -> ClaimOutcome {
    let kind = if record.attempts == 1 {
        ClaimKind::Acquired
    } else {
        ClaimKind::TakenOver
    };
    ClaimOutcome {
        previous_stage: record.previous_stage,
        redelivered: true,
        ..view(kind, record)
    }
}

/// A new holder takes the key: new fence, new lease, the previous stage reported.
fn take_over(ctx: &mut Ctx, claim: &Claim, old: Record) -> ClaimOutcome {
    let now = ctx.now;
    let mut record = old.clone();
    record.state = State::Pending;
    record.previous_stage = Some(old.stage);
    record.fence += 1;
    record.attempts += 1;
    record.lease = Some(Lease {
        holder: claim.holder.clone(),
        expires_at: now.plus(record.policy.lease),
    });
    record.touch(now);
    ctx.writes.put_record(Some(&old), record.clone());
    ClaimOutcome {
        previous_stage: Some(old.stage),
        ..view(ClaimKind::TakenOver, record)
    }
}

/// High risk, expired lease, call in flight: nobody may guess; a person or reconciler acts.
fn escalate(ctx: &mut Ctx, old: Record) -> ClaimOutcome {
    let mut record = old.clone();
    record.state = State::NeedsReconciliation;
    record.lease = None;
    record.touch(ctx.now);
    ctx.writes.put_record(Some(&old), record.clone());
    view(ClaimKind::NeedsReconciliation, record)
}

fn view(kind: ClaimKind, record: Record) -> ClaimOutcome {
    ClaimOutcome {
        kind,
        record,
        previous_stage: None,
        retry_after: None,
        redelivered: false,
    }
}
