//! The layer against one real `idemd`: first call, replay, concurrent duplicates (exactly one
//! handler run, with 409 or held with `Wait`), mismatch, bad keys, panics and 5xx (a retry
//! takes over, told the previous stage), terminal failures replayed, tenants kept apart,
//! and an unreachable store (503, the handler never runs).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use idem_core::Stage;
use idem_tests::{Node, NodeOptions};
use support::{app, client, policy, waiting, Behavior, Call, Script, BODY};

fn node() -> Node {
    Node::start(NodeOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_call_then_replay_with_stored_status_and_headers() {
    let node = node();
    let script = Arc::new(Script::default());
    let app = app(client(vec![node.endpoint()]), policy(), script.clone());

    let first = Call::charge("replay-1", BODY).send(&app).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert!(!first.replayed());
    let location = first.header("location").unwrap().to_owned();
    let id = first.json["id"].as_str().unwrap().to_owned();

    // The same request, spelled differently: the stored answer, re-rendered.
    let again = Call::charge("replay-1", r#"{"currency":"EUR","amount":1000.0}"#)
        .send(&app)
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.header("location"), Some(location.as_str()));
    assert_eq!(again.json["id"], id.as_str());
    assert_eq!(again.json["amount"], "1000");
    assert_eq!(again.json["operation_id"], first.json["operation_id"]);
    assert_eq!(script.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_run_the_handler_once() {
    let node = node();
    let script = Arc::new(Script::default());
    script.push(&[Behavior::Sleep(Duration::from_millis(600))]);
    let app = app(client(vec![node.endpoint()]), policy(), script.clone());

    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let app = app.clone();
        tasks.spawn(async move { Call::charge("dup-1", BODY).send(&app).await });
    }
    let answers = tasks.join_all().await;
    let created: Vec<_> = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .collect();
    let conflicts: Vec<_> = answers
        .iter()
        .filter(|a| a.status == StatusCode::CONFLICT)
        .collect();
    assert_eq!(
        created.iter().filter(|a| !a.replayed()).count(),
        1,
        "{answers:?}"
    );
    assert_eq!(created.len() + conflicts.len(), 12, "{answers:?}");
    for conflict in conflicts {
        assert_eq!(conflict.problem_type(), Some("urn:idem:problem:in-flight"));
        assert_eq!(conflict.json["reason"], "IN_PROGRESS");
        let retry_after: u64 = conflict.header("retry-after").unwrap().parse().unwrap();
        assert!(retry_after >= 1);
        assert_eq!(
            conflict.header("content-type"),
            Some("application/problem+json")
        );
    }
    assert_eq!(script.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn held_duplicates_get_the_first_answer() {
    let node = node();
    let script = Arc::new(Script::default());
    script.push(&[Behavior::Sleep(Duration::from_millis(800))]);
    let app = app(
        client(vec![node.endpoint()]),
        waiting(Duration::from_secs(10)),
        script.clone(),
    );

    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let app = app.clone();
        tasks.spawn(async move { Call::charge("wait-1", BODY).send(&app).await });
    }
    let answers = tasks.join_all().await;
    assert!(
        answers.iter().all(|a| a.status == StatusCode::CREATED),
        "{answers:?}"
    );
    assert_eq!(answers.iter().filter(|a| !a.replayed()).count(), 1);
    let ids: std::collections::HashSet<_> = answers.iter().map(|a| a.json["id"].clone()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(script.runs(), 1);

    // A budget shorter than the handler: 409 once it is spent.
    script.push(&[Behavior::Sleep(Duration::from_millis(1500))]);
    let short = support::app(
        client(vec![node.endpoint()]),
        waiting(Duration::from_millis(300)),
        script.clone(),
    );
    let slow = {
        let app = short.clone();
        tokio::spawn(async move { Call::charge("wait-2", BODY).send(&app).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let held = Call::charge("wait-2", BODY).send(&short).await;
    assert_eq!(held.status, StatusCode::CONFLICT, "{held:?}");
    assert_eq!(slow.await.unwrap().status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn key_reuse_with_another_request_is_422_and_keys_are_checked() {
    let node = node();
    let script = Arc::new(Script::default());
    let app = app(client(vec![node.endpoint()]), policy(), script.clone());

    assert_eq!(
        Call::charge("reuse-1", BODY).send(&app).await.status,
        StatusCode::CREATED
    );
    let other = Call::charge("reuse-1", r#"{"amount": 2000, "currency": "EUR"}"#)
        .send(&app)
        .await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        other.problem_type(),
        Some("urn:idem:problem:fingerprint-mismatch")
    );
    assert_eq!(other.json["reason"], "FINGERPRINT_MISMATCH");
    // Another path parameter is another request too.
    let mut other_account = Call::charge("reuse-1", BODY);
    other_account.uri = "/v1/accounts/a2/charges".into();
    assert_eq!(
        other_account.send(&app).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );

    let missing = Call::charge("x", BODY)
        .without("idempotency-key")
        .send(&app)
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.problem_type(), Some("urn:idem:problem:missing-key"));
    for bad in ["unquoted", "\"a b\"", "\"k\";A=1", "\"k1\", \"k2\""] {
        let answer = Call::charge("x", BODY)
            .without("idempotency-key")
            .header("idempotency-key", bad)
            .send(&app)
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(answer.problem_type(), Some("urn:idem:problem:invalid-key"));
    }
    let twice = Call::charge("k1", BODY)
        .header("idempotency-key", "\"k2\"")
        .send(&app)
        .await;
    assert_eq!(twice.status, StatusCode::BAD_REQUEST);
    // Unprotected routes pass through without a key.
    let health = Call {
        method: http::Method::GET,
        uri: "/health".into(),
        headers: vec![],
        body: String::new(),
    };
    assert_eq!(health.send(&app).await.status, StatusCode::OK);
    assert_eq!(script.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn panics_and_5xx_let_the_retry_take_over() {
    let node = node();
    let script = Arc::new(Script::default());
    script.push(&[
        Behavior::Panic,
        Behavior::Status(503),
        Behavior::CallingThenPanic,
    ]);
    let app = app(client(vec![node.endpoint()]), policy(), script.clone());

    let panicked = Call::charge("crash-1", BODY).send(&app).await;
    assert_eq!(panicked.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        panicked.problem_type(),
        Some("urn:idem:problem:handler-panicked")
    );
    let unavailable = Call::charge("crash-1", BODY).send(&app).await;
    assert_eq!(unavailable.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!unavailable.replayed());
    let called = Call::charge("crash-1", BODY).send(&app).await;
    assert_eq!(called.status, StatusCode::INTERNAL_SERVER_ERROR);
    let done = Call::charge("crash-1", BODY).send(&app).await;
    assert_eq!(done.status, StatusCode::CREATED, "{done:?}");
    assert!(!done.replayed());
    assert_eq!(script.runs(), 4);
    // Released twice (nothing irreversible), then a failure after CALLING: the last run
    // is told the previous attempt may have called the downstream.
    let stages = script.previous_stages();
    assert_eq!(stages[0], None);
    assert_eq!(stages[3], Some(Stage::Calling), "{stages:?}");
    let replay = Call::charge("crash-1", BODY).send(&app).await;
    assert!(replay.replayed());
    assert_eq!(script.runs(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn terminal_failures_are_replayed_and_tenants_are_apart() {
    let node = node();
    let script = Arc::new(Script::default());
    script.push(&[Behavior::Status(402)]);
    let app = app(client(vec![node.endpoint()]), policy(), script.clone());

    let declined = Call::charge("declined-1", BODY).send(&app).await;
    assert_eq!(declined.status, StatusCode::PAYMENT_REQUIRED);
    let replay = Call::charge("declined-1", BODY).send(&app).await;
    assert_eq!(replay.status, StatusCode::PAYMENT_REQUIRED);
    assert!(replay.replayed());
    assert_eq!(
        replay.problem_type(),
        Some("urn:idem:problem:replayed-failure")
    );
    assert!(replay.json["detail"]
        .as_str()
        .unwrap()
        .contains("card_declined"));
    assert_eq!(script.runs(), 1);

    // The same key from another tenant is another record.
    let other = Call::charge("declined-1", BODY)
        .header("x-tenant", "globex")
        .send(&app)
        .await;
    assert_eq!(other.status, StatusCode::CREATED);
    assert!(!other.replayed());
    assert_eq!(script.runs(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_store_fails_closed() {
    let dead = idem_tests::free_port().to_string();
    let script = Arc::new(Script::default());
    let app = app(client(vec![dead]), policy(), script.clone());
    let answer = Call::charge("closed-1", BODY).send(&app).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
    assert_eq!(
        answer.problem_type(),
        Some("urn:idem:problem:store-unavailable")
    );
    assert!(answer.header("retry-after").is_some());
    assert_eq!(script.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_handlers_keep_their_lease() {
    let node = node();
    let script = Arc::new(Script::default());
    // A 600 ms lease and a 2 s handler: without renewal a duplicate would take over.
    script.push(&[Behavior::Sleep(Duration::from_secs(2))]);
    let short_lease = idem_http::RoutePolicy {
        lease: Duration::from_millis(600),
        ..policy()
    };
    let app = app(client(vec![node.endpoint()]), short_lease, script.clone());
    let slow = {
        let app = app.clone();
        tokio::spawn(async move { Call::charge("lease-1", BODY).send(&app).await })
    };
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let duplicate = Call::charge("lease-1", BODY).send(&app).await;
        assert_eq!(duplicate.status, StatusCode::CONFLICT, "{duplicate:?}");
    }
    assert_eq!(slow.await.unwrap().status, StatusCode::CREATED);
    assert_eq!(script.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_goes_away_does_not_cancel_the_handler() {
    let node = node();
    let script = Arc::new(Script::default());
    script.push(&[Behavior::Sleep(Duration::from_millis(500))]);
    let app = app(client(vec![node.endpoint()]), policy(), script.clone());
    // The caller gives up after 100 ms: its future is dropped mid-handler.
    let call = Call::charge("gone-1", BODY);
    let gave_up = tokio::time::timeout(Duration::from_millis(100), call.send(&app)).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The handler finished and its result was stored.
    let retry = Call::charge("gone-1", BODY).send(&app).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{retry:?}");
    assert!(retry.replayed());
    assert_eq!(script.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handler_past_its_budget_is_504_and_retried() {
    let node = node();
    let script = Arc::new(Script::default());
    script.push(&[Behavior::Sleep(Duration::from_secs(2))]);
    let budget = idem_http::RoutePolicy {
        handler_timeout: Some(Duration::from_millis(200)),
        ..policy()
    };
    let app = app(client(vec![node.endpoint()]), budget, script.clone());
    let slow = Call::charge("slow-1", BODY).send(&app).await;
    assert_eq!(slow.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        slow.problem_type(),
        Some("urn:idem:problem:handler-timeout")
    );
    let retry = Call::charge("slow-1", BODY).send(&app).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{retry:?}");
    assert!(!retry.replayed());
    assert_eq!(script.runs(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unknown_high_risk_outcome_awaits_reconciliation() {
    use idem_client::ClaimRequest;
    use idem_core::fingerprint::CanonicalRequest;
    use idem_core::{IdempotencyKey, RecordKey, Risk, Scope};

    let node = node();
    let client = client(vec![node.endpoint()]);
    // A worker of the same service claimed this request, recorded CALLING and died: its
    // 300 ms lease expires with the outcome unknown.
    let scope = Scope::new(
        "acme",
        "test",
        "user-42",
        format!("POST {}", support::ROUTE),
    )
    .unwrap();
    let target = RecordKey::new(scope, IdempotencyKey::new("unknown-1").unwrap());
    let request = CanonicalRequest::new("POST", support::ROUTE)
        .unwrap()
        .with_path_param("account", "a1")
        .with_json_body(BODY);
    let claim = ClaimRequest::for_request(target.clone(), &request, 1)
        .unwrap()
        .risk(Risk::High)
        .lease(Duration::from_millis(300));
    let fence = client.claim(claim).await.unwrap().fence().unwrap();
    client.record_calling(&target, fence, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;

    let script = Arc::new(Script::default());
    let app = app(client.clone(), support::high_risk(), script.clone());
    let answer = Call::charge("unknown-1", BODY).send(&app).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert_eq!(
        answer.problem_type(),
        Some("urn:idem:problem:needs-reconciliation")
    );
    let unavailable = idem_http::RoutePolicy {
        reconciliation_status: StatusCode::SERVICE_UNAVAILABLE,
        ..support::high_risk()
    };
    let app = support::app(client, unavailable, script.clone());
    let answer = Call::charge("unknown-1", BODY).send(&app).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.header("retry-after").is_some());
    assert_eq!(script.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn works_in_a_plain_tower_stack() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use idem_http::{Body, Config, IdempotencyLayer, Ledger, Principal};
    use tower::{ServiceBuilder, ServiceExt};

    let node = node();
    let config = Config::new("test")
        .route(http::Method::POST, support::ROUTE, policy())
        .unwrap();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    // No axum router: the layer matches the template itself.
    let service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new(client(vec![node.endpoint()]), config))
        .service_fn(move |request: http::Request<Body>| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let ledger = request.extensions().get::<Ledger>().cloned();
                let body = ledger.map(|l| l.downstream_key()).unwrap_or_default();
                let mut response = http::Response::new(Body::from(body));
                *response.status_mut() = StatusCode::CREATED;
                Ok::<_, std::convert::Infallible>(response)
            }
        });
    let send = |path: &'static str| {
        let service = service.clone();
        async move {
            let request = http::Request::post(path)
                .header("idempotency-key", "\"plain-1\"")
                .extension(Principal {
                    tenant: "acme".into(),
                    actor: "user-1".into(),
                })
                .body(Full::new(Bytes::from_static(BODY.as_bytes())))
                .unwrap();
            let response = service.oneshot(request).await.unwrap();
            let replayed = response.headers().contains_key("idempotent-replayed");
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, replayed, body)
        }
    };
    let (status, replayed, operation) = send("/v1/accounts/a1/charges").await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false));
    assert_eq!(operation.len(), 36, "the handler saw its ledger");
    let (status, replayed, _) = send("/v1/accounts/a1/charges").await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true));
    let (status, _, _) = send("/v1/accounts/a2/charges").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}
