//! Authentication and authorization on a real node: who may call what, and that a refused
//! call changes nothing (checked by reading the record back as its owner).

#[path = "permissions/matrix.rs"]
mod matrix;
use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::backup_client::BackupClient;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{reason, status};
use support::{channel, refused, with_token, ACME_WORKER, ADMIN, GLOBEX_WORKER, OPERATOR};
use tonic::Code;

fn scope(tenant: &str) -> pb::Scope {
    requests::scope(tenant)
}

fn claim(tenant: &str, key: &str) -> pb::ClaimRequest {
    requests::claim(
        scope(tenant),
        key,
        &format!("holder-{key}"),
        r#"{"amount":1}"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_reach_only_their_tenants_and_refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::secured_node(dir.path()).await;
    let mut api = IdempotencyClient::new(channel(&node).await);

    // No credential, an unknown token, a malformed header: UNAUTHENTICATED.
    for token in [None, Some("idem_unknown")] {
        let error = api
            .claim(with_token(claim("acme", "k1"), token))
            .await
            .unwrap_err();
        refused(&error, Code::Unauthenticated, reason::UNAUTHENTICATED);
    }

    let owned = api
        .claim(with_token(claim("acme", "k1"), Some(ACME_WORKER)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(owned.outcome(), pb::ClaimOutcome::Acquired);

    // Another tenant's worker: its scope, its fence, the record's operation id.
    let intruder = Some(GLOBEX_WORKER);
    let error = api
        .claim(with_token(claim("acme", "k1"), intruder))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    let complete = pb::CompleteRequest {
        scope: Some(scope("acme")),
        key: "k1".into(),
        fence: owned.fence,
        result: Some(pb::StoredResult {
            status_code: 201,
            fields: HashMap::from([("planted".to_owned(), "yes".to_owned())]),
            ..Default::default()
        }),
    };
    let error = api
        .complete(with_token(complete.clone(), intruder))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    let operation_id = owned.operation_id.clone();
    let by_id = pb::GetOperationRequest {
        operation_id: operation_id.clone(),
    };
    let error = api
        .get_operation(with_token(by_id.clone(), intruder))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    let wait = pb::WaitRequest {
        operation_id,
        timeout_ms: 10,
        ..Default::default()
    };
    let error = api.wait(with_token(wait, intruder)).await.unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    let batch = pb::BatchRequest {
        calls: vec![pb::BatchCall {
            request: Some(pb::batch_call::Request::Complete(complete.clone())),
        }],
    };
    let replies = api
        .batch(with_token(batch, intruder))
        .await
        .unwrap()
        .into_inner()
        .replies;
    let Some(pb::batch_reply::Reply::Error(error)) = &replies[0].reply else {
        panic!("a forbidden call in a batch is refused: {replies:?}");
    };
    refused(
        &status::from_call_error(error.clone()),
        Code::PermissionDenied,
        reason::TENANT_FORBIDDEN,
    );

    // Nothing changed: the owner still sees its own record in progress, unplanted.
    let record = api
        .get_operation(with_token(by_id, Some(ACME_WORKER)))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.fence, owned.fence);
    assert!(record.result.is_none(), "{record:?}");
    api.complete(with_token(complete, Some(ACME_WORKER)))
        .await
        .unwrap();
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_need_their_role_and_operators_their_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::secured_node(dir.path()).await;
    let mut admin = AdminClient::new(channel(&node).await);

    let error = admin
        .status(with_token(pb::StatusRequest {}, Some(ACME_WORKER)))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::ROLE_FORBIDDEN);
    admin
        .status(with_token(pb::StatusRequest {}, Some(OPERATOR)))
        .await
        .unwrap();

    let list = |tenant: &str| pb::ListOperationsRequest {
        tenant: tenant.into(),
        ..Default::default()
    };
    admin
        .list_operations(with_token(list("acme"), Some(OPERATOR)))
        .await
        .unwrap();
    for tenant in ["globex", ""] {
        let error = admin
            .list_operations(with_token(list(tenant), Some(OPERATOR)))
            .await
            .unwrap_err();
        refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    }

    let mode = pb::SetModeRequest {
        mode: pb::Mode::RegionAffinity.into(),
    };
    let error = admin
        .set_mode(with_token(mode, Some(OPERATOR)))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::ROLE_FORBIDDEN);
    let config = admin
        .get_cluster_config(with_token(pb::GetClusterConfigRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        config.mode(),
        pb::Mode::Global,
        "the refused change did nothing"
    );
    admin
        .list_operations(with_token(list(""), Some(ADMIN)))
        .await
        .unwrap();
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_stops_working_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::secured_node(dir.path()).await;
    let mut api = IdempotencyClient::new(channel(&node).await);
    api.claim(with_token(claim("acme", "r1"), Some(ACME_WORKER)))
        .await
        .unwrap();

    // Rewrite the file without the acme worker.
    let path = dir.path().join("credentials.toml");
    let kept: String = std::fs::read_to_string(&path)
        .unwrap()
        .split("\n\n")
        .filter(|entry| !entry.contains("acme-worker"))
        .map(|entry| format!("{entry}\n\n"))
        .collect();
    std::fs::write(&path, kept).unwrap();
    let revoked = std::time::Instant::now();
    loop {
        let result = api
            .claim(with_token(claim("acme", "r2"), Some(ACME_WORKER)))
            .await;
        match result {
            Err(error) if error.code() == Code::Unauthenticated => break,
            _ => assert!(
                revoked.elapsed() < Duration::from_secs(1),
                "token still accepted after a second"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The health service stays open without credentials.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel(&node).await);
    health
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap();
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_need_an_admin_of_every_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::secured_node(dir.path()).await;
    let mut backup = BackupClient::new(channel(&node).await);
    let save = |token| with_token(pb::SaveSnapshotRequest {}, token);

    let error = backup.save_snapshot(save(None)).await.unwrap_err();
    refused(&error, Code::Unauthenticated, reason::UNAUTHENTICATED);
    for token in [ACME_WORKER, OPERATOR] {
        let error = backup.save_snapshot(save(Some(token))).await.unwrap_err();
        refused(&error, Code::PermissionDenied, reason::ROLE_FORBIDDEN);
    }
    let mut stream = backup
        .save_snapshot(save(Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    let mut messages = 0;
    while let Some(message) = stream.message().await.unwrap() {
        assert!(message.part.is_some());
        messages += 1;
    }
    assert!(messages >= 3, "header, bytes and trailer: {messages}");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_managed_by_an_admin_of_every_tenant_only() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::secured_node(dir.path()).await;
    let mut admin = AdminClient::new(channel(&node).await);
    let create = || pb::CreateTokenRequest {
        name: "minted".into(),
        role: pb::TokenRole::Admin.into(),
        tenants: vec!["*".into()],
    };
    let revoke = || pb::RevokeTokenRequest {
        name: "minted".into(),
    };

    for (token, code, expected) in [
        (None, Code::Unauthenticated, reason::UNAUTHENTICATED),
        (
            Some(ACME_WORKER),
            Code::PermissionDenied,
            reason::ROLE_FORBIDDEN,
        ),
        (
            Some(OPERATOR),
            Code::PermissionDenied,
            reason::ROLE_FORBIDDEN,
        ),
    ] {
        let error = admin
            .create_token(with_token(create(), token))
            .await
            .unwrap_err();
        refused(&error, code, expected);
        let error = admin
            .revoke_token(with_token(revoke(), token))
            .await
            .unwrap_err();
        refused(&error, code, expected);
        let error = admin
            .list_tokens(with_token(pb::ListTokensRequest {}, token))
            .await
            .unwrap_err();
        refused(&error, code, expected);
    }
    // Bad input is refused before anything is proposed.
    for bad in [
        pb::CreateTokenRequest {
            name: "a b".into(),
            ..create()
        },
        pb::CreateTokenRequest {
            role: 0,
            ..create()
        },
        pb::CreateTokenRequest {
            tenants: Vec::new(),
            ..create()
        },
        pb::CreateTokenRequest {
            tenants: vec!["*".into(), "acme".into()],
            ..create()
        },
    ] {
        let error = admin
            .create_token(with_token(bad, Some(ADMIN)))
            .await
            .unwrap_err();
        refused(&error, Code::InvalidArgument, reason::INVALID_ARGUMENT);
    }
    // Nothing was created by the refused calls.
    let listed = admin
        .list_tokens(with_token(pb::ListTokensRequest {}, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.tokens.is_empty(), "{listed:?}");
    let minted = admin
        .create_token(with_token(create(), Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    admin
        .status(with_token(pb::StatusRequest {}, Some(&minted.token)))
        .await
        .unwrap();
    admin
        .revoke_token(with_token(revoke(), Some(ADMIN)))
        .await
        .unwrap();
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_keys_and_tenants_need_an_operator_of_their_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::secured_node(dir.path()).await;
    let mut api = IdempotencyClient::new(channel(&node).await);
    for _ in 0..3 {
        api.claim(with_token(claim("acme", "hot-key-1"), Some(ACME_WORKER)))
            .await
            .unwrap();
    }
    let mut admin = AdminClient::new(channel(&node).await);
    let keys = |tenant: &str| pb::TopKeysRequest {
        tenant: tenant.into(),
        limit: 5,
    };
    let tenants = || pb::TopTenantsRequest { limit: 5 };

    let error = admin
        .top_keys(with_token(keys("acme"), Some(ACME_WORKER)))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::ROLE_FORBIDDEN);
    let top = admin
        .top_keys(with_token(keys("acme"), Some(OPERATOR)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(top.keys.len(), 1, "{top:?}");
    assert_eq!(top.keys[0].claims.round(), 3.0, "{top:?}");
    assert!(
        !format!("{top:?}").contains("hot-key-1"),
        "never the raw key"
    );
    for tenant in ["globex", ""] {
        let error = admin
            .top_keys(with_token(keys(tenant), Some(OPERATOR)))
            .await
            .unwrap_err();
        refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    }
    let error = admin
        .top_tenants(with_token(tenants(), Some(OPERATOR)))
        .await
        .unwrap_err();
    refused(&error, Code::PermissionDenied, reason::TENANT_FORBIDDEN);
    let error = admin
        .top_tenants(with_token(
            pb::TopTenantsRequest { limit: 101 },
            Some(ADMIN),
        ))
        .await
        .unwrap_err();
    refused(&error, Code::InvalidArgument, reason::INVALID_ARGUMENT);
    let busiest = admin
        .top_tenants(with_token(tenants(), Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(busiest.tenants[0].tenant, "acme");
    assert_eq!(
        busiest.tenants[0].in_flight.round(),
        0.0,
        "the holder re-sent"
    );
    admin
        .top_keys(with_token(keys(""), Some(ADMIN)))
        .await
        .unwrap();
    node.shutdown().await.unwrap();
}
