//! `Admin.CreateToken`, `Admin.RevokeToken`, `Admin.ListTokens`: API tokens kept in the
//! replicated configuration.
//!
//! A token change is a command of the global group (`Command::Tokens`), so every node
//! applies it from the same log and writes its audit entry in the same write as the
//! change; the authenticator of every node consults the applied set beside its credentials
//! file ([`crate::auth::ReplicatedTokens`]). The secret is drawn here, on the node that
//! serves `CreateToken`, and leaves it only in the answer: the command, the log, snapshots
//! and backups carry its SHA-256 digest.
//!
//! Managing tokens needs an admin of every tenant (`"*"`): a token may be made for any
//! tenant, so a tenant-bound admin could otherwise mint itself a wider one.

use std::collections::BTreeSet;
use std::io::Read;

use idem_core::placement::{TokenChange, TokenGrant, TokenRole};
use idem_core::{Command, Outcome};
use idem_proto::v1 as pb;
use sha2::{Digest, Sha256};

use crate::api::attribution::Attribution;
use crate::api::ApiContext;
use crate::auth::{Principal, Role};
use crate::backend::RequestError;

/// The prefix of every token idem draws.
const TOKEN_PREFIX: &str = "idem_";

/// `CreateToken`.
pub(crate) async fn create(
    ctx: &ApiContext,
    req: pb::CreateTokenRequest,
    by: Attribution,
) -> Result<pb::CreateTokenResponse, RequestError> {
    let role = role_of(req.role)?;
    let tenants: BTreeSet<String> = req.tenants.into_iter().collect();
    let token = random_token()?;
    let change = TokenChange::Create {
        name: req.name.clone(),
        digest: Sha256::digest(token.as_bytes()).into(),
        role,
        tenants,
    };
    propose(ctx, change, by).await?;
    tracing::info!(name = %req.name, role = role.name(), "token created");
    Ok(pb::CreateTokenResponse {
        token,
        name: req.name,
    })
}

/// `RevokeToken`.
pub(crate) async fn revoke(
    ctx: &ApiContext,
    req: pb::RevokeTokenRequest,
    by: Attribution,
) -> Result<pb::RevokeTokenResponse, RequestError> {
    let change = TokenChange::Revoke {
        name: req.name.clone(),
    };
    propose(ctx, change, by).await?;
    tracing::info!(name = %req.name, "token revoked");
    Ok(pb::RevokeTokenResponse {})
}

/// `ListTokens`: the set applied here after a read barrier on the global group.
pub(crate) async fn list(ctx: &ApiContext) -> Result<pb::ListTokensResponse, RequestError> {
    ctx.backend.read_barrier().await?;
    let placement = ctx.backend.global_placement();
    Ok(pb::ListTokensResponse {
        tokens: placement.tokens.grants().into_iter().map(info).collect(),
    })
}

/// Refuses unless `caller` is an admin of every tenant.
pub(crate) fn authorize(caller: Result<Principal, RequestError>) -> Result<(), RequestError> {
    caller?.require_all_tenants(Role::Admin)
}

async fn propose(
    ctx: &ApiContext,
    change: TokenChange,
    by: Attribution,
) -> Result<(), RequestError> {
    let command = Command::Tokens(by.audited(change));
    command.validate()?;
    match ctx.backend.propose(command).await? {
        Outcome::Audited { .. } => Ok(()),
        Outcome::Rejected(rejection) => Err(rejection.into()),
        _ => Err(RequestError::Internal(
            "token change: unexpected outcome from apply".into(),
        )),
    }
}

fn role_of(value: i32) -> Result<TokenRole, RequestError> {
    match pb::TokenRole::try_from(value) {
        Ok(pb::TokenRole::Worker) => Ok(TokenRole::Worker),
        Ok(pb::TokenRole::Operator) => Ok(TokenRole::Operator),
        Ok(pb::TokenRole::Admin) => Ok(TokenRole::Admin),
        _ => Err(RequestError::argument(
            "role: TOKEN_ROLE_WORKER, TOKEN_ROLE_OPERATOR or TOKEN_ROLE_ADMIN",
        )),
    }
}

fn role_pb(role: TokenRole) -> pb::TokenRole {
    match role {
        TokenRole::Worker => pb::TokenRole::Worker,
        TokenRole::Operator => pb::TokenRole::Operator,
        TokenRole::Admin => pb::TokenRole::Admin,
    }
}

fn info(grant: &TokenGrant) -> pb::TokenInfo {
    pb::TokenInfo {
        name: grant.name.clone(),
        role: role_pb(grant.role).into(),
        tenants: grant.tenants.iter().cloned().collect(),
        created_at_ms: i64::try_from(grant.created_at.millis()).unwrap_or(i64::MAX),
        created_by: grant.created_by.clone(),
    }
}

/// 32 random bytes from the kernel, as `idem_` and 64 hex digits (the form of the
/// credentials file's tokens).
fn random_token() -> Result<String, RequestError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut source| source.read_exact(&mut bytes))
        .map_err(|e| RequestError::Internal(format!("no randomness for a token: {e}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_and_distinct() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 64);
        assert!(a.starts_with(TOKEN_PREFIX) && a != b);
    }

    #[test]
    fn roles_round_trip_and_unspecified_is_refused() {
        for role in [TokenRole::Worker, TokenRole::Operator, TokenRole::Admin] {
            assert_eq!(role_of(role_pb(role).into()).unwrap(), role);
        }
        assert_eq!(role_of(0).unwrap_err().reason(), "INVALID_ARGUMENT");
        assert_eq!(role_of(9).unwrap_err().reason(), "INVALID_ARGUMENT");
    }
}
