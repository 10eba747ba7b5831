//! Replicated API tokens as the SDK sees them (`Admin.CreateToken`, `RevokeToken`,
//! `ListTokens`): what a listing shows (never a secret or a digest) and a new token.

use std::fmt;

use idem_core::placement::TokenRole;
use idem_proto::v1 as pb;

/// A replicated token, without its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    /// The principal's name.
    pub name: String,
    /// Its role.
    pub role: TokenRole,
    /// Its tenants (`*`: every tenant).
    pub tenants: Vec<String>,
    /// Replicated time of the creation (ms since the Unix epoch).
    pub created_at_ms: i64,
    /// Who created it.
    pub created_by: String,
}

/// A token just created: its secret is in this value only (the cluster keeps its digest).
#[derive(Clone, PartialEq, Eq)]
pub struct NewToken {
    /// The token's name.
    pub name: String,
    /// The secret, to send as `authorization: Bearer <secret>`.
    pub secret: String,
}

impl fmt::Debug for NewToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewToken")
            .field("name", &self.name)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// The wire role.
pub(crate) fn role_to_proto(role: TokenRole) -> pb::TokenRole {
    match role {
        TokenRole::Worker => pb::TokenRole::Worker,
        TokenRole::Operator => pb::TokenRole::Operator,
        TokenRole::Admin => pb::TokenRole::Admin,
    }
}

impl TokenInfo {
    /// The info of a wire token (`None` for a role this version does not know).
    pub(crate) fn from_proto(info: pb::TokenInfo) -> Option<Self> {
        let role = match info.role() {
            pb::TokenRole::Worker => TokenRole::Worker,
            pb::TokenRole::Operator => TokenRole::Operator,
            pb::TokenRole::Admin => TokenRole::Admin,
            pb::TokenRole::Unspecified => return None,
        };
        Some(TokenInfo {
            name: info.name,
            role,
            tenants: info.tenants,
            created_at_ms: info.created_at_ms,
            created_by: info.created_by,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_never_prints_its_secret() {
        let token = NewToken {
            name: "w".into(),
            secret: "idem_s3cret".into(),
        };
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[test]
    fn roles_round_trip() {
        for role in [TokenRole::Worker, TokenRole::Operator, TokenRole::Admin] {
            let info = pb::TokenInfo {
                role: role_to_proto(role).into(),
                ..Default::default()
            };
            assert_eq!(TokenInfo::from_proto(info).unwrap().role, role);
        }
        assert!(TokenInfo::from_proto(pb::TokenInfo::default()).is_none());
    }
}
