//! The cluster configuration held by the global group: mode, regions, tenant homes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{check_text, Field, ValidationError};

/// A Raft group id. The global group is [`GLOBAL_GROUP`]; region groups count from 1.
pub type GroupId = u64;

/// The id of the global group.
pub const GLOBAL_GROUP: GroupId = 0;

/// Most regions a cluster may define.
pub const MAX_REGIONS: usize = 16;

/// Longest region name.
const MAX_REGION: usize = 64;

/// How tenants are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// One group spanning all nodes decides every key (the default).
    #[default]
    Global,
    /// Tenants bound to a home region are decided by that region's group; the others by
    /// the global group.
    RegionAffinity,
}

impl Mode {
    /// The name used by the API and idemctl.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Global => "global",
            Mode::RegionAffinity => "region-affinity",
        }
    }
}

/// Mode, regions (each with its group) and tenant homes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// The placement mode.
    pub mode: Mode,
    /// Region name -> the id of the group homed there.
    pub regions: BTreeMap<String, GroupId>,
    /// Tenant -> home region (only in region-affinity mode).
    pub homes: BTreeMap<String, String>,
    /// Bumped by every change (0: never configured).
    pub version: u64,
}

impl ClusterConfig {
    /// The group that decides `tenant`'s keys.
    pub fn group_of(&self, tenant: &str) -> GroupId {
        if self.mode != Mode::RegionAffinity {
            return GLOBAL_GROUP;
        }
        self.homes
            .get(tenant)
            .and_then(|region| self.regions.get(region))
            .copied()
            .unwrap_or(GLOBAL_GROUP)
    }

    /// The region a group is homed in by configuration (`None` for the global group).
    pub fn region_of(&self, group: GroupId) -> Option<&str> {
        self.regions
            .iter()
            .find(|(_, g)| **g == group)
            .map(|(name, _)| name.as_str())
    }

    /// The id the next region gets.
    pub(crate) fn next_group(&self) -> GroupId {
        self.regions.values().max().map_or(1, |g| g + 1)
    }
}

/// Validates a region name: 1 to 64 of `A-Z a-z 0-9 . _ -`, the rule of a node's
/// `region` setting, so every node region can be defined as a region.
pub fn validate_region(name: &str) -> Result<(), ValidationError> {
    check_text(
        Field::Region,
        name,
        1,
        MAX_REGION,
        |b| b.is_ascii_alphanumeric() || b"._-".contains(&b),
        "A-Z a-z 0-9 . _ -",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_count_from_one_past_the_highest() {
        let mut config = ClusterConfig::default();
        assert_eq!(config.next_group(), 1);
        config.regions.insert("b".into(), 1);
        config.regions.insert("a".into(), 2);
        assert_eq!(config.next_group(), 3);
        assert_eq!(config.region_of(2), Some("a"));
        assert_eq!(config.region_of(GLOBAL_GROUP), None);
    }

    #[test]
    fn region_names() {
        for good in [
            "eu-west",
            "us_east.1",
            "EU-West",
            "r",
            &"r".repeat(MAX_REGION),
        ] {
            assert!(validate_region(good).is_ok(), "{good:?}");
        }
        for bad in ["", "eu west", "eu/west", "é", &"r".repeat(MAX_REGION + 1)] {
            let error = validate_region(bad).unwrap_err();
            assert_eq!(error.field(), Field::Region, "{bad:?}");
            assert_eq!(error.reason(), "INVALID_ARGUMENT");
        }
    }

    #[test]
    fn mode_names_and_default() {
        assert_eq!(Mode::default(), Mode::Global);
        assert_eq!(Mode::Global.name(), "global");
        assert_eq!(Mode::RegionAffinity.name(), "region-affinity");
    }
}
