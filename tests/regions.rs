//! Black-box tests of regions on a 5-node cluster in 3 regions (`r1`: nodes 1 and 4, `r2`:
//! nodes 2 and 5, `r3`: node 3), real `idemd` processes on loopback:
//!
//! - region groups start with their leader at home; tenants route to their home group
//!   from any node, and terminal records are replayed by any node from its own replica;
//! - a tenant's home is immutable once it has records, in its region group and in the
//!   global group;
//! - concurrent first claims of one key through all three regions: exactly one ACQUIRED;
//! - losing the home region (its only node killed) puts the group in failover: HIGH-risk
//!   claims get REGION_FAILOVER and create nothing, NORMAL ones succeed through the new
//!   leader; when the region returns, leadership goes home and the failover ends; an
//!   operator can also end a failover by confirming a new home.
//!
//! Clusters run one at a time (see `idem_tests::Cluster`).

use std::time::Duration;

use idem_client::{ClaimOutcome, Client, ClientError};
use idem_core::{ClaimKind, IdempotencyKey, RecordKey, Risk, Scope};
use idem_proto::v1 as pb;
use idem_tests::{claim, poll, result, Cluster, ClusterOptions};
use tokio::task::JoinSet;

const BODY: &str = r#"{"amount": 1000, "currency": "EUR"}"#;
/// Long enough for an election, a failover entry and a transfer back home.
const SETTLE: Duration = Duration::from_secs(30);

fn key_of(tenant: &str, key: &str) -> RecordKey {
    let scope = Scope::new(tenant, "test", "user-1", "POST /v1/charges").expect("scope");
    RecordKey::new(scope, IdempotencyKey::new(key).expect("key"))
}

/// A cluster in region-affinity mode with regions r1..r3 and tenant `t-rN` homed in `rN`.
async fn regional_cluster() -> Cluster {
    let mut cluster = Cluster::start(5, ClusterOptions::default()).await;
    for region in ["r1", "r2", "r3"] {
        let name = region.to_owned();
        cluster
            .admin_rpc("add region", |mut admin| {
                let name = name.clone();
                async move { admin.add_region(pb::AddRegionRequest { name }).await }
            })
            .await;
    }
    cluster
        .admin_rpc("set mode", |mut admin| async move {
            let mode = pb::Mode::RegionAffinity.into();
            admin.set_mode(pb::SetModeRequest { mode }).await
        })
        .await;
    for region in ["r1", "r2", "r3"] {
        bind(&mut cluster, &format!("t-{region}"), region)
            .await
            .expect("bind");
    }
    assert!(
        poll(SETTLE, || groups_at_home(&cluster, 1)).await,
        "region groups did not all get a leader at home: {:?}",
        groups(&cluster, 1).await
    );
    cluster
}

async fn bind(cluster: &mut Cluster, tenant: &str, region: &str) -> Result<(), tonic::Status> {
    let mut admin = admin_of(cluster, 1).await;
    let request = pb::BindTenantRequest {
        tenant: tenant.into(),
        region: region.into(),
    };
    admin.bind_tenant(request).await.map(drop)
}

async fn admin_of(
    cluster: &Cluster,
    id: u64,
) -> pb::admin_client::AdminClient<tonic::transport::Channel> {
    pb::admin_client::AdminClient::connect(format!("http://{}", cluster.endpoint(id)))
        .await
        .expect("admin connection")
}

async fn groups(cluster: &Cluster, id: u64) -> Vec<pb::GroupStatus> {
    let mut admin = admin_of(cluster, id).await;
    admin
        .list_groups(pb::ListGroupsRequest {})
        .await
        .map(|r| r.into_inner().groups)
        .unwrap_or_default()
}

async fn group(cluster: &Cluster, id: u64, group: u64) -> Option<pb::GroupStatus> {
    groups(cluster, id)
        .await
        .into_iter()
        .find(|g| g.group == group)
}

async fn groups_at_home(cluster: &Cluster, id: u64) -> bool {
    let groups = groups(cluster, id).await;
    groups.len() == 4 && groups.iter().all(|g| g.leader_id != 0 && g.leader_home)
}

fn reason(error: &ClientError) -> String {
    error.reason().to_string()
}

/// Claims and completes `key` through `client`; the claim must be ACQUIRED.
async fn run_once(client: &Client, key: &RecordKey) {
    let claim = client.claim(claim(key, BODY)).await.expect("claim");
    let ClaimOutcome::Acquired { fence, .. } = claim.outcome else {
        panic!("expected ACQUIRED, got {:?}", claim.outcome);
    };
    client
        .complete(key, fence, &result("ch_1"))
        .await
        .expect("complete");
}

fn metric(cluster: &Cluster, id: u64, name: &str) -> f64 {
    cluster
        .node(id)
        .metrics()
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_route_to_their_home_group_and_replay_locally() {
    let cluster = regional_cluster().await;
    // Group ids follow the order regions were added: r1 = 1, r2 = 2, r3 = 3.
    let r3 = group(&cluster, 2, 3).await.expect("group 3");
    assert_eq!((r3.home.as_str(), r3.leader_id), ("r3", 3), "{r3:?}");

    let key = key_of("t-r3", "route-1");
    run_once(&cluster.client_of(1), &key).await;
    let on_leader = group(&cluster, 3, 3).await.expect("group 3 on node 3");
    assert!(on_leader.applied_index > 0 && on_leader.tenants == ["t-r3"]);

    // The retry through node 5 (r2) is answered from node 5's own replica of group 3.
    assert!(
        poll(SETTLE, || async {
            group(&cluster, 5, 3).await.map(|g| g.applied_index) >= Some(on_leader.commit_index)
        })
        .await
    );
    let before = metric(&cluster, 5, "idem_local_replays_total");
    let replay = cluster
        .client_of(5)
        .claim(claim(&key, BODY))
        .await
        .expect("replay");
    assert_eq!(replay.outcome.kind(), ClaimKind::Completed);
    assert_eq!(
        metric(&cluster, 5, "idem_local_replays_total"),
        before + 1.0
    );
    // A mismatching retry is also answered locally, and learns nothing of the result.
    let other = cluster
        .client_of(5)
        .claim(claim(&key, r#"{"amount": 1}"#))
        .await
        .expect("mismatch");
    assert_eq!(other.outcome.kind(), ClaimKind::FingerprintMismatch);

    // A tenant without a home stays in the global group.
    run_once(&cluster.client_of(2), &key_of("unbound", "route-2")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_home_is_immutable_once_the_tenant_has_records() {
    let mut cluster = regional_cluster().await;
    run_once(&cluster.client_of(1), &key_of("t-r1", "pinned")).await;
    let moved = bind(&mut cluster, "t-r1", "r2")
        .await
        .expect_err("must refuse");
    assert_eq!(
        idem_proto::status::reason_of(&moved).as_deref(),
        Some("TENANT_HOME_IMMUTABLE")
    );
    // Still homed in r1, still served there.
    run_once(&cluster.client_of(4), &key_of("t-r1", "pinned-2")).await;

    run_once(&cluster.client_of(2), &key_of("global-t", "pinned")).await;
    let bound = bind(&mut cluster, "global-t", "r3")
        .await
        .expect_err("must refuse");
    assert_eq!(
        idem_proto::status::reason_of(&bound).as_deref(),
        Some("TENANT_HOME_IMMUTABLE")
    );
    let unknown = bind(&mut cluster, "fresh", "mars")
        .await
        .expect_err("refuse");
    assert_eq!(
        idem_proto::status::reason_of(&unknown).as_deref(),
        Some("UNKNOWN_REGION")
    );
    // A region nobody runs in: its group could never lead from home.
    let mut admin = admin_of(&cluster, 1).await;
    admin
        .add_region(pb::AddRegionRequest { name: "r9".into() })
        .await
        .expect("add region");
    let empty = bind(&mut cluster, "fresh", "r9").await.expect_err("refuse");
    assert_eq!(
        idem_proto::status::reason_of(&empty).as_deref(),
        Some("PLACEMENT_CONFLICT")
    );
    // A tenant without records may move.
    bind(&mut cluster, "fresh", "r2").await.expect("bind");
    bind(&mut cluster, "fresh", "r3").await.expect("move");
    run_once(&cluster.client_of(5), &key_of("fresh", "k")).await;
    let config = admin_of(&cluster, 2)
        .await
        .get_cluster_config(pb::GetClusterConfigRequest {})
        .await
        .expect("config")
        .into_inner();
    let home = config.homes.iter().find(|h| h.tenant == "fresh");
    assert_eq!(home.map(|h| h.region.as_str()), Some("r3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_claims_from_three_regions_have_one_winner() {
    let cluster = regional_cluster().await;
    for (round, tenant) in ["t-r1", "t-r2", "t-r3", "unbound"].iter().enumerate() {
        let key = key_of(tenant, &format!("race-{round}"));
        let mut tasks = JoinSet::new();
        for i in 0..30u64 {
            // Nodes 1, 2, 3: one per region.
            let client = cluster.client_of(i % 3 + 1);
            let request = claim(&key, BODY);
            tasks.spawn(async move { client.claim(request).await });
        }
        let claims = tasks.join_all().await;
        let acquired = claims
            .iter()
            .filter(|c| matches!(c, Ok(c) if c.outcome.kind() == ClaimKind::Acquired))
            .count();
        assert_eq!(acquired, 1, "{tenant}: exactly one ACQUIRED: {claims:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_the_home_region_guards_high_risk_claims_until_it_returns() {
    let mut cluster = regional_cluster().await;
    let client = cluster.client_of(1);
    let completed = key_of("t-r3", "before-loss");
    run_once(&client, &completed).await;

    // r3's only node goes away: group 3 elects a leader in r1 or r2 and logs a failover.
    cluster.kill9(3);
    assert!(
        poll(SETTLE, || async {
            group(&cluster, 1, 3)
                .await
                .is_some_and(|g| g.leader_id != 0 && g.failover.is_some_and(|f| f.active))
        })
        .await,
        "no failover: {:?}",
        group(&cluster, 1, 3).await
    );
    let epoch = group(&cluster, 1, 3)
        .await
        .and_then(|g| g.failover)
        .map(|f| f.epoch);

    let high = key_of("t-r3", "high-during-failover");
    let refused = client
        .claim(claim(&high, BODY).risk(Risk::High))
        .await
        .expect_err("HIGH must be refused");
    assert_eq!(reason(&refused), "REGION_FAILOVER", "{refused:?}");
    // Nothing was created: the key is still free.
    let lookup = client.get(&high).await;
    assert!(
        matches!(&lookup, Err(e) if reason(e) == "NOT_FOUND"),
        "{lookup:?}"
    );
    // NORMAL risk continues through the new leader; replays continue.
    run_once(&client, &key_of("t-r3", "normal-during-failover")).await;
    let replay = client.claim(claim(&completed, BODY)).await.expect("replay");
    assert_eq!(replay.outcome.kind(), ClaimKind::Completed);
    assert!(metric(&cluster, 1, "idem_group_failover{group=\"3\"}") >= 0.0);

    // r3 returns: leadership goes home, the failover ends with a new epoch.
    cluster.restart(3).await;
    assert!(
        poll(SETTLE, || async {
            group(&cluster, 1, 3)
                .await
                .is_some_and(|g| g.leader_id == 3 && g.failover.is_some_and(|f| !f.active))
        })
        .await,
        "leadership did not return home: {:?}",
        group(&cluster, 1, 3).await
    );
    let after = group(&cluster, 1, 3)
        .await
        .and_then(|g| g.failover)
        .map(|f| f.epoch);
    assert!(after > epoch, "epoch {epoch:?} -> {after:?}");
    run_once(&client, &key_of("t-r3", "high-after-return")).await;
    let high_again = client
        .claim(claim(&high, BODY).risk(Risk::High))
        .await
        .expect("HIGH claim after the failover");
    assert_eq!(high_again.outcome.kind(), ClaimKind::Acquired);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_can_confirm_a_new_home() {
    let mut cluster = regional_cluster().await;
    cluster.kill9(3);
    assert!(
        poll(SETTLE, || async {
            group(&cluster, 1, 3)
                .await
                .is_some_and(|g| g.failover.is_some_and(|f| f.active))
        })
        .await
    );
    let not_region_group = admin_of(&cluster, 1)
        .await
        .confirm_failover(pb::ConfirmFailoverRequest {
            group: 1,
            new_home: "r2".into(),
            reason: "test".into(),
            admin: "tests".into(),
        })
        .await
        .expect_err("group 1 is not in failover");
    assert_eq!(
        idem_proto::status::reason_of(&not_region_group).as_deref(),
        Some("NOT_IN_FAILOVER")
    );
    // The operator confirms the region the group's leader now lives in.
    let leader_region = group(&cluster, 2, 3).await.expect("group 3").leader_region;
    assert!(["r1", "r2"].contains(&leader_region.as_str()));
    let confirmed = admin_of(&cluster, 2)
        .await
        .confirm_failover(pb::ConfirmFailoverRequest {
            group: 3,
            new_home: leader_region.clone(),
            reason: "r3 lost for good".into(),
            admin: "tests".into(),
        })
        .await
        .expect("confirm")
        .into_inner();
    assert_eq!(confirmed.home, leader_region);
    assert!(!confirmed.failover.expect("failover state").active);
    // HIGH claims run again, and the group's leader stays in its new home.
    let client = cluster.client_of(1);
    let high = key_of("t-r3", "high-after-confirm");
    let claim = client
        .claim(claim(&high, BODY).risk(Risk::High))
        .await
        .expect("HIGH claim after confirm");
    assert_eq!(claim.outcome.kind(), ClaimKind::Acquired);
    assert!(
        poll(SETTLE, || async {
            group(&cluster, 2, 3)
                .await
                .is_some_and(|g| g.leader_home && g.leader_region == leader_region)
        })
        .await,
        "{:?}",
        group(&cluster, 2, 3).await
    );
}
