//! Regions as the SDK returns them: the cluster configuration (idem-core's own
//! [`ClusterConfig`], with its [`Mode`]) and each Raft group as a node sees it
//! ([`GroupStatus`], with its [`GroupFailover`] state).
//!
//! The wire's "zero or empty means absent" conventions become `Option`s: the global group has
//! no region, home or failover state; a leader id of 0 is "no leader known".

use idem_core::placement::{ClusterConfig, GroupId, Mode, GLOBAL_GROUP};
use idem_core::Timestamp;
use idem_proto::v1;

use crate::error::ClientError;

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

/// A region group's failover state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFailover {
    /// True while the group's leader is outside its home region: HIGH-risk claims and
    /// takeovers get `REGION_FAILOVER`.
    pub active: bool,
    /// Bumped by every failover transition and confirmed re-homing.
    pub epoch: u64,
    /// Active only: when the failover was recorded (replicated time).
    pub since: Option<Timestamp>,
    /// Active only: the leader that recorded it.
    pub leader_id: Option<u64>,
    /// Active only: that leader's region.
    pub leader_region: Option<String>,
}

/// One Raft group as the answering node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStatus {
    /// The group id: [`GLOBAL_GROUP`] (0), or a region group (1, 2, ...).
    pub group: GroupId,
    /// The region the group was created for; `None` for the global group.
    pub region: Option<String>,
    /// Where its leader belongs (the region, or a home confirmed by an operator); `None` for
    /// the global group.
    pub home: Option<String>,
    /// The leader the node knows of.
    pub leader_id: Option<u64>,
    /// That leader's region, when known.
    pub leader_region: Option<String>,
    /// True when the leader is in the home region (always true for the global group).
    pub leader_home: bool,
    /// The group's Raft term.
    pub term: u64,
    /// Its commit index.
    pub commit_index: u64,
    /// Its index applied on the answering node.
    pub applied_index: u64,
    /// Region groups only: the failover state.
    pub failover: Option<GroupFailover>,
    /// Region groups only: the tenants whose keys it decides.
    pub tenants: Vec<String>,
}

impl GroupStatus {
    /// True for the global group.
    pub fn is_global(&self) -> bool {
        self.group == GLOBAL_GROUP
    }

    /// True while the group is in region failover.
    pub fn in_failover(&self) -> bool {
        self.failover.as_ref().is_some_and(|f| f.active)
    }
}

/// Every group as one node sees it (`list_groups`): not linearizable, a node's view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Groups {
    /// The answering node.
    pub node_id: u64,
    /// Its region.
    pub region: String,
    /// The configuration it has applied.
    pub config: ClusterConfig,
    /// The global group first, then region groups by id.
    pub groups: Vec<GroupStatus>,
}

impl Groups {
    /// The group with id `group`.
    pub fn group(&self, group: GroupId) -> Option<&GroupStatus> {
        self.groups.iter().find(|g| g.group == group)
    }
}

fn some(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn nonzero(id: u64) -> Option<u64> {
    (id != 0).then_some(id)
}

impl From<v1::Failover> for GroupFailover {
    fn from(f: v1::Failover) -> Self {
        GroupFailover {
            active: f.active,
            epoch: f.epoch,
            since: (f.active && f.since_ms > 0)
                .then(|| Timestamp(u64::try_from(f.since_ms).unwrap_or(0))),
            leader_id: nonzero(f.leader_id).filter(|_| f.active),
            leader_region: some(f.leader_region).filter(|_| f.active),
        }
    }
}

impl From<v1::GroupStatus> for GroupStatus {
    fn from(g: v1::GroupStatus) -> Self {
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
            failover: g.failover.map(GroupFailover::from),
            tenants: g.tenants,
        }
    }
}

impl Groups {
    pub(crate) fn from_proto(r: v1::ListGroupsResponse) -> Result<Self, ClientError> {
        let config = match r.config {
            Some(config) => config_from_proto(config)?,
            None => ClusterConfig::default(),
        };
        Ok(Groups {
            node_id: r.node_id,
            region: r.region,
            config,
            groups: r.groups.into_iter().map(GroupStatus::from).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
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
            groups: vec![
                v1::GroupStatus {
                    group: 0,
                    leader_id: 1,
                    leader_region: "eu-west".into(),
                    leader_home: true,
                    term: 3,
                    ..v1::GroupStatus::default()
                },
                v1::GroupStatus {
                    group: 1,
                    region: "eu-west".into(),
                    home: "eu-west".into(),
                    leader_id: 4,
                    leader_region: "us-east".into(),
                    failover: Some(v1::Failover {
                        active: true,
                        epoch: 2,
                        since_ms: 1_700_000_000_000,
                        leader_id: 4,
                        leader_region: "us-east".into(),
                    }),
                    tenants: vec!["acme".into()],
                    ..v1::GroupStatus::default()
                },
                v1::GroupStatus {
                    group: 2,
                    region: "us-east".into(),
                    home: "us-east".into(),
                    failover: Some(v1::Failover {
                        epoch: 1,
                        ..v1::Failover::default()
                    }),
                    ..v1::GroupStatus::default()
                },
            ],
            node_id: 2,
            region: "eu-west".into(),
            config: None,
        };
        let groups = Groups::from_proto(response).unwrap();
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
