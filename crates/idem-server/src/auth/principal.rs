//! Who a call comes from, and the one check every handler makes against it.

use std::collections::BTreeSet;

use idem_core::placement::TokenRole;
use idem_proto::reason;

use crate::backend::RequestError;

/// What a principal may do. Each role includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// The `Idempotency` service: claims, owner mutations and reads of its tenants' records.
    Worker,
    /// A worker that may also read the cluster: `ListOperations` of its tenants, `Status`,
    /// `ListMembers`, `ListGroups`, `GetClusterConfig`.
    Operator,
    /// An operator that may also change the cluster: membership, mode, regions, tenant
    /// homes, failover confirmation, reconcile and purge.
    Admin,
}

impl Role {
    /// The role's name in the credentials file.
    pub fn name(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role named `name`.
    pub fn parse(name: &str) -> Option<Role> {
        [Role::Worker, Role::Operator, Role::Admin]
            .into_iter()
            .find(|role| role.name() == name)
    }
}

impl From<TokenRole> for Role {
    fn from(role: TokenRole) -> Role {
        match role {
            TokenRole::Worker => Role::Worker,
            TokenRole::Operator => Role::Operator,
            TokenRole::Admin => Role::Admin,
        }
    }
}

/// The tenants a principal acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tenants {
    /// Every tenant (`"*"` in the credentials file).
    All,
    /// These tenants only.
    Only(BTreeSet<String>),
}

impl Tenants {
    /// True when `tenant` is one of these.
    pub fn contains(&self, tenant: &str) -> bool {
        match self {
            Tenants::All => true,
            Tenants::Only(set) => set.contains(tenant),
        }
    }
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The name audited for its changes (the token's or the certificate's name).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// For which tenants.
    pub tenants: Tenants,
}

impl Principal {
    /// The caller of a node with authentication off: anyone, for everything.
    pub fn unauthenticated() -> Principal {
        Principal {
            name: String::new(),
            role: Role::Admin,
            tenants: Tenants::All,
        }
    }

    /// Refuses with `ROLE_FORBIDDEN` unless the principal has at least `role`, and with
    /// `TENANT_FORBIDDEN` when `tenant` is given and is not one of the principal's.
    pub fn require(&self, role: Role, tenant: Option<&str>) -> Result<(), RequestError> {
        if self.role < role {
            return Err(RequestError::denied(
                reason::ROLE_FORBIDDEN,
                format!("this call needs the {} role", role.name()),
            ));
        }
        match tenant {
            Some(tenant) if !self.tenants.contains(tenant) => Err(RequestError::denied(
                reason::TENANT_FORBIDDEN,
                "the tenant is not one of the caller's",
            )),
            _ => Ok(()),
        }
    }

    /// Refuses with `TENANT_FORBIDDEN` unless the principal acts for every tenant (calls
    /// that span tenants, such as a `ListOperations` without a tenant).
    pub fn require_all_tenants(&self, role: Role) -> Result<(), RequestError> {
        self.require(role, None)?;
        match self.tenants {
            Tenants::All => Ok(()),
            Tenants::Only(_) => Err(RequestError::denied(
                reason::TENANT_FORBIDDEN,
                "name one of your tenants: this call would span every tenant",
            )),
        }
    }

    /// The name to audit: the principal's, or, with authentication off, what the request
    /// named.
    pub fn audited_name(&self, requested: String) -> String {
        if self.name.is_empty() {
            requested
        } else {
            self.name.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker_of(tenant: &str) -> Principal {
        Principal {
            name: "w".into(),
            role: Role::Worker,
            tenants: Tenants::Only([tenant.to_owned()].into()),
        }
    }

    #[test]
    fn roles_include_the_lower_ones_and_tenants_bound_every_role() {
        let worker = worker_of("acme");
        assert!(worker.require(Role::Worker, Some("acme")).is_ok());
        let denied = worker.require(Role::Worker, Some("globex")).unwrap_err();
        assert_eq!(denied.reason(), reason::TENANT_FORBIDDEN);
        let denied = worker.require(Role::Operator, None).unwrap_err();
        assert_eq!(denied.reason(), reason::ROLE_FORBIDDEN);
        assert_eq!(
            worker
                .require_all_tenants(Role::Worker)
                .unwrap_err()
                .reason(),
            reason::TENANT_FORBIDDEN
        );
        let admin = Principal::unauthenticated();
        assert!(admin.require(Role::Admin, Some("any")).is_ok());
        assert!(admin.require_all_tenants(Role::Operator).is_ok());
    }

    #[test]
    fn the_audited_name_is_the_principal_when_there_is_one() {
        assert_eq!(worker_of("a").audited_name("forged".into()), "w");
        assert_eq!(
            Principal::unauthenticated().audited_name("ops".into()),
            "ops"
        );
    }

    #[test]
    fn role_names_round_trip() {
        for role in [Role::Worker, Role::Operator, Role::Admin] {
            assert_eq!(Role::parse(role.name()), Some(role));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
