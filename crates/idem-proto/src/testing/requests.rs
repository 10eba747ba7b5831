//! The requests tests send most: a scope, a claim (fingerprinted by the server from a
//! canonical request, or carrying a made-up digest), a complete. One spelling for the
//! service tests, the in-process node tests and the permission tests.

use std::collections::HashMap;

use crate::v1 as pb;

/// The endpoint every fixture claims.
pub const ENDPOINT: &str = "POST /v1/charges";

/// A scope of `tenant` on [`ENDPOINT`].
pub fn scope(tenant: &str) -> pb::Scope {
    pb::Scope {
        tenant: tenant.into(),
        environment: "prod".into(),
        actor: "user-42".into(),
        endpoint: ENDPOINT.into(),
    }
}

/// A claim of `key` by `holder` whose fingerprint the server computes from a `POST
/// /v1/charges` with `body` (JSON).
pub fn claim(scope: pb::Scope, key: &str, holder: &str, body: &str) -> pb::ClaimRequest {
    pb::ClaimRequest {
        scope: Some(scope),
        key: key.into(),
        request: Some(pb::CanonicalRequest {
            method: "POST".into(),
            route: "/v1/charges".into(),
            body_json: Some(body.as_bytes().to_vec()),
            schema_version: 1,
            ..Default::default()
        }),
        holder: holder.into(),
        ..Default::default()
    }
}

/// A `jcs-sha256/v1` fingerprint whose digest is 32 times `byte`.
pub fn fingerprint(byte: u8) -> pb::Fingerprint {
    pb::Fingerprint {
        algorithm: "jcs-sha256/v1".into(),
        schema_version: 1,
        digest: vec![byte; 32],
    }
}

/// A claim of `key` by `holder` carrying [`fingerprint`]`(byte)`.
pub fn fingerprinted_claim(
    scope: pb::Scope,
    key: &str,
    holder: &str,
    byte: u8,
) -> pb::ClaimRequest {
    pb::ClaimRequest {
        scope: Some(scope),
        key: key.into(),
        fingerprints: vec![fingerprint(byte)],
        holder: holder.into(),
        ..Default::default()
    }
}

/// A complete of `key` at `fence` with a small charge result.
pub fn complete(scope: pb::Scope, key: &str, fence: u64) -> pb::CompleteRequest {
    pb::CompleteRequest {
        scope: Some(scope),
        key: key.into(),
        fence,
        result: Some(pb::StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            fields: HashMap::from([("amount".to_owned(), "100".to_owned())]),
            ..Default::default()
        }),
    }
}
