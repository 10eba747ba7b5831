//! Expiry: the leader's sweep deletes terminal records past retention, oldest first, in
//! bounded batches. PENDING, IN_PROGRESS, RETRYABLE_FAILURE and NEEDS_RECONCILIATION
//! records are never in the expiry index, so time alone never deletes them.

use crate::apply::Ctx;
use crate::command::Expire;
use crate::error::StoreError;
use crate::outcome::Outcome;
use crate::store::StateStore;

pub(crate) fn expire<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    expire: &Expire,
) -> Result<Outcome, StoreError> {
    let limit = usize::try_from(expire.limit).unwrap_or(usize::MAX);
    let mut operation_ids = Vec::new();
    for (entry, key) in state.due(ctx.now, limit)? {
        let record = state.record(&key)?;
        let expired = record.as_ref().filter(|r| {
            r.state.is_terminal()
                && r.operation_id == entry.operation_id
                && r.expires_at.is_some_and(|at| at <= ctx.now)
        });
        match expired {
            Some(record) => {
                ctx.writes.delete_record(record);
                operation_ids.push(record.operation_id);
            }
            // A dangling index entry (never written by this crate): drop it alone.
            None => {
                ctx.writes.expiry.insert(entry, None);
            }
        }
    }
    Ok(Outcome::Expired { operation_ids })
}
