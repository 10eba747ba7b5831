//! A resource deleted after its operation completed is replayed as "done" and never
//! recreated: a charge is created, then deleted; a retry of the creating request with its
//! key is answered with the stored result (the same charge id, marked replayed), the
//! provider is not called again and the charge stays deleted (docs/semantics.md, "A
//! resource deleted after the operation completed").

use crate::common;

use common::{post, send, setup, Setup};
use http::{Method, StatusCode};

const BODY: &str = r#"{"amount": 1000, "currency": "EUR"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_charge_is_replayed_as_done_and_never_recreated() {
    let Setup {
        node: _node,
        provider,
        addr,
        ..
    } = setup().await;

    let created = post(addr, "order-deleted", BODY).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.json);
    let id = created.json["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/charges/{id}");
    let deleted = send(addr, Method::DELETE, &path, None, "").await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = send(addr, Method::GET, &path, None, "").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);

    // The retry of the creating request: "done", the same charge, nothing run again.
    let retry = post(addr, "order-deleted", BODY).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{:?}", retry.json);
    assert!(retry.replayed, "answered from the stored result");
    assert_eq!(retry.json["id"], id.as_str());
    assert_eq!(retry.json["amount"], 1000);
    assert_eq!(
        provider.charges_made(),
        1,
        "the provider was not called again"
    );
    let still_gone = send(addr, Method::GET, &path, None, "").await;
    assert_eq!(still_gone.status, StatusCode::NOT_FOUND, "never recreated");

    // Wanting the charge again is a new intent: a new key, a new charge.
    let again = post(addr, "order-deleted-2", BODY).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert!(!again.replayed);
    assert_ne!(again.json["id"], id.as_str());
    assert_eq!(provider.charges_made(), 2);
}
