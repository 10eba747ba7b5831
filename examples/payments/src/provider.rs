//! A fake card provider: its own small HTTP service, idempotent by the caller's key.
//!
//! It stands for the downstream a payment service must never call twice for one intent. It
//! charges once per `Idempotency-Key` (the payment service passes the idem operation id),
//! answers a repeated key with the first charge, lets a caller look a key up (what a
//! takeover does before calling again), and can be told to misbehave on its next calls:
//! charge but answer only after a long delay (the caller times out: outcome unknown), or
//! fail without charging.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

/// How long a `timeout` call takes to answer (after charging).
pub const SLOW_ANSWER: Duration = Duration::from_secs(10);

/// A charge made by the provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCharge {
    /// The provider's reference, `psp_<n>`.
    pub id: String,
    /// Amount in minor units.
    pub amount: u64,
    /// ISO currency code.
    pub currency: String,
}

/// What the provider does on one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Charge and answer at once.
    Ok,
    /// Charge, then answer after [`SLOW_ANSWER`].
    Timeout,
    /// Answer 500 without charging.
    Fail,
}

/// The body of `POST /control`: modes for the next calls, in order.
#[derive(Debug, Deserialize)]
pub struct Control {
    /// The modes of the next `POST /charges` calls.
    pub next: Vec<Mode>,
}

/// The body of `POST /charges`.
#[derive(Debug, Deserialize)]
struct ChargeBody {
    amount: u64,
    currency: String,
}

/// The provider's state.
#[derive(Debug, Default)]
pub struct Provider {
    charges: Mutex<HashMap<String, ProviderCharge>>,
    next: Mutex<VecDeque<Mode>>,
}

impl Provider {
    /// The provider's routes: `POST /charges`, `GET /charges/{key}`, `POST /control`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/charges", post(charge))
            .route("/charges/{key}", get(find))
            .route("/control", post(control))
            .with_state(self)
    }

    /// Number of distinct charges made so far.
    pub fn charges_made(&self) -> usize {
        self.charges.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Queues modes for the next calls.
    pub fn push(&self, modes: &[Mode]) {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        next.extend(modes.iter().copied());
    }

    fn next_mode(&self) -> Mode {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        next.pop_front().unwrap_or(Mode::Ok)
    }

    /// The charge of `key`, made now unless it exists.
    fn charge_once(&self, key: &str, body: &ChargeBody) -> ProviderCharge {
        let mut charges = self.charges.lock().unwrap_or_else(|e| e.into_inner());
        let n = charges.len() + 1;
        charges
            .entry(key.to_owned())
            .or_insert_with(|| ProviderCharge {
                id: format!("psp_{n}"),
                amount: body.amount,
                currency: body.currency.clone(),
            })
            .clone()
    }
}

async fn charge(
    State(provider): State<Arc<Provider>>,
    headers: HeaderMap,
    Json(body): Json<ChargeBody>,
) -> Response {
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return (StatusCode::BAD_REQUEST, "Idempotency-Key required").into_response();
    };
    match provider.next_mode() {
        Mode::Fail => (StatusCode::INTERNAL_SERVER_ERROR, "provider failure").into_response(),
        Mode::Ok => Json(provider.charge_once(key, &body)).into_response(),
        Mode::Timeout => {
            let charge = provider.charge_once(key, &body);
            tokio::time::sleep(SLOW_ANSWER).await;
            Json(charge).into_response()
        }
    }
}

async fn find(State(provider): State<Arc<Provider>>, Path(key): Path<String>) -> Response {
    let charges = provider.charges.lock().unwrap_or_else(|e| e.into_inner());
    match charges.get(&key) {
        Some(charge) => Json(charge.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn control(
    State(provider): State<Arc<Provider>>,
    Json(control): Json<Control>,
) -> StatusCode {
    provider.push(&control.next);
    StatusCode::NO_CONTENT
}
