//! Keeps each region group's leader at home, and records failovers when it is not.
//!
//! Runs on every node and acts for the groups this node leads:
//!
//! - **Leader outside home** (the home region was lost or cut off and an election moved
//!   leadership away): have `EnterFailover` logged at once (the rules are in
//!   `replica/failover.rs`) — from then on apply refuses HIGH-risk claims and takeovers —
//!   and, as soon as a voter of the home region has been healthy
//!   (acknowledging heartbeats) and caught up for [`STABLE_FOR`], hand leadership back to
//!   it. Waiting for a stable home avoids bouncing leadership into a flapping region.
//! - **Leader at home with a failover logged**: have `EndFailover` logged (new epoch).
//!
//! On every node it also publishes each group's failover state as metrics.

use std::collections::HashMap;
use std::time::Duration;

use idem_core::placement::{GroupId, RegionGroup, GLOBAL_GROUP};
use idem_store::TypeConfig;
use openraft::async_runtime::WatchReceiver;
use openraft::RaftMetrics;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::group::Group;
use super::set::GroupSet;
use crate::metrics::Metrics;

/// How often groups are tended.
const POLL: Duration = Duration::from_millis(200);
/// How long a home voter must look healthy before leadership moves back to it.
pub const STABLE_FOR: Duration = Duration::from_secs(2);
/// A voter this many entries behind the leader is not caught up.
const MAX_LAG: u64 = 64;

/// The steward of one node.
pub struct Steward {
    groups: GroupSet,
    node_id: u64,
    region: String,
    metrics: std::sync::Arc<Metrics>,
    /// (group, voter) -> since when it looked healthy and caught up.
    healthy_since: HashMap<(GroupId, u64), Instant>,
}

impl Steward {
    /// A steward for this node.
    pub fn new(
        groups: GroupSet,
        node_id: u64,
        region: String,
        metrics: std::sync::Arc<Metrics>,
    ) -> Self {
        Steward {
            groups,
            node_id,
            region,
            metrics,
            healthy_since: HashMap::new(),
        }
    }

    /// Runs until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            for group in self.groups.all() {
                if group.id() != GLOBAL_GROUP {
                    self.tend(&group).await;
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    async fn tend(&mut self, group: &Group) {
        let Some(state) = group.placement().group.clone() else {
            return;
        };
        let metrics = group.raft().metrics().borrow_watched().clone();
        self.publish(group.id(), &state, &metrics);
        if metrics.current_leader != Some(self.node_id) {
            return;
        }
        if let Err(error) = group.backend().settle_failover().await {
            tracing::warn!(group = group.id(), %error, "failover change failed; retrying");
        }
        if state.home == self.region {
            return;
        }
        if let Some(to) = self.home_candidate(group.id(), &state.home, &metrics) {
            tracing::info!(group = group.id(), to, home = %state.home, "handing leadership back to the home region");
            if let Err(error) = group.raft().trigger().transfer_leader(to).await {
                tracing::warn!(group = group.id(), %error, "leader transfer failed");
            }
        }
    }

    /// A voter of `home` that has been healthy and caught up for [`STABLE_FOR`].
    fn home_candidate(
        &mut self,
        group: GroupId,
        home: &str,
        metrics: &RaftMetrics<TypeConfig>,
    ) -> Option<u64> {
        let membership = metrics.membership_config.membership();
        let last = metrics.last_log_index.unwrap_or(0);
        let now = Instant::now();
        let mut found = None;
        for id in membership.voter_ids() {
            let at_home = membership.get_node(&id).is_some_and(|n| n.region == home);
            if !at_home || id == self.node_id {
                continue;
            }
            if !healthy(metrics, id, last) {
                self.healthy_since.remove(&(group, id));
                continue;
            }
            let since = *self.healthy_since.entry((group, id)).or_insert(now);
            if found.is_none() && now.duration_since(since) >= STABLE_FOR {
                found = Some(id);
            }
        }
        found
    }

    /// Failover gauges of a group, on every node.
    fn publish(&self, group: GroupId, state: &RegionGroup, metrics: &RaftMetrics<TypeConfig>) {
        let label = group.to_string();
        let leader_home = metrics.current_leader.is_some_and(|id| {
            let membership = metrics.membership_config.membership();
            membership
                .get_node(&id)
                .is_some_and(|n| n.region == state.home)
        });
        self.metrics
            .group_leader_home
            .with_label_values(&[&label])
            .set(i64::from(leader_home));
        let seconds = state.failover.as_ref().map_or(0.0, |f| {
            let now = idem_core::Timestamp::now();
            f.since.until(now).as_secs_f64()
        });
        self.metrics
            .group_failover
            .with_label_values(&[&label])
            .set(i64::from(state.failover.is_some()));
        self.metrics
            .group_failover_seconds
            .with_label_values(&[&label])
            .set(seconds);
        let term = i64::try_from(metrics.current_term).unwrap_or(i64::MAX);
        let has_leader = i64::from(metrics.current_leader.is_some());
        let is_leader = i64::from(metrics.current_leader == Some(self.node_id));
        for (gauge, value) in [
            (&self.metrics.group_term, term),
            (&self.metrics.group_has_leader, has_leader),
            (&self.metrics.group_is_leader, is_leader),
        ] {
            gauge.with_label_values(&[&label]).set(value);
        }
    }
}

/// Answers the leader (`replica::membership::answers`) and is at most [`MAX_LAG`] entries
/// behind.
fn healthy(metrics: &RaftMetrics<TypeConfig>, id: u64, last: u64) -> bool {
    let fresh = crate::replica::membership::answers(metrics, id);
    let matched = metrics
        .replication
        .as_ref()
        .and_then(|r| r.get(&id).cloned().flatten())
        .map_or(0, |log_id| log_id.index());
    fresh && matched + MAX_LAG >= last
}
