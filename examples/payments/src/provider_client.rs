//! The payment service's HTTP client of the card provider.
//!
//! Every call has a deadline: a provider that does not answer in time is an *unknown*
//! outcome (it may have charged), which the service reports as a 504 so that the layer keeps
//! the ledger stage and the retry asks the provider before charging again.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::provider::ProviderCharge;

/// Why a provider call gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// No answer within the deadline: the charge may or may not have happened.
    #[error("the provider did not answer within {0:?}")]
    Timeout(Duration),
    /// The provider answered an error status.
    #[error("the provider answered {0}")]
    Status(StatusCode),
    /// The connection failed or the answer could not be read.
    #[error("provider transport: {0}")]
    Transport(String),
}

/// A client of the provider at `base` (e.g. `http://127.0.0.1:8090`).
#[derive(Clone, Debug)]
pub struct ProviderClient {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
    deadline: Duration,
}

impl ProviderClient {
    /// A client with a per-call `deadline`.
    pub fn new(base: impl Into<String>, deadline: Duration) -> Self {
        ProviderClient {
            base: base.into(),
            http: Client::builder(TokioExecutor::new()).build_http(),
            deadline,
        }
    }

    /// Charges `amount` once for `key` (the provider answers a repeated key with the first
    /// charge).
    pub async fn charge(
        &self,
        key: &str,
        amount: u64,
        currency: &str,
    ) -> Result<ProviderCharge, ProviderError> {
        let body = serde_json::json!({"amount": amount, "currency": currency}).to_string();
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/charges", self.base))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        let (status, bytes) = self.send(request).await?;
        if !status.is_success() {
            return Err(ProviderError::Status(status));
        }
        serde_json::from_slice(&bytes).map_err(|e| ProviderError::Transport(e.to_string()))
    }

    /// The charge made for `key`, if any.
    pub async fn find(&self, key: &str) -> Result<Option<ProviderCharge>, ProviderError> {
        let request = Request::builder()
            .uri(format!("{}/charges/{key}", self.base))
            .body(Full::new(Bytes::new()))
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        let (status, bytes) = self.send(request).await?;
        match status {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| ProviderError::Transport(e.to_string())),
            s => Err(ProviderError::Status(s)),
        }
    }

    async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), ProviderError> {
        let call = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| ProviderError::Transport(e.to_string()))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| ProviderError::Transport(e.to_string()))?;
            Ok((status, body.to_bytes()))
        };
        tokio::time::timeout(self.deadline, call)
            .await
            .map_err(|_| ProviderError::Timeout(self.deadline))?
    }
}
