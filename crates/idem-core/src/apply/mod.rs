//! `apply(state, command, stamp) -> Outcome`: the deterministic state machine of
//! docs/design.md §2.
//!
//! Every replica runs the same commands in the same order with the same stamps, so apply
//! must decide from its inputs and the stored state alone: no clock, no randomness, no
//! hash-map iteration order. Time is `max(stamp, last applied stamp)`. Each command reads
//! through the [`StateStore`] and commits exactly one [`WriteSet`] (metadata included),
//! even when it is rejected, so the replicated clock advances identically everywhere.

mod abandon;
mod admin;
mod claim;
mod expire;
mod membership;
mod placement;
mod tokens;
mod worker;

pub use abandon::is_abandoned;
pub use claim::replay;
pub use membership::{membership, AppliedMembership};

use crate::command::Command;
use crate::error::StoreError;
use crate::outcome::{Outcome, Rejection};
use crate::store::{Meta, StateStore, WriteSet};
use crate::time::Timestamp;

/// What a command handler works with: replicated time, pending writes, metadata.
pub(crate) struct Ctx {
    /// Replicated time for this command.
    pub now: Timestamp,
    /// Writes decided so far.
    pub writes: WriteSet,
    /// Metadata to commit.
    pub meta: Meta,
}

/// Applies one command at the leader's `stamp` and returns its outcome.
///
/// Errors are storage failures only; every semantic refusal is an
/// [`Outcome::Rejected`]. A caller that gets an error must stop rather than continue with
/// a state that may differ from other replicas.
pub fn apply<S: StateStore + ?Sized>(
    state: &mut S,
    command: &Command,
    stamp: Timestamp,
) -> Result<Outcome, StoreError> {
    let meta = state.meta()?;
    let now = stamp.max(meta.last_stamp);
    let mut ctx = Ctx {
        now,
        writes: WriteSet::default(),
        meta: Meta {
            last_stamp: now,
            ..meta
        },
    };
    let outcome = match command.validate() {
        Ok(()) => admit(state, &mut ctx, command)?,
        Err(error) => Outcome::Rejected(Rejection::from(error)),
    };
    ctx.writes.meta = Some(ctx.meta);
    state.commit(ctx.writes)?;
    Ok(outcome)
}

/// Refuses commands about a tenant this group does not decide (`WRONG_GROUP`, see
/// [`crate::placement`]), then dispatches.
fn admit<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    command: &Command,
) -> Result<Outcome, StoreError> {
    let Some(tenant) = command.tenant() else {
        return dispatch(state, ctx, command, false);
    };
    let placement = state.placement()?;
    if !placement.admits(tenant) {
        return Ok(Outcome::Rejected(Rejection::WrongGroup));
    }
    dispatch(state, ctx, command, placement.failover().is_some())
}

fn dispatch<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    command: &Command,
    in_failover: bool,
) -> Result<Outcome, StoreError> {
    match command {
        Command::Claim(claim) => claim::claim(state, ctx, claim, in_failover),
        Command::Start(owner) => worker::start(state, ctx, owner),
        Command::RecordExternalCall(call) => worker::record_external_call(state, ctx, call),
        Command::Renew(renew) => worker::renew(state, ctx, renew),
        Command::Complete(complete) => worker::complete(state, ctx, complete),
        Command::Fail(fail) => worker::fail(state, ctx, fail),
        Command::Release(owner) => worker::release(state, ctx, owner),
        Command::Cancel(owner) => worker::cancel(state, ctx, owner),
        Command::Expire(expire) => expire::expire(state, ctx, expire),
        Command::Reconcile(reconcile) => admin::reconcile(state, ctx, reconcile),
        Command::PurgeSubject(purge) => admin::purge_subject(state, ctx, purge),
        Command::Cluster(change) => placement::cluster(state, ctx, change, None),
        Command::Group(change) => placement::group(state, ctx, change, None),
        Command::AuditedCluster(audited) => {
            let by = placement::By::of(audited);
            placement::cluster(state, ctx, &audited.change, Some(by))
        }
        Command::AuditedGroup(audited) => {
            let by = placement::By::of(audited);
            placement::group(state, ctx, &audited.change, Some(by))
        }
        Command::NoteMembership(note) => Ok(admin::note_membership(ctx, note)),
        Command::Abandon(abandon) => abandon::abandon(state, ctx, abandon),
        Command::Tokens(audited) => tokens::tokens(state, ctx, audited),
        Command::MembershipIntent(audited) => membership::intend(state, ctx, audited),
    }
}

/// The encoded size of a stored result or error, checked against `max_result_bytes`.
pub(crate) fn encoded_len<T: serde::Serialize>(value: &T) -> usize {
    bincode::serialized_size(value).map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Refuses a result or error above the record's limit.
pub(crate) fn check_size<T: serde::Serialize>(value: &T, limit: u32) -> Result<(), Rejection> {
    let actual = encoded_len(value);
    if actual > usize::try_from(limit).unwrap_or(usize::MAX) {
        return Err(Rejection::ResultTooLarge { limit, actual });
    }
    Ok(())
}
