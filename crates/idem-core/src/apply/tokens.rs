//! Token commands: create or revoke a replicated API token (see
//! [`crate::placement::tokens`]).
//!
//! The change and its audit entry are one write set: the new placement state (with the
//! token set) and the `create_token`/`revoke_token` entry commit together or not at all. A
//! refused change writes neither. Only the global group holds tokens.

use crate::apply::admin::audit;
use crate::apply::Ctx;
use crate::audit::AuditAction;
use crate::command::Audited;
use crate::error::StoreError;
use crate::outcome::{Outcome, Rejection};
use crate::placement::{TokenChange, TokenGrant, MAX_TOKENS};
use crate::store::StateStore;

pub(crate) fn tokens<S: StateStore + ?Sized>(
    state: &S,
    ctx: &mut Ctx,
    audited: &Audited<TokenChange>,
) -> Result<Outcome, StoreError> {
    let mut placement = state.placement()?;
    if placement.group.is_some() {
        return Ok(Outcome::Rejected(Rejection::PlacementConflict {
            message: "tokens live in the global group".into(),
        }));
    }
    let tokens = &mut placement.tokens;
    let action = match &audited.change {
        TokenChange::Create {
            name,
            digest,
            role,
            tenants,
        } => {
            if tokens.named(name).is_some() || tokens.get(digest).is_some() {
                return Ok(Outcome::Rejected(Rejection::TokenExists {
                    name: name.clone(),
                }));
            }
            if tokens.len() >= MAX_TOKENS {
                return Ok(Outcome::Rejected(Rejection::PlacementConflict {
                    message: format!("at most {MAX_TOKENS} tokens: revoke unused ones first"),
                }));
            }
            let grant = TokenGrant {
                name: name.clone(),
                role: *role,
                tenants: tenants.clone(),
                created_at: ctx.now,
                created_by: audited.admin.clone(),
            };
            tokens.insert(*digest, grant);
            AuditAction::CreateToken {
                name: name.clone(),
                role: *role,
                tenants: tenants.iter().cloned().collect(),
            }
        }
        TokenChange::Revoke { name } => {
            let Some((digest, _)) = tokens.named(name) else {
                return Ok(Outcome::Rejected(Rejection::NotFound));
            };
            let digest = *digest;
            tokens.remove(&digest);
            AuditAction::RevokeToken { name: name.clone() }
        }
    };
    let seq = audit(ctx, &audited.admin, &audited.reason, action);
    ctx.writes.placement = Some(placement);
    Ok(Outcome::Audited { seq })
}
