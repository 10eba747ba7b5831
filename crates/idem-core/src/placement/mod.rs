//! Placement: which Raft group decides a tenant's keys, and whether a group may take
//! high-risk writes right now (docs/design.md §3).
//!
//! A cluster runs the **global group** (id 0, every node, any leader) and, once regions
//! are defined, one **region group** per region, each with a *home* region where its
//! leader is kept. The [`ClusterConfig`] (mode, regions, tenant homes) lives in the global
//! group's state; each region group keeps its own [`RegionGroup`] state (home, admitted
//! tenants, failover) in its own log. Both are replicated state, changed only by
//! commands, so every replica decides the same.
//!
//! **One key, one log.** A tenant's claims are accepted by exactly one group: the global
//! group refuses tenants homed elsewhere, a region group accepts only tenants it has
//! admitted. Moving a tenant means releasing it from its old group (refused once it has
//! records there: its home is then immutable), binding it in the global group, then
//! admitting it in the new group. A node with a stale view of the configuration may send
//! a claim to the wrong group; that group refuses it (`WRONG_GROUP`, nothing written) and
//! the node routes again, so a key can never be decided in two logs.
//!
//! **Failover guard.** A region group whose leader is outside its home records that in
//! its log ([`GroupChange::EnterFailover`], new epoch). While it lasts, HIGH-risk claims
//! of new keys and HIGH-risk takeovers are refused with `REGION_FAILOVER`: a worker in
//! the cut-off home region may still be running the first attempt, and nobody can know.
//! It ends when leadership returns home or an operator confirms a new home; both are log
//! entries with a new epoch.

mod change;
mod cluster;
mod group;
pub mod tokens;

pub use change::{ClusterChange, GroupChange};
pub use cluster::{validate_region, ClusterConfig, GroupId, Mode, GLOBAL_GROUP, MAX_REGIONS};
pub use group::{Failover, RegionGroup, FAILOVER_RETRY_AFTER};
pub use tokens::{TokenChange, TokenGrant, TokenRole, TokenSet, MAX_TOKENS};

use serde::{Deserialize, Serialize};

use crate::audit::MembershipIntent;
use crate::command::Audited;

/// The placement state of one Raft group, kept apart from the per-command metadata
/// because it changes rarely.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Global group: the cluster configuration. Empty (default) in region groups.
    pub cluster: ClusterConfig,
    /// Region groups: this group's home, admitted tenants and failover. `None` in the
    /// global group (and in a region group before its `Init`).
    pub group: Option<RegionGroup>,
    /// Global group: the replicated API tokens. Empty in region groups. After the fields
    /// stored before tokens existed, so that their stored state is this one's prefix
    /// ([`Placement::decode`]).
    pub tokens: TokenSet,
    /// Global group: membership changes committed as intended but not yet applied, oldest
    /// first, at most [`MAX_MEMBERSHIP_INTENTS`] (`apply::membership`). Last, like `tokens`.
    pub membership_intents: Vec<Audited<MembershipIntent>>,
}

/// Most pending membership intents kept; a newer one pushes the oldest out.
pub const MAX_MEMBERSHIP_INTENTS: usize = 8;

/// The placement state as stored before membership intents existed (bincode is
/// positional: the same fields in the same order, without `membership_intents`).
#[derive(Deserialize)]
struct PlacementV2 {
    cluster: ClusterConfig,
    group: Option<RegionGroup>,
    tokens: TokenSet,
}

/// The placement state as stored before replicated tokens existed (without `tokens`).
#[derive(Deserialize)]
struct PlacementV1 {
    cluster: ClusterConfig,
    group: Option<RegionGroup>,
}

impl Placement {
    /// Whether this group may decide claims of `tenant`.
    pub fn admits(&self, tenant: &str) -> bool {
        match &self.group {
            None => !self.cluster.homes.contains_key(tenant),
            Some(group) => group.admitted.contains(tenant),
        }
    }

    /// The active failover of this group, if any.
    pub fn failover(&self) -> Option<&Failover> {
        self.group.as_ref().and_then(|g| g.failover.as_ref())
    }

    /// Decodes a stored placement (bincode), written by this version or by one before
    /// replicated tokens existed (no tokens then). The older form is accepted only when it
    /// spans the bytes exactly, so a damaged value is an error, not an empty token set.
    pub fn decode(bytes: &[u8]) -> Result<Placement, bincode::Error> {
        use bincode::Options;
        let exact = || {
            bincode::DefaultOptions::new()
                .with_fixint_encoding()
                .reject_trailing_bytes()
        };
        let error = match exact().deserialize::<Placement>(bytes) {
            Ok(placement) => return Ok(placement),
            Err(error) => error,
        };
        if let Ok(v2) = exact().deserialize::<PlacementV2>(bytes) {
            return Ok(Placement {
                cluster: v2.cluster,
                group: v2.group,
                tokens: v2.tokens,
                membership_intents: Vec::new(),
            });
        }
        match exact().deserialize::<PlacementV1>(bytes) {
            Ok(v1) => Ok(Placement {
                cluster: v1.cluster,
                group: v1.group,
                ..Placement::default()
            }),
            Err(_) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_global_group_admits_every_tenant_without_a_home() {
        let mut placement = Placement::default();
        assert!(placement.admits("acme"));
        placement.cluster.mode = Mode::RegionAffinity;
        placement.cluster.regions.insert("r1".into(), 1);
        placement.cluster.homes.insert("acme".into(), "r1".into());
        assert!(!placement.admits("acme"));
        assert!(placement.admits("globex"));
        assert!(placement.failover().is_none());
    }

    #[test]
    fn a_placement_stored_before_tokens_decodes_without_tokens() {
        let mut placement = Placement::default();
        placement.cluster.mode = Mode::RegionAffinity;
        placement.cluster.regions.insert("r1".into(), 1);
        placement.cluster.version = 3;
        // The stored form of that placement before tokens existed: cluster, then group.
        let old = bincode::serialize(&(&placement.cluster, &placement.group)).unwrap();
        assert_eq!(Placement::decode(&old).unwrap(), placement);
        let new = bincode::serialize(&placement).unwrap();
        assert_eq!(Placement::decode(&new).unwrap(), placement);
        assert!(Placement::decode(&new[..new.len() - 1]).is_err());
        let mut longer = new.clone();
        longer.push(0);
        assert!(Placement::decode(&longer).is_err());
    }

    #[test]
    fn a_placement_stored_before_membership_intents_decodes_without_them() {
        let mut placement = Placement::default();
        placement.cluster.regions.insert("r1".into(), 1);
        // The stored form before intents existed: cluster, group, tokens.
        let old =
            bincode::serialize(&(&placement.cluster, &placement.group, &placement.tokens)).unwrap();
        assert_eq!(Placement::decode(&old).unwrap(), placement);
        let intent = MembershipIntent {
            kind: crate::audit::MembershipKind::Add,
            member: 4,
        };
        placement
            .membership_intents
            .push(Audited::new(intent, "root", "grow"));
        let new = bincode::serialize(&placement).unwrap();
        assert_eq!(Placement::decode(&new).unwrap(), placement);
    }

    #[test]
    fn a_region_group_admits_only_its_tenants() {
        let mut group = RegionGroup::new("r1".into());
        group.admitted.insert("acme".into());
        let mut placement = Placement {
            group: Some(group),
            ..Placement::default()
        };
        assert!(placement.admits("acme"));
        assert!(!placement.admits("globex"));
        let failover = Failover {
            since: crate::time::Timestamp(5),
            leader_id: 2,
            leader_region: "r2".into(),
        };
        placement.group.as_mut().unwrap().failover = Some(failover.clone());
        assert_eq!(placement.failover(), Some(&failover));
    }
}
