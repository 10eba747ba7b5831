//! Placement on the wire: modes, the cluster configuration and the groups a node reports.
//!
//! The wire's "zero or empty means absent" conventions become `Option`s here: the global
//! group has no region, home or failover state; a leader id of 0 is "no leader known"; a
//! failover's instant, leader and leader region are kept only while it is active.

use idem_core::placement::{ClusterConfig, Mode};
use idem_core::Timestamp;
use idem_proto::v1;

use crate::error::ClientError;
use crate::placement::{GroupFailover, GroupStatus, Groups};

/// The wire form of a mode.
pub(crate) fn mode_to_proto(mode: Mode) -> v1::Mode {
    match mode {
        Mode::Global => v1::Mode::Global,
        Mode::RegionAffinity => v1::Mode::RegionAffinity,
    }
}

/// A mode from the wire; `MODE_UNSPECIFIED` and unknown values are invalid answers.
pub(crate) fn mode_from_proto(mode: i32) -> Result<Mode, ClientError> {
    match v1::Mode::try_from(mode) {
        Ok(v1::Mode::Global) => Ok(Mode::Global),
        Ok(v1::Mode::RegionAffinity) => Ok(Mode::RegionAffinity),
        _ => Err(ClientError::invalid_response(format!(
            "cluster config with mode {mode}"
        ))),
    }
}

/// The cluster configuration of a `ClusterConfig` answer.
pub(crate) fn config_from_proto(config: v1::ClusterConfig) -> Result<ClusterConfig, ClientError> {
    Ok(ClusterConfig {
        mode: mode_from_proto(config.mode)?,
        regions: config
            .regions
            .into_iter()
            .map(|r| (r.name, r.group))
            .collect(),
        homes: config
            .homes
            .into_iter()
            .map(|h| (h.tenant, h.region))
            .collect(),
        version: config.version,
    })
}

/// A group's failover state.
pub(crate) fn failover_from_proto(f: v1::Failover) -> GroupFailover {
    GroupFailover {
        active: f.active,
        epoch: f.epoch,
        since: (f.active && f.since_ms > 0)
            .then(|| Timestamp(u64::try_from(f.since_ms).unwrap_or(0))),
        leader_id: nonzero(f.leader_id).filter(|_| f.active),
        leader_region: some(f.leader_region).filter(|_| f.active),
    }
}

/// One group as a node sees it (also the answer of `ConfirmFailover`).
pub(crate) fn group_status_from_proto(g: v1::GroupStatus) -> GroupStatus {
    GroupStatus {
        group: g.group,
        region: some(g.region),
        home: some(g.home),
        leader_id: nonzero(g.leader_id),
        leader_region: some(g.leader_region),
        leader_home: g.leader_home,
        term: g.term,
        commit_index: g.commit_index,
        applied_index: g.applied_index,
        failover: g.failover.map(failover_from_proto),
        tenants: g.tenants,
    }
}

/// Every group of a `ListGroups` answer; a missing configuration is the default one.
pub(crate) fn groups_from_proto(r: v1::ListGroupsResponse) -> Result<Groups, ClientError> {
    let config = match r.config {
        Some(config) => config_from_proto(config)?,
        None => ClusterConfig::default(),
    };
    Ok(Groups {
        node_id: r.node_id,
        region: r.region,
        config,
        groups: r.groups.into_iter().map(group_status_from_proto).collect(),
    })
}

fn some(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn nonzero(id: u64) -> Option<u64> {
    (id != 0).then_some(id)
}

#[cfg(test)]
mod tests {
    use idem_proto::testing::sample;

    use super::*;

    #[test]
    fn config_from_the_wire() {
        let wire = v1::ClusterConfig {
            mode: v1::Mode::RegionAffinity as i32,
            regions: vec![
                v1::Region {
                    name: "eu-west".into(),
                    group: 1,
                },
                v1::Region {
                    name: "us-east".into(),
                    group: 2,
                },
            ],
            homes: vec![v1::TenantHome {
                tenant: "acme".into(),
                region: "us-east".into(),
            }],
            version: 4,
        };
        let config = config_from_proto(wire.clone()).unwrap();
        assert_eq!(config.mode, Mode::RegionAffinity);
        assert_eq!(config.regions["us-east"], 2);
        assert_eq!(config.group_of("acme"), 2);
        assert_eq!(config.version, 4);
        for mode in [0, 7] {
            let err = config_from_proto(v1::ClusterConfig {
                mode,
                ..wire.clone()
            })
            .unwrap_err();
            assert_eq!(err.reason(), "INVALID_RESPONSE");
        }
        assert_eq!(mode_to_proto(Mode::Global), v1::Mode::Global);
        assert_eq!(
            mode_from_proto(mode_to_proto(Mode::RegionAffinity) as i32).unwrap(),
            Mode::RegionAffinity
        );
    }

    #[test]
    fn groups_from_the_wire() {
        let response = v1::ListGroupsResponse {
            groups: sample::group_statuses(),
            node_id: 2,
            region: "eu-west".into(),
            config: None,
        };
        let groups = groups_from_proto(response).unwrap();
        assert_eq!(groups.config, ClusterConfig::default());
        let global = groups.group(0).unwrap();
        assert!(global.is_global() && !global.in_failover());
        assert_eq!(
            (global.region.as_deref(), global.failover.as_ref()),
            (None, None)
        );
        let eu = groups.group(1).unwrap();
        assert!(eu.in_failover());
        let failover = eu.failover.as_ref().unwrap();
        assert_eq!(failover.since, Some(Timestamp(1_700_000_000_000)));
        assert_eq!(failover.leader_region.as_deref(), Some("us-east"));
        let us = groups.group(2).unwrap();
        assert_eq!(us.leader_id, None);
        let quiet = us.failover.as_ref().unwrap();
        assert_eq!(
            (quiet.active, quiet.epoch, quiet.since, quiet.leader_id),
            (false, 1, None, None)
        );
        assert!(groups.group(9).is_none());
    }
}
