//! The docs/http.md walkthrough as a test: the payment service and its provider on loopback
//! ports over HTTP, a real `idemd`: first call, retry (replay), concurrent duplicates held
//! and answered once, a changed body (422), a provider timeout and its takeover (the
//! provider is asked first, so it charges once), replay after an idem node restart.

use crate::common;

use std::sync::Arc;

use common::{listen, post};
use http::StatusCode;
use idem_client::{Client, ClientOptions};
use idem_tests::{Node, NodeOptions};
use payments::provider::{Mode, Provider};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn walkthrough() {
    let mut node = Node::start(NodeOptions::default());
    let provider = Arc::new(Provider::default());
    let provider_addr = listen(provider.clone().router()).await;
    let idem = Client::connect(vec![node.endpoint()], ClientOptions::default()).unwrap();
    let app = payments::app(idem, &format!("http://{provider_addr}"), "test");
    let addr = listen(app).await;
    let body = r#"{"amount": 1000, "currency": "EUR"}"#;

    // First call, then a retry: one charge, the same answer.
    let first = post(addr, "order-1", body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.json);
    assert!(!first.replayed);
    let retry = post(addr, "order-1", r#"{"currency":"EUR","amount":1000}"#).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed);
    assert_eq!(retry.json, first.json);
    assert_eq!(provider.charges_made(), 1);

    // Concurrent duplicates: held, answered once.
    let tasks: Vec<_> = (0..5)
        .map(|_| tokio::spawn(post(addr, "order-2", body)))
        .collect();
    let mut fresh = 0;
    for task in tasks {
        let reply = task.await.unwrap();
        assert_eq!(reply.status, StatusCode::CREATED);
        fresh += usize::from(!reply.replayed);
    }
    assert_eq!(fresh, 1);
    assert_eq!(provider.charges_made(), 2);

    // The same key with another body.
    let changed = post(addr, "order-1", r#"{"amount": 2000, "currency": "EUR"}"#).await;
    assert_eq!(changed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        changed.json["type"],
        "urn:idem:problem:fingerprint-mismatch"
    );

    // The provider charges but answers too late: 504; the retry asks the provider first
    // and finds the charge instead of charging again.
    provider.push(&[Mode::Timeout]);
    let timed_out = post(addr, "order-3", body).await;
    assert_eq!(timed_out.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(provider.charges_made(), 3);
    let taken_over = post(addr, "order-3", body).await;
    assert_eq!(
        taken_over.status,
        StatusCode::CREATED,
        "{:?}",
        taken_over.json
    );
    assert!(!taken_over.replayed);
    assert_eq!(provider.charges_made(), 3);

    // The idem node restarts: the records survive, retries still replay.
    node.terminate();
    node.restart();
    let after = post(addr, "order-1", body).await;
    assert_eq!(after.status, StatusCode::CREATED);
    assert!(after.replayed);
    assert_eq!(after.json["id"], first.json["id"]);
    assert_eq!(provider.charges_made(), 3);
}
