//! Fixtures of the service tests: a service context over the in-memory backend and the
//! requests the tests send.

use std::sync::Arc;

use idem_proto::testing::requests;
use idem_proto::v1 as pb;
use tokio_util::sync::CancellationToken;

use crate::api::decode::BodyLimits;
use crate::api::ApiContext;
use crate::backend::memory::MemoryBackend;
use crate::limits::{LimitsConfig, TenantLimits};
use crate::metrics::Metrics;
use crate::policy::Policies;
use crate::stats::StatsCache;

/// A service context over `backend` with default policies and small body limits.
pub(crate) fn context(backend: Arc<MemoryBackend>, policies: Policies) -> Arc<ApiContext> {
    Arc::new(ApiContext {
        backend,
        policies: Arc::new(policies),
        limits: BodyLimits {
            max_body_bytes: 1024,
            max_canonical_bytes: 64 * 1024,
        },
        metrics: Arc::new(Metrics::new()),
        shutdown: CancellationToken::new(),
        stats: Arc::new(StatsCache::default()),
        region: "local".into(),
        zone: "local-a".into(),
        tenant_limits: Arc::new(TenantLimits::new(
            LimitsConfig::default(),
            Arc::new(Metrics::new()),
        )),
        auth: crate::auth::AuthMode::Off,
        key_warnings: true,
        hot_keys: Arc::default(),
    })
}

/// The scope every service test claims in.
pub(crate) fn scope() -> pb::Scope {
    requests::scope("acme")
}

/// A `jcs-sha256/v1` fingerprint whose digest is 32 times `byte`.
pub(crate) fn fingerprint(byte: u8) -> pb::Fingerprint {
    requests::fingerprint(byte)
}

/// A claim of `key` in [`scope`] by `holder`, fingerprinted with [`fingerprint`]`(byte)`.
pub(crate) fn claim_req(key: &str, holder: &str, byte: u8) -> pb::ClaimRequest {
    requests::fingerprinted_claim(scope(), key, holder, byte)
}

/// A complete of `key` in [`scope`] at `fence` with a small charge result.
pub(crate) fn complete_req(key: &str, fence: u64) -> pb::CompleteRequest {
    requests::complete(scope(), key, fence)
}
