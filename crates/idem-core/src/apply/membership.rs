//! Membership changes, audited atomically with the change.
//!
//! A membership change is an openraft membership log entry: it names the members, not
//! who asked for the change. So the node making a change first commits a
//! [`MembershipIntent`] (who, why, which change) to the global group, which keeps it in its
//! placement state; then it makes the change. Applying a membership entry
//! ([`membership`]) looks for the newest pending intent the new membership fulfils, and
//! writes its `membership` audit entry (who, why, resulting voters and learners, the
//! entry's log index) and drops the intent in the same write set as the applied
//! membership: a change is never applied without its entry, whatever fails when.
//!
//! An intent whose change never happens (the node failed, or the change was a no-op)
//! stays pending and is pushed out by newer ones; it never matches a change of another
//! kind or member. A membership entry with no pending intent (the cluster's first
//! membership, or one made by a release before intents) writes nothing, exactly as
//! before, so replicas of either release apply the same log to the same state.
//! Intermediate (joint) memberships are not audited: only the membership a change
//! results in is.

use crate::apply::admin::audit;
use crate::apply::Ctx;
use crate::audit::{AuditAction, MembershipIntent, MembershipNote};
use crate::command::Audited;
use crate::error::StoreError;
use crate::outcome::{Outcome, Rejection};
use crate::placement::MAX_MEMBERSHIP_INTENTS;
use crate::store::{StateStore, WriteSet};

/// A membership log entry as applied: where it is in the log, and its members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedMembership {
    /// The entry's log index.
    pub index: u64,
    /// Its voters (of a uniform membership).
    pub voters: Vec<u64>,
    /// Its learners.
    pub learners: Vec<u64>,
}

/// Keeps `audited` as pending (the `MembershipIntent` command).
pub(crate) fn intend<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    audited: &Audited<MembershipIntent>,
) -> Result<Outcome, StoreError> {
    let mut placement = state.placement()?;
    if placement.group.is_some() {
        return Ok(Outcome::Rejected(Rejection::PlacementConflict {
            message: "the membership is audited in the global group".into(),
        }));
    }
    let intents = &mut placement.membership_intents;
    if intents.len() >= MAX_MEMBERSHIP_INTENTS {
        intents.remove(0);
    }
    intents.push(audited.clone());
    ctx.writes.placement = Some(placement.clone());
    Ok(Outcome::Placement(placement))
}

/// Applies a (uniform) membership entry to the state machine's state: audits the newest
/// pending intent it fulfils, if any (see the module docs). Answers the audit entry's
/// sequence number; `None` when nothing was written.
pub fn membership<S: StateStore + ?Sized>(
    state: &mut S,
    applied: &AppliedMembership,
) -> Result<Option<u64>, StoreError> {
    let mut placement = state.placement()?;
    let intents = &mut placement.membership_intents;
    let Some(at) = intents
        .iter()
        .rposition(|i| i.change.fulfilled_by(&applied.voters, &applied.learners))
    else {
        return Ok(None);
    };
    let intent = intents.remove(at);
    let meta = state.meta()?;
    let mut ctx = Ctx {
        now: meta.last_stamp,
        writes: WriteSet::default(),
        meta,
    };
    let note = MembershipNote {
        kind: intent.change.kind,
        member: intent.change.member,
        voters: applied.voters.clone(),
        learners: applied.learners.clone(),
    };
    let action = AuditAction::MembershipChange {
        note,
        index: applied.index,
    };
    let seq = audit(&mut ctx, &intent.admin, &intent.reason, action);
    ctx.writes.placement = Some(placement);
    ctx.writes.meta = Some(ctx.meta);
    state.commit(ctx.writes)?;
    Ok(Some(seq))
}
