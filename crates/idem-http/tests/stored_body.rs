//! Routes that store the body verbatim (`RoutePolicy::store_body`), against a real 3-node
//! cluster:
//!
//! - a retry gets the first answer's bytes and content type unchanged (the handler's
//!   `text/plain` body, not the renderer's JSON), the stored status, the allow-listed
//!   `Location` and `Idempotent-Replayed: true`, and the handler ran once;
//! - the same after every node restarted (the result is read back from disk);
//! - a body over the route's limit is not stored: its replay is re-rendered, as on a
//!   default route, and so is a record a default route wrote before the route opted in;
//! - the default route next to it still stores no body.
//!
//! Clusters run one at a time (see `idem_tests::Cluster`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use idem_http::RoutePolicy;
use idem_tests::{Cluster, ClusterOptions};
use support::{app, client, policy, Answer, Call, Script, BODY};

/// Retries `call` while the cluster answers 503 (an election after the restart).
async fn settled(call: &Call, app: &axum::Router) -> Answer {
    for _ in 0..100 {
        let answer = call.send(app).await;
        if answer.status != StatusCode::SERVICE_UNAVAILABLE {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the cluster stayed unavailable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stored_bodies_replay_verbatim_across_restarts() {
    let mut cluster = Cluster::start(3, ClusterOptions::default()).await;
    let endpoints = cluster.endpoints();
    let script = Arc::new(Script::default());
    let verbatim = app(
        client(endpoints.clone()),
        RoutePolicy {
            store_body: Some(4096),
            ..policy()
        },
        script.clone(),
    );

    let first = Call::charge("verbatim-1", BODY).send(&verbatim).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert!(!first.replayed());
    let content_type = first.header("content-type").unwrap().to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let check = |replay: &Answer| {
        assert_eq!(replay.status, StatusCode::CREATED, "{replay:?}");
        assert!(replay.replayed(), "{replay:?}");
        assert_eq!(
            replay.body, first.body,
            "the body is replayed byte for byte"
        );
        assert_eq!(replay.header("content-type"), Some(content_type.as_str()));
        assert_eq!(replay.header("location"), first.header("location"));
    };
    check(&Call::charge("verbatim-1", BODY).send(&verbatim).await);
    // Another spelling of the same JSON is the same request: replayed, not re-run.
    let respelled = r#"{"currency":"EUR","amount":1000}"#;
    check(&Call::charge("verbatim-1", respelled).send(&verbatim).await);
    assert_eq!(script.runs(), 1);

    // Over the route's limit: not stored, the replay is rendered from the resource.
    let small = app(
        client(endpoints.clone()),
        RoutePolicy {
            store_body: Some(8),
            ..policy()
        },
        script.clone(),
    );
    let big = Call::charge("verbatim-2", BODY).send(&small).await;
    assert_eq!(big.status, StatusCode::CREATED, "{big:?}");
    let rendered = Call::charge("verbatim-2", BODY).send(&small).await;
    assert!(rendered.replayed(), "{rendered:?}");
    assert_ne!(rendered.body, big.body);
    assert_eq!(rendered.json["id"], "ch_a1_2", "{rendered:?}");
    assert_eq!(rendered.header("content-type"), Some("application/json"));

    // A record a default route wrote (no body, version 0) replays rendered on a route
    // that opted in since.
    let plain = app(client(endpoints.clone()), policy(), script.clone());
    let before = Call::charge("verbatim-3", BODY).send(&plain).await;
    assert_eq!(before.status, StatusCode::CREATED);
    let after = Call::charge("verbatim-3", BODY).send(&verbatim).await;
    assert!(after.replayed(), "{after:?}");
    assert_eq!(after.json["id"], "ch_a1_3", "{after:?}");
    assert_eq!(script.runs(), 3);

    // Every node restarts: the stored body is read back from disk.
    cluster.restart_all().await;
    let verbatim = app(
        client(cluster.endpoints()),
        RoutePolicy {
            store_body: Some(4096),
            ..policy()
        },
        script.clone(),
    );
    check(&settled(&Call::charge("verbatim-1", BODY), &verbatim).await);
    assert_eq!(script.runs(), 3);
}
