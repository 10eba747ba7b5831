//! Which commands a follower may forward to the leader, and so which ones the leader runs
//! when they arrive through `Forward.Propose`.
//!
//! A follower forwards a command only on behalf of a client it served (and, with
//! authentication on, authorised): the record commands of the Idempotency service, the
//! record repairs of the Admin service (`Reconcile`, `PurgeSubject`), the placement
//! changes of the Admin service (cluster changes, admitting or releasing a tenant,
//! confirming a new home), its token changes (`CreateToken`, `RevokeToken`) and the intent
//! of a membership change (`MembershipIntent`, and the `NoteMembership` of earlier
//! releases). Everything else a leader only proposes itself: the expiry
//! sweep's `Expire`, a new group's `Init`, and the failover bookkeeping
//! (`EnterFailover`/`EndFailover`, stamped with the leader's own id). Those are never sent,
//! and refused when they arrive, so a caller on the Raft port cannot delete records early
//! or move a group in or out of failover.
//!
//! With authentication on, the leader also re-checks the principal the follower forwarded
//! with the command ([`authorize`]): the follower already did, but the leader does not
//! have to trust that every follower's check was right, and a command forwarded without
//! a principal (a peer that skipped the API) is refused.

use idem_core::placement::GroupChange;
use idem_core::Command;
use idem_proto::reason;

use crate::auth::{AuthMode, Principal, Role};
use crate::backend::{MembershipChange, RequestError};

/// Whether `command` may travel through `Forward.Propose`; `Err` names why not.
pub fn check(command: &Command) -> Result<(), &'static str> {
    if let Command::AuditedGroup(audited) = command {
        return check(&Command::Group(audited.change.clone()));
    }
    match command {
        Command::Claim(_)
        | Command::Start(_)
        | Command::RecordExternalCall(_)
        | Command::Renew(_)
        | Command::Complete(_)
        | Command::Fail(_)
        | Command::Release(_)
        | Command::Cancel(_)
        | Command::Reconcile(_)
        | Command::PurgeSubject(_)
        | Command::Cluster(_)
        | Command::AuditedCluster(_)
        | Command::NoteMembership(_)
        | Command::MembershipIntent(_)
        | Command::Tokens(_) => Ok(()),
        Command::Group(
            GroupChange::Admit { .. }
            | GroupChange::Release { .. }
            | GroupChange::ConfirmHome { .. },
        ) => Ok(()),
        Command::Expire(_) => Err("Expire is proposed by the leader's own sweep only"),
        Command::Abandon(_) => Err("Abandon is proposed by the leader's own sweep only"),
        Command::Group(GroupChange::Init { .. }) => {
            Err("a group's Init is proposed by its own first leader only")
        }
        Command::Group(GroupChange::EnterFailover { .. } | GroupChange::EndFailover { .. }) => {
            Err("failover changes are proposed by the group's leader only")
        }
        Command::AuditedGroup(_) => unreachable!("unwrapped above"),
    }
}

/// With authentication on, refuses a forwarded `command` unless `principal` may make it:
/// placement, membership intents and notes and record repairs need an admin, token changes
/// an admin of every tenant; record commands a principal of the record's tenant. No
/// principal: `ROLE_FORBIDDEN`.
pub fn authorize(
    auth: AuthMode,
    principal: Option<&Principal>,
    command: &Command,
) -> Result<(), RequestError> {
    let Some(principal) = to_check(auth, principal)? else {
        return Ok(());
    };
    match command {
        Command::Claim(_)
        | Command::Start(_)
        | Command::RecordExternalCall(_)
        | Command::Renew(_)
        | Command::Complete(_)
        | Command::Fail(_)
        | Command::Release(_)
        | Command::Cancel(_) => principal.require(Role::Worker, command.tenant()),
        Command::Expire(_)
        | Command::Abandon(_)
        | Command::Reconcile(_)
        | Command::PurgeSubject(_)
        | Command::Cluster(_)
        | Command::Group(_)
        | Command::AuditedCluster(_)
        | Command::AuditedGroup(_)
        | Command::NoteMembership(_)
        | Command::MembershipIntent(_) => principal.require(Role::Admin, None),
        Command::Tokens(_) => principal.require_all_tenants(Role::Admin),
    }
}

/// [`authorize`] for a forwarded membership call: listing needs an operator, changes an
/// admin.
pub fn authorize_membership(
    auth: AuthMode,
    principal: Option<&Principal>,
    change: &MembershipChange,
) -> Result<(), RequestError> {
    let Some(principal) = to_check(auth, principal)? else {
        return Ok(());
    };
    let role = if change.is_read() {
        Role::Operator
    } else {
        Role::Admin
    };
    principal.require(role, None)
}

/// The principal a forwarded call is checked against: none with authentication off
/// (nothing to check); `ROLE_FORBIDDEN` when it is on and the follower forwarded none.
fn to_check(
    auth: AuthMode,
    principal: Option<&Principal>,
) -> Result<Option<&Principal>, RequestError> {
    match (auth, principal) {
        (AuthMode::Off, _) => Ok(None),
        (AuthMode::On, Some(principal)) => Ok(Some(principal)),
        (AuthMode::On, None) => Err(RequestError::denied(
            reason::ROLE_FORBIDDEN,
            "authentication is on: a forwarded call must carry the principal it was authorised for",
        )),
    }
}

#[cfg(test)]
mod tests {
    use idem_core::audit::{MembershipIntent, MembershipKind};
    use idem_core::command::{Audited, Expire, Fenced};
    use idem_core::placement::{ClusterChange, Mode};

    use super::*;
    use crate::auth::Tenants;

    #[test]
    fn only_client_commands_travel() {
        assert!(check(&Command::Expire(Expire { limit: 10 })).is_err());
        let init = GroupChange::Init {
            region: "r1".into(),
        };
        assert!(check(&Command::Group(init)).is_err());
        let enter = GroupChange::EnterFailover {
            leader_id: 2,
            leader_region: "r2".into(),
        };
        assert!(check(&Command::Group(enter)).is_err());
        let end = GroupChange::EndFailover { leader_id: 2 };
        assert!(check(&Command::Group(end)).is_err());

        let admit = GroupChange::Admit {
            tenant: "acme".into(),
        };
        assert!(check(&Command::Group(admit)).is_ok());
        let mode = ClusterChange::SetMode(Mode::RegionAffinity);
        assert!(check(&Command::Cluster(mode.clone())).is_ok());
        let audited = Audited::new(mode, "alice", "CHG-1");
        assert!(check(&Command::AuditedCluster(audited)).is_ok());
        let enter = GroupChange::EnterFailover {
            leader_id: 2,
            leader_region: "r2".into(),
        };
        let forged = Audited::new(enter, "node:2", "forged");
        assert!(check(&Command::AuditedGroup(forged)).is_err());
    }

    fn principal(role: Role, tenant: &str) -> Principal {
        Principal {
            name: "p".into(),
            role,
            tenants: Tenants::Only([tenant.to_owned()].into()),
        }
    }

    #[test]
    fn the_leader_rechecks_the_forwarded_principal() {
        let target = idem_core::RecordKey::new(
            idem_core::Scope::new("acme", "prod", "u1", "POST /x").unwrap(),
            idem_core::IdempotencyKey::new("k").unwrap(),
        );
        let claim = Command::Start(Fenced { target, fence: 1 });
        let mode = Command::AuditedCluster(Audited::new(
            ClusterChange::SetMode(Mode::RegionAffinity),
            "p",
            "r",
        ));
        let on = AuthMode::On;
        let worker = principal(Role::Worker, "acme");
        let denied = |r: Result<(), RequestError>| r.unwrap_err().reason();
        assert!(authorize(on, Some(&worker), &claim).is_ok());
        let stranger = principal(Role::Admin, "globex");
        assert_eq!(
            denied(authorize(on, Some(&stranger), &claim)),
            "TENANT_FORBIDDEN"
        );
        assert_eq!(
            denied(authorize(on, Some(&worker), &mode)),
            "ROLE_FORBIDDEN"
        );
        assert!(authorize(on, Some(&stranger), &mode).is_ok());
        let intent = MembershipIntent {
            kind: MembershipKind::Add,
            member: 4,
        };
        let intent = Command::MembershipIntent(Audited::new(intent, "p", "r"));
        assert!(check(&intent).is_ok());
        assert_eq!(
            denied(authorize(on, Some(&worker), &intent)),
            "ROLE_FORBIDDEN"
        );
        assert!(authorize(on, Some(&stranger), &intent).is_ok());
        assert_eq!(denied(authorize(on, None, &mode)), "ROLE_FORBIDDEN");
        assert_eq!(denied(authorize(on, None, &claim)), "ROLE_FORBIDDEN");
        assert!(authorize(AuthMode::Off, None, &mode).is_ok());
        let remove = MembershipChange::Remove(3);
        let operator = principal(Role::Operator, "acme");
        assert!(authorize_membership(on, Some(&operator), &MembershipChange::List).is_ok());
        assert_eq!(
            denied(authorize_membership(on, Some(&operator), &remove)),
            "ROLE_FORBIDDEN"
        );
        assert_eq!(
            denied(authorize_membership(on, None, &remove)),
            "ROLE_FORBIDDEN"
        );
    }
}
