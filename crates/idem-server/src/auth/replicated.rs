//! The tokens of the replicated configuration, as the authenticator consults them.
//!
//! They are read from the global group's placement state as applied on this node, on
//! every call: a token created or revoked through any node takes effect here as soon as
//! this node has applied the change (a revocation is in force on every node within a
//! second in a healthy cluster: one replication round and one apply). Nothing is cached, so
//! there is nothing to invalidate.

use std::fmt;
use std::sync::Arc;

use idem_core::placement::tokens::{TokenDigest, TokenGrant, ALL_TENANTS};
use idem_core::Placement;

use super::principal::{Principal, Role, Tenants};

/// Reads the applied placement state of the global group.
type ReadPlacement = dyn Fn() -> Arc<Placement> + Send + Sync;

/// The replicated tokens of this node's global group.
#[derive(Clone)]
pub struct ReplicatedTokens {
    read: Arc<ReadPlacement>,
}

impl ReplicatedTokens {
    /// Tokens read through `read` (the global group's applied placement).
    pub fn new(read: impl Fn() -> Arc<Placement> + Send + Sync + 'static) -> Self {
        ReplicatedTokens {
            read: Arc::new(read),
        }
    }

    /// The principal of the token whose SHA-256 digest is `digest`, if it is in the set.
    pub fn principal(&self, digest: &TokenDigest) -> Option<Principal> {
        (self.read)().tokens.get(digest).map(principal_of)
    }
}

impl fmt::Debug for ReplicatedTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplicatedTokens")
    }
}

/// The principal a replicated grant stands for.
pub(crate) fn principal_of(grant: &TokenGrant) -> Principal {
    let tenants = if grant.tenants.contains(ALL_TENANTS) {
        Tenants::All
    } else {
        Tenants::Only(grant.tenants.clone())
    };
    Principal {
        name: grant.name.clone(),
        role: Role::from(grant.role),
        tenants,
    }
}

#[cfg(test)]
mod tests {
    use idem_core::placement::{TokenRole, TokenSet};
    use idem_core::Timestamp;

    use super::*;

    #[test]
    fn grants_become_principals() {
        let grant = |tenants: &[&str]| TokenGrant {
            name: "w".into(),
            role: TokenRole::Operator,
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
            created_at: Timestamp(1),
            created_by: "alice".into(),
        };
        let all = principal_of(&grant(&["*"]));
        assert_eq!((all.role, all.tenants), (Role::Operator, Tenants::All));
        let one = principal_of(&grant(&["acme"]));
        assert!(one.tenants.contains("acme") && !one.tenants.contains("globex"));
        let tokens = ReplicatedTokens::new(|| Arc::new(Placement::default()));
        assert_eq!(tokens.principal(&[1; 32]), None);
        assert_eq!(TokenSet::default().len(), 0);
    }
}
