//! Who asked for an admin change and why, as written to the audit log.
//!
//! The name is the authenticated principal's, never a request field: a caller cannot plant
//! another name in the log. With authentication off (dev node) there is no principal, so
//! the entry says `unauthenticated`. The reason is optional free text in the
//! `idem-audit-reason` request metadata (bounded by the core's `MAX_REASON`, refused with
//! `INVALID_ARGUMENT` beyond it); the RPCs that carry a `reason` field (Reconcile,
//! PurgeSubject, ConfirmFailover) keep using it.

use idem_core::command::Audited;

use crate::auth::Principal;
use crate::backend::RequestError;

/// Request metadata with the reason audited for a change.
pub const REASON_METADATA_KEY: &str = "idem-audit-reason";
/// The reason audited when a request gives none.
pub const NO_REASON: &str = "(no reason given)";
/// The name audited for a change made on a node with authentication off.
pub const UNAUTHENTICATED: &str = "unauthenticated";

/// The audited name and reason of one admin call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Attribution {
    /// The principal's name.
    pub admin: String,
    /// Why.
    pub reason: String,
}

impl Attribution {
    /// The attribution of `request` by `caller` (a refused caller is never audited: the
    /// handler refuses it before proposing anything).
    pub(crate) fn of<T>(
        caller: &Result<Principal, RequestError>,
        request: &tonic::Request<T>,
    ) -> Self {
        let admin = match caller {
            Ok(principal) if !principal.name.is_empty() => principal.name.clone(),
            _ => UNAUTHENTICATED.to_owned(),
        };
        let reason = request
            .metadata()
            .get(REASON_METADATA_KEY)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|reason| !reason.is_empty())
            .unwrap_or(NO_REASON)
            .to_owned();
        Attribution { admin, reason }
    }

    /// `change`, attributed.
    pub(crate) fn audited<C>(&self, change: C) -> Audited<C> {
        Audited::new(change, self.admin.clone(), self.reason.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Role, Tenants};

    #[test]
    fn the_principal_and_the_metadata_reason_are_audited() {
        let mut request = tonic::Request::new(());
        let alice = Ok(Principal {
            name: "alice".into(),
            role: Role::Admin,
            tenants: Tenants::All,
        });
        let by = Attribution::of(&alice, &request);
        assert_eq!(by.admin, "alice");
        assert_eq!(by.reason, NO_REASON);
        request
            .metadata_mut()
            .insert(REASON_METADATA_KEY, "CHG-7".parse().unwrap());
        assert_eq!(Attribution::of(&alice, &request).reason, "CHG-7");
        let anonymous = Ok(Principal::unauthenticated());
        assert_eq!(Attribution::of(&anonymous, &request).admin, UNAUTHENTICATED);
    }
}
