//! The limits as a client meets them: through the Idempotency service over the in-memory
//! backend, with exact counts.

use std::sync::Arc;

use idem_proto::v1 as pb;
use idem_proto::v1::idempotency_server::Idempotency;
use idem_proto::{reason, status};
use tonic::{Code, Request, Status};

use super::testing::{claim_req, complete_req, context};
use super::{ApiContext, IdempotencyService};
use crate::backend::memory::MemoryBackend;
use crate::limits::{LimitsConfig, Rate, TenantLimits, TenantOverride};
use crate::policy::Policies;

fn service(limits: LimitsConfig) -> (IdempotencyService, Arc<ApiContext>) {
    let mut ctx = (*context(MemoryBackend::new(), Policies::default())).clone();
    ctx.tenant_limits = Arc::new(TenantLimits::new(limits, Arc::clone(&ctx.metrics)));
    let ctx = Arc::new(ctx);
    (IdempotencyService::new(Arc::clone(&ctx)), ctx)
}

async fn claim(api: &IdempotencyService, key: &str) -> Result<pb::ClaimResponse, Status> {
    api.claim(Request::new(claim_req(key, "w-1", 1)))
        .await
        .map(tonic::Response::into_inner)
}

async fn complete(api: &IdempotencyService, key: &str, fence: u64) -> Result<(), Status> {
    api.complete(Request::new(complete_req(key, fence)))
        .await
        .map(drop)
}

fn refusals(ctx: &ApiContext, why: &str, kind: &str) -> u64 {
    ctx.metrics
        .limit_refusals
        .with_label_values(&[why, kind])
        .get()
}

fn claims(rate: u64, burst: u64) -> LimitsConfig {
    LimitsConfig {
        claims: Rate { rate, burst },
        ..LimitsConfig::default()
    }
}

#[tokio::test]
async fn a_burst_of_n_plus_one_claims_gets_exactly_one_rate_limited() {
    let (api, ctx) = service(claims(1, 5));
    let mut refused = Vec::new();
    for i in 0..6 {
        if let Err(status) = claim(&api, &format!("order-{i}")).await {
            refused.push(status);
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    let status = &refused[0];
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status::reason_of(status).as_deref(),
        Some(reason::RATE_LIMITED)
    );
    let wait = status::retry_after(status).expect("retry-after-ms");
    assert!(wait.as_millis() > 0 && wait.as_millis() <= 1000, "{wait:?}");
    assert_eq!(refusals(&ctx, reason::RATE_LIMITED, "claim"), 1);
    // The refused claim created nothing.
    let scope = idem_core::Scope::new("acme", "prod", "user-42", "POST /v1/charges").unwrap();
    let key = idem_core::IdempotencyKey::new("order-5").unwrap();
    let target = idem_core::RecordKey::new(scope, key);
    assert!(ctx.backend.record(&target).unwrap().is_none());
}

#[tokio::test]
async fn a_key_is_not_a_quota_bypass_retries_count_too() {
    let (api, ctx) = service(claims(1, 3));
    for _ in 0..3 {
        claim(&api, "order-1").await.unwrap();
    }
    let status = claim(&api, "order-1").await.unwrap_err();
    assert_eq!(
        status::reason_of(&status).as_deref(),
        Some(reason::RATE_LIMITED)
    );
    // Other tenants keep their own budget.
    let mut other = claim_req("order-1", "w-1", 1);
    other.scope.as_mut().unwrap().tenant = "globex".into();
    api.claim(Request::new(other)).await.unwrap();
    assert_eq!(refusals(&ctx, reason::RATE_LIMITED, "claim"), 1);
}

#[tokio::test]
async fn replays_cost_a_tenth_of_a_claim() {
    let (api, ctx) = service(claims(1, 2));
    let fence = claim(&api, "order-1").await.unwrap().fence;
    complete(&api, "order-1", fence).await.unwrap();
    // One token left: ten replays, then a refusal.
    for _ in 0..10 {
        let replay = claim(&api, "order-1").await.unwrap();
        assert_eq!(replay.outcome(), pb::ClaimOutcome::Completed);
    }
    let status = claim(&api, "order-1").await.unwrap_err();
    assert_eq!(
        status::reason_of(&status).as_deref(),
        Some(reason::RATE_LIMITED)
    );
    assert_eq!(refusals(&ctx, reason::RATE_LIMITED, "replay"), 1);
}

#[tokio::test]
async fn owner_mutations_have_their_own_bucket() {
    let limits = LimitsConfig {
        mutations: Rate { rate: 1, burst: 1 },
        ..LimitsConfig::default()
    };
    let (api, ctx) = service(limits);
    let first = claim(&api, "order-1").await.unwrap().fence;
    let second = claim(&api, "order-2").await.unwrap().fence;
    complete(&api, "order-1", first).await.unwrap();
    let status = complete(&api, "order-2", second).await.unwrap_err();
    assert_eq!(
        status::reason_of(&status).as_deref(),
        Some(reason::RATE_LIMITED)
    );
    assert_eq!(refusals(&ctx, reason::RATE_LIMITED, "mutation"), 1);
    // Claims are not limited by the mutation bucket.
    claim(&api, "order-3").await.unwrap();
}

#[tokio::test]
async fn the_quota_caps_unfinished_records_exactly_and_spares_existing_ones() {
    let mut limits = LimitsConfig {
        max_active_records: 3,
        ..LimitsConfig::default()
    };
    limits.tenants.insert(
        "globex".into(),
        TenantOverride {
            max_active_records: Some(1),
            ..TenantOverride::default()
        },
    );
    let (api, ctx) = service(limits);
    let mut fences = Vec::new();
    for i in 0..3 {
        fences.push(claim(&api, &format!("order-{i}")).await.unwrap().fence);
    }
    let status = claim(&api, "order-3").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status::reason_of(&status).as_deref(),
        Some(reason::QUOTA_EXCEEDED)
    );
    assert_eq!(refusals(&ctx, reason::QUOTA_EXCEEDED, "claim"), 1);
    // Existing records are unaffected: a retry of one is answered, its owner completes it.
    claim(&api, "order-0").await.unwrap();
    complete(&api, "order-0", fences[0]).await.unwrap();
    // One record finished: room for exactly one more.
    claim(&api, "order-3").await.unwrap();
    let status = claim(&api, "order-4").await.unwrap_err();
    assert_eq!(
        status::reason_of(&status).as_deref(),
        Some(reason::QUOTA_EXCEEDED)
    );
    assert_eq!(refusals(&ctx, reason::QUOTA_EXCEEDED, "claim"), 2);
    // The override gives globex a cap of its own.
    let mut globex = claim_req("order-0", "w-1", 1);
    globex.scope.as_mut().unwrap().tenant = "globex".into();
    api.claim(Request::new(globex.clone())).await.unwrap();
    globex.key = "order-1".into();
    let status = api.claim(Request::new(globex)).await.unwrap_err();
    assert_eq!(
        status::reason_of(&status).as_deref(),
        Some(reason::QUOTA_EXCEEDED)
    );
}
