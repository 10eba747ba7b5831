//! A node's status on the wire.
//!
//! `Status` reports record counts under the wire's enum names (`STATE_PENDING`); the SDK
//! gives them the API's names (`PENDING`) so that they read like every other state it
//! prints. A zero leader id or age means "none".

use std::time::Duration;

use idem_proto::v1;

use super::membership::member_from_proto;
use crate::types::NodeStatus;

/// The typed answer of `Status`.
pub(crate) fn node_status_from_proto(s: v1::StatusResponse) -> NodeStatus {
    NodeStatus {
        node_id: s.node_id,
        leader_id: (s.leader_id != 0).then_some(s.leader_id),
        term: s.term,
        commit_index: s.commit_index,
        applied_index: s.applied_index,
        last_log_index: s.last_log_index,
        membership: s.membership.into_iter().map(member_from_proto).collect(),
        version: s.version,
        records_by_state: s
            .records_by_state
            .into_iter()
            .map(|(name, n)| (state_name(name), n))
            .collect(),
        oldest_pending_age: (s.oldest_pending_age_ms != 0)
            .then(|| Duration::from_millis(s.oldest_pending_age_ms)),
        region: s.region,
        zone: s.zone,
        failover: s.failover,
    }
}

/// `STATE_PENDING` → `PENDING`; other names unchanged.
fn state_name(wire: String) -> String {
    match wire.strip_prefix("STATE_") {
        Some(name) => name.to_owned(),
        None => wire,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_and_zero_values() {
        let status = node_status_from_proto(v1::StatusResponse {
            node_id: 1,
            records_by_state: [("STATE_PENDING".to_owned(), 3), ("ODD".to_owned(), 1)]
                .into_iter()
                .collect(),
            ..Default::default()
        });
        assert_eq!(status.leader_id, None);
        assert_eq!(status.oldest_pending_age, None);
        assert_eq!(status.records_by_state.get("PENDING"), Some(&3));
        assert_eq!(status.records_by_state.get("ODD"), Some(&1));
    }
}
