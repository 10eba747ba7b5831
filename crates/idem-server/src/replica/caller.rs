//! The principal a forwarded proposal is made for, carried from the API to the Forward call.
//!
//! A follower forwards its clients' commands to the leader, and the leader must be able to
//! check that the client was allowed to make them (issue #17: the Raft port runs only what
//! a node forwards on behalf of a client it authorised). The principal is known to the
//! API layer, the forward happens deep in the replica: a task-local slot, set for the whole
//! call by the auth layer ([`scope`]) and read by the forwarder ([`current`]), connects the
//! two without threading the principal through every backend method. A node's own
//! background proposals (sweep, failover, a new group's Init) run outside any scope and so
//! carry no principal; they are never forwarded anyway.

use std::collections::BTreeSet;
use std::future::Future;

use idem_proto::raft_v1 as rpb;

use crate::auth::{Principal, Role, Tenants};

tokio::task_local! {
    static CALLER: Principal;
}

/// Runs `call` with `principal` as the caller of every proposal it forwards.
pub async fn scope<F: Future>(principal: Principal, call: F) -> F::Output {
    CALLER.scope(principal, call).await
}

/// The caller of the current call, if it runs inside a [`scope`].
pub fn current() -> Option<Principal> {
    CALLER.try_with(Principal::clone).ok()
}

/// The wire form of a principal.
pub fn to_wire(principal: &Principal) -> rpb::ForwardedPrincipal {
    let (tenants, all_tenants) = match &principal.tenants {
        Tenants::All => (Vec::new(), true),
        Tenants::Only(set) => (set.iter().cloned().collect(), false),
    };
    rpb::ForwardedPrincipal {
        name: principal.name.clone(),
        role: principal.role.name().to_owned(),
        tenants,
        all_tenants,
    }
}

/// The principal a follower forwarded; `None` when its role is unknown (refused as if
/// absent).
pub fn from_wire(wire: &rpb::ForwardedPrincipal) -> Option<Principal> {
    let tenants = if wire.all_tenants {
        Tenants::All
    } else {
        Tenants::Only(wire.tenants.iter().cloned().collect::<BTreeSet<_>>())
    };
    Some(Principal {
        name: wire.name.clone(),
        role: Role::parse(&wire.role)?,
        tenants,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_caller_is_known_inside_its_scope_only() {
        let worker = Principal {
            name: "w".into(),
            role: Role::Worker,
            tenants: Tenants::Only(["acme".to_owned()].into()),
        };
        assert_eq!(current(), None);
        let seen = scope(worker.clone(), async { current() }).await;
        assert_eq!(seen.as_ref(), Some(&worker));
        assert_eq!(from_wire(&to_wire(&worker)), Some(worker));
        let admin = Principal {
            name: "a".into(),
            ..Principal::unauthenticated()
        };
        assert_eq!(from_wire(&to_wire(&admin)), Some(admin));
        let forged = rpb::ForwardedPrincipal {
            role: "root".into(),
            ..Default::default()
        };
        assert_eq!(from_wire(&forged), None);
    }
}
