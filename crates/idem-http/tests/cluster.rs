//! The layer against a real 3-node cluster (regions `r1`, `r2`, `r3`, one node each):
//!
//! - `kill -9` of the leader while a handler runs: the handler's result is still stored
//!   (through the new leader), its retry is a replay, and a request sent during the
//!   election either runs once with a record or is refused with 503 (never run without one);
//! - a region failover: a HIGH-risk route of a tenant homed in the lost region answers 503
//!   `region-failover` with `Retry-After`, and the handler never runs.
//!
//! Clusters run one at a time (see `idem_tests::Cluster`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use idem_proto::v1 as pb;
use idem_tests::{poll, Cluster, ClusterOptions};
use support::{app, client, high_risk, policy, Behavior, Call, Script, BODY};

/// Long enough for an election, a failover entry and a transfer back home.
const SETTLE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill_during_a_handler_keeps_exactly_one_run() {
    let mut cluster = Cluster::start(3, ClusterOptions::default()).await;
    let script = Arc::new(Script::default());
    script.push(&[Behavior::Sleep(Duration::from_millis(1500))]);
    let app = app(cluster.client(), policy(), script.clone());

    let running = {
        let app = app.clone();
        tokio::spawn(async move { Call::charge("failover-1", BODY).send(&app).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let leader = cluster.leader().await;
    cluster.kill9(leader);

    // A new request during the election: a record and one run, or a 503 and none.
    let during = Call::charge("failover-2", BODY).send(&app).await;
    let runs_after_during = script.runs();
    match during.status {
        StatusCode::CREATED => assert_eq!(runs_after_during, 2),
        StatusCode::SERVICE_UNAVAILABLE => {
            assert_eq!(runs_after_during, 1, "{during:?}");
            assert!(during.header("retry-after").is_some());
        }
        other => panic!("unexpected {other}: {during:?}"),
    }

    let first = running.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    let replay = Call::charge("failover-1", BODY).send(&app).await;
    assert_eq!(replay.status, StatusCode::CREATED, "{replay:?}");
    assert!(replay.replayed());
    assert_eq!(replay.json["id"], first.json["id"]);

    // The request of the election completes once, then replays.
    let mut settled = None;
    for _ in 0..50 {
        let answer = Call::charge("failover-2", BODY).send(&app).await;
        if answer.status == StatusCode::CREATED {
            settled = Some(answer);
            break;
        }
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(settled.is_some(), "failover-2 never completed");
    assert!(Call::charge("failover-2", BODY).send(&app).await.replayed());
    assert_eq!(script.runs(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn region_failover_refuses_high_risk_routes_without_running_them() {
    let mut cluster = Cluster::start(3, ClusterOptions::default()).await;
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
    cluster
        .admin_rpc("bind", |mut admin| async move {
            let request = pb::BindTenantRequest {
                tenant: "t-r3".into(),
                region: "r3".into(),
            };
            admin.bind_tenant(request).await
        })
        .await;
    assert!(
        poll(SETTLE, || group_state(&cluster, |g| g.leader_id == 3
            && g.leader_home))
        .await,
        "group 3 has no leader at home"
    );

    let script = Arc::new(Script::default());
    let app = app(
        client(vec![cluster.endpoint(1), cluster.endpoint(2)]),
        high_risk(),
        script.clone(),
    );
    let before = Call::charge("home-1", BODY)
        .header("x-tenant", "t-r3")
        .send(&app)
        .await;
    assert_eq!(before.status, StatusCode::CREATED, "{before:?}");

    cluster.kill9(3);
    assert!(
        poll(SETTLE, || group_state(&cluster, |g| {
            g.leader_id != 0 && g.failover.as_ref().is_some_and(|f| f.active)
        }))
        .await,
        "no failover of group 3"
    );
    let refused = Call::charge("home-2", BODY)
        .header("x-tenant", "t-r3")
        .send(&app)
        .await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{refused:?}"
    );
    assert_eq!(
        refused.problem_type(),
        Some("urn:idem:problem:region-failover")
    );
    assert_eq!(refused.json["reason"], "REGION_FAILOVER");
    assert!(refused.header("retry-after").is_some());
    // Replays of terminal records continue; nothing new ran.
    let replay = Call::charge("home-1", BODY)
        .header("x-tenant", "t-r3")
        .send(&app)
        .await;
    assert!(replay.replayed(), "{replay:?}");
    assert_eq!(script.runs(), 1);
}

/// True when node 1 reports group 3 in a state `check` accepts.
async fn group_state(cluster: &Cluster, check: impl Fn(&pb::GroupStatus) -> bool) -> bool {
    let uri = format!("http://{}", cluster.endpoint(1));
    let Ok(mut admin) = pb::admin_client::AdminClient::connect(uri).await else {
        return false;
    };
    let groups = admin
        .list_groups(pb::ListGroupsRequest {})
        .await
        .map(|r| r.into_inner().groups)
        .unwrap_or_default();
    groups.iter().any(|g| g.group == 3 && check(g))
}
