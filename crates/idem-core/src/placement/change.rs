//! The commands that change placement state.

use serde::{Deserialize, Serialize};

use super::cluster::{validate_region, Mode};
use crate::error::ValidationError;
use crate::scope::validate_tenant;

/// A change of the cluster configuration; applied by the global group only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterChange {
    /// Switch the placement mode. Back to global is refused while tenants have homes.
    SetMode(Mode),
    /// Define a region; it gets the next group id.
    AddRegion {
        /// The region name.
        name: String,
    },
    /// Make `region` the home of `tenant`. Refused when the tenant has records in the
    /// global group; a move between regions releases it from the old group first.
    Bind {
        /// The tenant.
        tenant: String,
        /// Its home region.
        region: String,
    },
    /// Give the tenant back to the global group (after it was released by its group).
    Unbind {
        /// The tenant.
        tenant: String,
    },
}

/// A change of a region group's own state; applied by region groups only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupChange {
    /// Marks a new group as the group of `region` (its first command; idempotent).
    Init {
        /// The region the group was created for.
        region: String,
    },
    /// Start deciding the claims of `tenant`.
    Admit {
        /// The tenant.
        tenant: String,
    },
    /// Stop deciding the claims of `tenant`; refused once it has records here.
    Release {
        /// The tenant.
        tenant: String,
    },
    /// The leader is outside the home region: refuse HIGH-risk claims (new epoch).
    EnterFailover {
        /// The leader recording it.
        leader_id: u64,
        /// Its region.
        leader_region: String,
    },
    /// Leadership is back in the home region (new epoch).
    EndFailover {
        /// The leader recording it.
        leader_id: u64,
    },
    /// An operator declares `new_home` the group's home, ending a failover (new epoch,
    /// audited).
    ConfirmHome {
        /// The new home region.
        new_home: String,
        /// Why (audited).
        reason: String,
        /// Who (audited).
        admin: String,
    },
}

impl ClusterChange {
    /// Validates names.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            ClusterChange::SetMode(_) => Ok(()),
            ClusterChange::AddRegion { name } => validate_region(name),
            ClusterChange::Bind { tenant, region } => {
                validate_tenant(tenant)?;
                validate_region(region)
            }
            ClusterChange::Unbind { tenant } => validate_tenant(tenant),
        }
    }
}

impl GroupChange {
    /// Validates names and free text.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            GroupChange::Init { region } => validate_region(region),
            GroupChange::Admit { tenant } | GroupChange::Release { tenant } => {
                validate_tenant(tenant)
            }
            GroupChange::EnterFailover { leader_region, .. } => validate_region(leader_region),
            GroupChange::EndFailover { .. } => Ok(()),
            GroupChange::ConfirmHome {
                new_home,
                reason,
                admin,
            } => {
                validate_region(new_home)?;
                crate::command::check_admin(reason, admin)
            }
        }
    }
}
