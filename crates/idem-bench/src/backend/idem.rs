//! idem through its Rust SDK (`idem-client`), as a service would call it.
//!
//! The SDK is used unchanged: it computes nothing per call here beyond what production does
//! (the fingerprint of the benchmark's fixed request body is computed once), routes writes to
//! the leader it learned, and retries transport failures with the same request.

use idem_client::{ClaimOutcome, ClaimRequest, Client, ClientOptions};
use idem_core::fingerprint::{CanonicalRequest, Fingerprint};
use idem_core::{IdempotencyKey, RecordKey, Scope, StoredResult};

use super::{Backend, CallError, ClaimResult};
use crate::cli::TargetArgs;
use crate::error::BenchError;

/// The request every benchmark claim stands for (its fingerprint is what duplicates match).
const BODY: &str = r#"{"amount":1000,"currency":"EUR"}"#;

/// One idem SDK client (its own HTTP/2 connections to every node), shared by the clients
/// the runner puts on it, as a service's tasks share one: their concurrent calls are
/// coalesced as the SDK does by default (`--idem-batch 1` turns that off).
pub struct IdemBackend {
    client: Client,
    scope: Scope,
    fingerprint: Fingerprint,
    result: StoredResult,
}

impl IdemBackend {
    fn target(&self, key: &str) -> Result<RecordKey, CallError> {
        Ok(RecordKey::new(
            self.scope.clone(),
            IdempotencyKey::new(key)?,
        ))
    }
}

impl Backend for IdemBackend {
    const NAME: &'static str = "idem";

    async fn connect(target: &TargetArgs, index: usize) -> Result<Self, BenchError> {
        let endpoints = &target.endpoints();
        let setup = |e: &dyn std::fmt::Display| BenchError::Connect {
            backend: Self::NAME,
            endpoint: endpoints.join(","),
            message: e.to_string(),
        };
        // Each connection starts at a different node; the SDK moves to the leader anyway.
        let mut rotated = endpoints.to_vec();
        rotated.rotate_left(index % endpoints.len().max(1));
        let options = ClientOptions {
            coalescing: target.coalescing(),
            ..ClientOptions::default()
        };
        let client = Client::connect(rotated, options).map_err(|e| setup(&e))?;
        client.status().await.map_err(|e| setup(&e))?;
        let scope = Scope::new("bench", "bench", "bench-actor", "POST /v1/charges")
            .map_err(|e| setup(&e))?;
        let fingerprint = CanonicalRequest::new("POST", "/v1/charges")
            .map_err(|e| setup(&e))?
            .with_json_body(BODY)
            .fingerprint(1)
            .map_err(|e| setup(&e))?;
        let result = StoredResult {
            status_code: 201,
            resource_id: "ch_bench".into(),
            ..Default::default()
        };
        Ok(IdemBackend {
            client,
            scope,
            fingerprint,
            result,
        })
    }

    async fn claim(&self, key: &str) -> Result<ClaimResult, CallError> {
        let request =
            ClaimRequest::with_fingerprints(self.target(key)?, vec![self.fingerprint.clone()]);
        let claim = self.client.claim(request).await?;
        Ok(match claim.outcome {
            ClaimOutcome::Acquired { fence, .. } | ClaimOutcome::TakenOver { fence, .. } => {
                ClaimResult::Acquired(fence)
            }
            ClaimOutcome::Completed { .. } => ClaimResult::Replayed,
            ClaimOutcome::InProgress { .. } => ClaimResult::InProgress,
            _ => ClaimResult::Other,
        })
    }

    async fn complete(&self, key: &str, token: u64) -> Result<(), CallError> {
        self.client
            .complete(&self.target(key)?, token, &self.result)
            .await?;
        Ok(())
    }
}
