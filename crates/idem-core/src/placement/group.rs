//! The state a region group keeps about itself: home, admitted tenants, failover.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The retry-after hint of a `REGION_FAILOVER` refusal: about how long an election and a
/// leader transfer back home take, so a well-behaved client does not hammer the group.
pub const FAILOVER_RETRY_AFTER: Duration = Duration::from_secs(2);

/// A region group's own replicated state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionGroup {
    /// The region this group was created for (its name in the cluster configuration).
    pub region: String,
    /// Where its leader belongs: `region`, until an operator confirms a new home.
    pub home: String,
    /// Bumped by every failover transition and confirmed re-homing (starts at 1).
    pub epoch: u64,
    /// Tenants whose claims this group decides.
    pub admitted: BTreeSet<String>,
    /// Set while the leader is outside `home`.
    pub failover: Option<Failover>,
}

impl RegionGroup {
    /// A group just created for `region`.
    pub fn new(region: String) -> Self {
        RegionGroup {
            home: region.clone(),
            region,
            epoch: 1,
            admitted: BTreeSet::new(),
            failover: None,
        }
    }
}

/// A failover in progress: the leader that recorded it and since when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failover {
    /// Replicated time at which the failover was recorded.
    pub since: Timestamp,
    /// The leader outside the home region that recorded it.
    pub leader_id: u64,
    /// That leader's region.
    pub leader_region: String,
}
