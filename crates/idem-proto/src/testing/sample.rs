//! Sample wire messages: what a node of a two-region cluster reports.
//!
//! The cluster has the global group and two region groups, in the states a test of region
//! tooling needs at once: `eu-west` (group 1) is in failover (its leader, node 4, runs in
//! `us-east`), `us-east` (group 2) has no leader known and left its failover at epoch 1.

use crate::v1;

/// When group 1's failover was recorded: 2023-11-14T22:13:20Z.
pub const FAILOVER_SINCE_MS: i64 = 1_700_000_000_000;

/// The groups as node 1 in `eu-west` sees them: the global group (led at home by node 1),
/// `eu-west` (group 1, in failover, tenants `acme` and `globex`) and `us-east` (group 2, no
/// leader known, failover epoch 1 and inactive).
pub fn group_statuses() -> Vec<v1::GroupStatus> {
    vec![global_group(), eu_west_group(), us_east_group()]
}

fn global_group() -> v1::GroupStatus {
    v1::GroupStatus {
        group: 0,
        leader_id: 1,
        leader_region: "eu-west".into(),
        leader_home: true,
        term: 3,
        commit_index: 40,
        applied_index: 40,
        ..v1::GroupStatus::default()
    }
}

fn eu_west_group() -> v1::GroupStatus {
    v1::GroupStatus {
        group: 1,
        region: "eu-west".into(),
        home: "eu-west".into(),
        leader_id: 4,
        leader_region: "us-east".into(),
        leader_home: false,
        term: 5,
        commit_index: 12,
        applied_index: 11,
        failover: Some(v1::Failover {
            active: true,
            epoch: 2,
            since_ms: FAILOVER_SINCE_MS,
            leader_id: 4,
            leader_region: "us-east".into(),
        }),
        tenants: vec!["acme".into(), "globex".into()],
    }
}

fn us_east_group() -> v1::GroupStatus {
    v1::GroupStatus {
        group: 2,
        region: "us-east".into(),
        home: "us-east".into(),
        term: 2,
        commit_index: 7,
        applied_index: 7,
        failover: Some(v1::Failover {
            epoch: 1,
            ..v1::Failover::default()
        }),
        ..v1::GroupStatus::default()
    }
}

/// A voter `id` in `region` (zone `<region>-1a`) serving the API at `api_addr`; its Raft
/// address is a closed loopback port, as a fake node has no Raft port.
pub fn member(id: u64, region: &str, api_addr: &str) -> v1::Member {
    v1::Member {
        id,
        region: region.to_owned(),
        zone: format!("{region}-1a"),
        raft_addr: "127.0.0.1:1".into(),
        api_addr: api_addr.to_owned(),
        voter: true,
        ..v1::Member::default()
    }
}
