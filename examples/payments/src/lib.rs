//! The payments example: an axum payment service whose `POST /v1/charges` is protected by
//! the idem-http layer, and the fake card provider it charges through.
//!
//! The service authenticates a caller from `Authorization: Bearer <tenant>/<user>` (a toy
//! scheme standing for the service's real authentication) and puts the [`Principal`] in the
//! request extensions, where the layer reads the record's tenant and actor.

pub mod charges;
pub mod provider;
pub mod provider_client;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use idem_client::Client;
use idem_core::Risk;
use idem_http::{Config, IdempotencyLayer, InFlight, Principal, RoutePolicy};

use crate::charges::{ChargeRender, Charges};
use crate::provider_client::ProviderClient;

/// How long the service waits for the provider.
pub const PROVIDER_DEADLINE: Duration = Duration::from_secs(2);

/// The policy of `POST /v1/charges`: HIGH risk (an unknown provider outcome is never
/// guessed), duplicates held up to 5 s, a lease renewed while the provider is slow.
/// Replays are re-rendered from the charge, unless `store_body` opts in to storing the
/// first answer verbatim (up to that many bytes).
pub fn charge_policy(charges: Arc<Charges>, store_body: Option<usize>) -> RoutePolicy {
    RoutePolicy {
        store_body,
        risk: Risk::High,
        lease: Duration::from_secs(10),
        in_flight: InFlight::Wait(Duration::from_secs(5)),
        handler_timeout: Some(Duration::from_secs(20)),
        render: Some(Arc::new(ChargeRender::new(charges))),
        ..RoutePolicy::default()
    }
}

/// The service's router: the layer through `idem`, charging through the provider at
/// `provider_base`, in scope environment `environment`; replays re-rendered.
pub fn app(idem: Client, provider_base: &str, environment: &str) -> Router {
    app_with(idem, provider_base, environment, None)
}

/// [`app`], with the charge answers stored verbatim up to `store_body` bytes when set.
pub fn app_with(
    idem: Client,
    provider_base: &str,
    environment: &str,
    store_body: Option<usize>,
) -> Router {
    let charges = Charges::new(ProviderClient::new(provider_base, PROVIDER_DEADLINE));
    let policy = charge_policy(charges.clone(), store_body);
    let config = Config::new(environment)
        .route(Method::POST, "/v1/charges", policy)
        .expect("a valid route template");
    Router::new()
        .route("/v1/charges", post(charges::create))
        .route(
            "/v1/charges/{id}",
            get(charges::show).delete(charges::delete),
        )
        .with_state(charges)
        .layer(IdempotencyLayer::new(idem, config))
        .layer(middleware::from_fn(authenticate))
}

/// `Authorization: Bearer <tenant>/<user>` → [`Principal`]; 401 without it.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let principal = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|token| token.split_once('/'))
        .map(|(tenant, user)| Principal {
            tenant: tenant.to_owned(),
            actor: user.to_owned(),
        });
    match principal {
        Some(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        None => (
            StatusCode::UNAUTHORIZED,
            "Authorization: Bearer <tenant>/<user>",
        )
            .into_response(),
    }
}

/// Serves `router` on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router).await
}

/// Serves `router` on an already bound listener (tests bind port 0).
pub async fn serve_on(listener: tokio::net::TcpListener, router: Router) -> std::io::Result<()> {
    axum::serve(listener, router).await
}
