//! API tokens kept in the replicated configuration (the global group's placement state).
//!
//! A node authenticates a bearer token against its credentials file and against this set,
//! which every node applies from the same log: a token created or revoked through one node
//! is known to every node as soon as it has applied the change, with no file to copy. Only
//! the SHA-256 digest of a token is stored (the secret is drawn by the node that creates
//! it and shown once), so the log, snapshots and backups hold nothing a thief could send.
//!
//! Tokens are named; names are unique, and revocation is by name. The set is bounded
//! ([`MAX_TOKENS`]) so a snapshot of the configuration stays small.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{check_len, check_text, Field, ValidationError};
use crate::scope::validate_tenant;
use crate::time::Timestamp;

/// Most tokens the replicated set holds.
pub const MAX_TOKENS: usize = 1000;
/// Longest token name.
pub const MAX_TOKEN_NAME: usize = 128;
/// Most tenants one token may name.
pub const MAX_TOKEN_TENANTS: usize = 64;
/// The tenant entry that stands for every tenant.
pub const ALL_TENANTS: &str = "*";

/// A SHA-256 digest of a token.
pub type TokenDigest = [u8; 32];

/// What a token's principal may do (the server's roles; each includes the ones before).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TokenRole {
    /// The Idempotency service for its tenants.
    Worker,
    /// A worker that may also read the cluster.
    Operator,
    /// Everything.
    Admin,
}

impl TokenRole {
    /// The role's name (as in the credentials file).
    pub fn name(self) -> &'static str {
        match self {
            TokenRole::Worker => "worker",
            TokenRole::Operator => "operator",
            TokenRole::Admin => "admin",
        }
    }
}

/// Who a token authenticates as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenGrant {
    /// The principal's name (unique in the set).
    pub name: String,
    /// Its role.
    pub role: TokenRole,
    /// Its tenants: tenant names, or [`ALL_TENANTS`] alone.
    pub tenants: BTreeSet<String>,
    /// Replicated time of the creation.
    pub created_at: Timestamp,
    /// The principal that created it.
    pub created_by: String,
}

/// The replicated tokens, by digest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    by_digest: BTreeMap<TokenDigest, TokenGrant>,
}

impl TokenSet {
    /// The grant of a token digest.
    pub fn get(&self, digest: &TokenDigest) -> Option<&TokenGrant> {
        self.by_digest.get(digest)
    }

    /// The digest and grant of the token named `name`.
    pub fn named(&self, name: &str) -> Option<(&TokenDigest, &TokenGrant)> {
        self.by_digest.iter().find(|(_, grant)| grant.name == name)
    }

    /// Every grant, by name.
    pub fn grants(&self) -> Vec<&TokenGrant> {
        let mut grants: Vec<_> = self.by_digest.values().collect();
        grants.sort_by(|a, b| a.name.cmp(&b.name));
        grants
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    pub(crate) fn insert(&mut self, digest: TokenDigest, grant: TokenGrant) {
        self.by_digest.insert(digest, grant);
    }

    pub(crate) fn remove(&mut self, digest: &TokenDigest) -> Option<TokenGrant> {
        self.by_digest.remove(digest)
    }
}

/// A change of the replicated tokens; applied by the global group only, audited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenChange {
    /// Adds a token. Refused when the name or the digest is taken, or the set is full.
    Create {
        /// The principal's name.
        name: String,
        /// SHA-256 of the secret (drawn by the proposer, never logged).
        digest: TokenDigest,
        /// Its role.
        role: TokenRole,
        /// Its tenants, or [`ALL_TENANTS`] alone.
        tenants: BTreeSet<String>,
    },
    /// Removes the token named `name` (`NOT_FOUND` when there is none).
    Revoke {
        /// The token's name.
        name: String,
    },
}

impl TokenChange {
    /// Validates the name and the tenants.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            TokenChange::Create { name, tenants, .. } => {
                validate_token_name(name)?;
                validate_token_tenants(tenants)
            }
            TokenChange::Revoke { name } => validate_token_name(name),
        }
    }
}

/// A token name: 1 to 128 of `A-Z a-z 0-9 . _ - @ :` (it is audited and logged as the
/// principal's name).
pub fn validate_token_name(name: &str) -> Result<(), ValidationError> {
    check_text(
        Field::TokenName,
        name,
        1,
        MAX_TOKEN_NAME,
        |b| b.is_ascii_alphanumeric() || b"._-@:".contains(&b),
        "A-Z a-z 0-9 . _ - @ :",
    )
}

/// A token's tenants: 1 to 64 tenant names, or `*` alone.
pub fn validate_token_tenants(tenants: &BTreeSet<String>) -> Result<(), ValidationError> {
    check_len(Field::TokenTenants, tenants.len(), 1, MAX_TOKEN_TENANTS)?;
    if tenants.contains(ALL_TENANTS) {
        return if tenants.len() == 1 {
            Ok(())
        } else {
            Err(ValidationError::Rule {
                field: Field::TokenTenants,
                rule: "\"*\" (every tenant) stands alone",
            })
        };
    }
    tenants
        .iter()
        .try_for_each(|tenant| validate_tenant(tenant))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(tenants: &[&str]) -> BTreeSet<String> {
        tenants.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn names_and_tenants_are_bounded() {
        assert!(validate_token_name("payments-eu@prod:1").is_ok());
        for bad in ["", "a b", "é", &"n".repeat(MAX_TOKEN_NAME + 1)] {
            assert_eq!(
                validate_token_name(bad).unwrap_err().field(),
                Field::TokenName
            );
        }
        assert!(validate_token_tenants(&set(&["acme", "globex"])).is_ok());
        assert!(validate_token_tenants(&set(&["*"])).is_ok());
        assert!(validate_token_tenants(&set(&[])).is_err());
        assert!(validate_token_tenants(&set(&["*", "acme"])).is_err());
        assert!(validate_token_tenants(&set(&["a b"])).is_err());
        let many: Vec<String> = (0..=MAX_TOKEN_TENANTS).map(|i| format!("t{i}")).collect();
        let many: BTreeSet<String> = many.into_iter().collect();
        assert!(validate_token_tenants(&many).is_err());
    }

    #[test]
    fn grants_are_found_by_digest_and_by_name() {
        let mut tokens = TokenSet::default();
        let grant = TokenGrant {
            name: "w".into(),
            role: TokenRole::Worker,
            tenants: set(&["acme"]),
            created_at: Timestamp(1),
            created_by: "alice".into(),
        };
        tokens.insert([7; 32], grant.clone());
        assert_eq!(tokens.get(&[7; 32]), Some(&grant));
        assert_eq!(tokens.named("w").map(|(d, _)| *d), Some([7; 32]));
        assert!(tokens.named("x").is_none());
        assert_eq!(tokens.remove(&[7; 32]), Some(grant));
        assert!(tokens.is_empty());
    }
}
