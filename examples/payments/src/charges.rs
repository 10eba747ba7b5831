//! The payment service's charges: `POST /v1/charges` behind the idempotency layer,
//! `GET /v1/charges/{id}` and `DELETE /v1/charges/{id}`.
//!
//! The create handler is written the way the layer expects a handler with a side effect to
//! be written: it records `CALLING` before calling the provider and passes the operation id
//! as the provider's idempotency key; a takeover of an attempt that got as far as `CALLING`
//! asks the provider first; after the provider answered it records `REMOTE_CONFIRMED`. The
//! response names its [`Resource`], which is all idem stores: a retry's body is re-rendered
//! from the charge itself ([`ChargeRender`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use idem_core::Stage;
use idem_http::{Failure, Ledger, Render, RenderFuture, Replay, Resource};
use serde::{Deserialize, Serialize};

use crate::provider::ProviderCharge;
use crate::provider_client::{ProviderClient, ProviderError};

/// The body of `POST /v1/charges`.
#[derive(Debug, Deserialize)]
pub struct NewCharge {
    /// Amount in minor units (at least 1).
    pub amount: u64,
    /// ISO currency code.
    pub currency: String,
}

/// A charge of the payment service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// `ch_<operation id>`.
    pub id: String,
    /// Amount in minor units.
    pub amount: u64,
    /// ISO currency code.
    pub currency: String,
    /// The provider's reference.
    pub provider_ref: String,
    /// The operation id (the provider's idempotency key).
    pub operation_id: String,
}

/// The charges and the provider client.
#[derive(Debug)]
pub struct Charges {
    provider: ProviderClient,
    store: Mutex<HashMap<String, Charge>>,
}

impl Charges {
    /// An empty book of charges, charging through `provider`.
    pub fn new(provider: ProviderClient) -> Arc<Self> {
        Arc::new(Charges {
            provider,
            store: Mutex::new(HashMap::new()),
        })
    }

    fn get(&self, id: &str) -> Option<Charge> {
        self.store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    fn remove(&self, id: &str) -> Option<Charge> {
        self.store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }

    fn put(&self, charge: Charge) {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.insert(charge.id.clone(), charge);
    }

    /// The provider's charge for this attempt: looked up first when a previous attempt may
    /// have called, else made now with `CALLING` recorded before.
    async fn provider_charge(
        &self,
        ledger: &Ledger,
        new: &NewCharge,
    ) -> Result<ProviderCharge, Response> {
        let key = ledger.downstream_key();
        if matches!(
            ledger.previous_stage(),
            Some(Stage::Calling | Stage::RemoteConfirmed)
        ) {
            match self.provider.find(&key).await {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(e) => return Err(provider_error(&e)),
            }
        }
        if let Err(e) = ledger.calling().await {
            tracing::warn!(error = %e, "CALLING not recorded; not charging");
            return Err((StatusCode::SERVICE_UNAVAILABLE, "try again").into_response());
        }
        self.provider
            .charge(&key, new.amount, &new.currency)
            .await
            .map_err(|e| provider_error(&e))
    }
}

/// `POST /v1/charges`.
pub async fn create(
    State(charges): State<Arc<Charges>>,
    ledger: Ledger,
    Json(new): Json<NewCharge>,
) -> Response {
    if new.amount == 0 {
        let failure = Failure {
            code: "invalid_amount".into(),
            message: "the amount must be at least 1".into(),
        };
        return (StatusCode::UNPROCESSABLE_ENTITY, failure, "invalid amount").into_response();
    }
    let provided = match charges.provider_charge(&ledger, &new).await {
        Ok(provided) => provided,
        Err(response) => return response,
    };
    if let Err(e) = ledger.confirmed(&provided.id).await {
        tracing::warn!(error = %e, "REMOTE_CONFIRMED not recorded");
        return (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response();
    }
    let charge = Charge {
        id: format!("ch_{}", ledger.operation_id().to_string().replace('-', "")),
        amount: provided.amount,
        currency: provided.currency,
        provider_ref: provided.id,
        operation_id: ledger.downstream_key(),
    };
    charges.put(charge.clone());
    let resource = Resource::new(charge.id.clone())
        .version("1")
        .field("amount", charge.amount.to_string())
        .field("currency", charge.currency.clone());
    let location = format!("/v1/charges/{}", charge.id);
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        resource,
        Json(charge),
    )
        .into_response()
}

/// `GET /v1/charges/{id}`.
pub async fn show(State(charges): State<Arc<Charges>>, Path(id): Path<String>) -> Response {
    match charges.get(&id) {
        Some(charge) => Json(charge).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `DELETE /v1/charges/{id}`: the charge is gone from the book (204; 404 when unknown).
///
/// The creating request's record stays COMPLETED: a retry of the `POST` with its key is
/// answered "done" from the stored result (re-rendered from the stored fields, since the
/// charge is gone) and never creates the charge again (docs/semantics.md, "A resource
/// deleted after the operation completed").
pub async fn delete(State(charges): State<Arc<Charges>>, Path(id): Path<String>) -> StatusCode {
    match charges.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

/// A provider problem as an answer: a timeout is 504 (the charge may exist; the retry asks
/// the provider first), anything else 502.
fn provider_error(error: &ProviderError) -> Response {
    tracing::warn!(%error, "provider call failed");
    let status = match error {
        ProviderError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        ProviderError::Status(_) | ProviderError::Transport(_) => StatusCode::BAD_GATEWAY,
    };
    (status, error.to_string()).into_response()
}

/// Re-renders a replayed charge from the book (the charge as it is now), or from the
/// stored fields when this process does not know it (it restarted, or the charge was
/// deleted).
#[derive(Debug)]
pub struct ChargeRender {
    charges: Arc<Charges>,
}

impl ChargeRender {
    /// A renderer reading `charges`.
    pub fn new(charges: Arc<Charges>) -> Self {
        ChargeRender { charges }
    }
}

impl Render for ChargeRender {
    fn render(&self, replay: Replay) -> RenderFuture {
        let body = match self.charges.get(&replay.resource.id) {
            Some(charge) => serde_json::to_value(charge).unwrap_or_default(),
            None => serde_json::json!({
                "id": replay.resource.id,
                "amount": replay.resource.fields.get("amount").and_then(|a| a.parse::<u64>().ok()),
                "currency": replay.resource.fields.get("currency"),
                "operation_id": replay.operation_id.to_string(),
            }),
        };
        Box::pin(async move { Json(body).into_response() })
    }
}
