//! Abandoned claims: the sweep's bounded-growth rule for endpoints with an `abandon_after`.
//!
//! A client that claims keys and then vanishes leaves PENDING or IN_PROGRESS records that
//! time never deletes (only terminal records expire). For an endpoint that opts in, the
//! leader's sweep names such records in an `Abandon` command, and apply deletes each one
//! that is, at apply time, still:
//!
//! - PENDING or IN_PROGRESS, at the version the sweep saw;
//! - at stage NOT_CALLED, and not taken over from a later stage: nothing irreversible was
//!   ever begun, so deleting it cannot hide a side effect;
//! - without a live lease: nobody is working on it;
//! - unchanged for at least the endpoint's `abandon_after`.
//!
//! Deleting is safe *only because nothing ran*: a later claim of the key starts fresh,
//! exactly as if the abandoned claim had never been made. Every deletion is audited. A
//! record failing any condition is left as it is and not reported.

use crate::apply::admin::audit;
use crate::apply::Ctx;
use crate::audit::AuditAction;
use crate::command::{Abandon, AbandonTarget, Audited};
use crate::error::StoreError;
use crate::outcome::Outcome;
use crate::record::{Record, Stage};
use crate::store::StateStore;
use crate::time::Timestamp;

pub(crate) fn abandon<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    command: &Audited<Abandon>,
) -> Result<Outcome, StoreError> {
    let mut operation_ids = Vec::new();
    for target in &command.change.targets {
        // The same key twice in one command: the first deletion is pending in the write
        // set, and the store still shows the record; do not audit it twice.
        if ctx.writes.records.contains_key(&target.key.encode()) {
            continue;
        }
        let Some(record) = state.record(&target.key)? else {
            continue;
        };
        if !is_abandoned(&record, target, ctx.now) {
            continue;
        }
        let action = AuditAction::Abandon {
            operation_id: record.operation_id,
            tenant: record.key.scope.tenant().to_owned(),
            state: record.state,
            idle_ms: idle_ms(&record, ctx.now),
        };
        audit(ctx, &command.admin, &command.reason, action);
        ctx.writes.delete_record(&record);
        operation_ids.push(record.operation_id);
    }
    Ok(Outcome::Expired { operation_ids })
}

/// True when `record` may be deleted as abandoned at `now` (see the module docs).
pub fn is_abandoned(record: &Record, target: &AbandonTarget, now: Timestamp) -> bool {
    let never_called = record.stage == Stage::NotCalled
        && record
            .previous_stage
            .is_none_or(|stage| !stage.is_irreversible());
    let leased = record
        .lease
        .as_ref()
        .is_some_and(|lease| lease.is_live(now));
    record.state.is_active()
        && record.version == target.version
        && never_called
        && !leased
        && idle_ms(record, now) >= u64::try_from(target.after.as_millis()).unwrap_or(u64::MAX)
}

fn idle_ms(record: &Record, now: Timestamp) -> u64 {
    now.millis().saturating_sub(record.updated_at.millis())
}
