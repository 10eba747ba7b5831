//! The tower `Layer` and `Service`.
//!
//! The service takes any `http_body::Body` and hands the inner service an
//! `axum::body::Body` (a boxed body, usable without the rest of axum): the request body has
//! to be buffered to fingerprint it, so the inner service gets it back from memory. Answers
//! are `axum::body::Body` too, since the layer answers many requests itself. That makes it
//! fit `axum::Router::layer` (where `MatchedPath` gives the route template) and a plain
//! hyper/tower stack (where the configured templates are matched against the path).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use idem_client::Client;
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::config::Config;
use crate::flow::{self, Shared};
use crate::metrics::Metrics;

/// The idempotency layer: wrap protected routes with it.
///
/// ```no_run
/// use axum::{routing::post, Router};
/// use idem_client::{Client, ClientOptions};
/// use idem_http::{Config, IdempotencyLayer, RoutePolicy};
///
/// # fn build() -> Result<Router, Box<dyn std::error::Error>> {
/// let client = Client::connect(vec!["127.0.0.1:7400".into()], ClientOptions::default())?;
/// let config = Config::new("live").route(http::Method::POST, "/v1/charges", RoutePolicy::default())?;
/// let app = Router::new()
///     .route("/v1/charges", post(|| async { "charged" }))
///     .layer(IdempotencyLayer::new(client, config));
/// # Ok(app) }
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl IdempotencyLayer {
    /// A layer deciding through `client` for the routes of `config`.
    pub fn new(client: Client, config: Config) -> Self {
        IdempotencyLayer {
            shared: Arc::new(Shared {
                client,
                config,
                metrics: None,
            }),
        }
    }

    /// The same layer, counting outcomes in `metrics`.
    #[must_use]
    pub fn with_metrics(self, metrics: Metrics) -> Self {
        IdempotencyLayer {
            shared: Arc::new(Shared {
                client: self.shared.client.clone(),
                config: self.shared.config.clone(),
                metrics: Some(metrics),
            }),
        }
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The service the layer wraps around a handler (see [`IdempotencyLayer`]).
#[derive(Clone)]
pub struct Idempotency<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> std::fmt::Debug for Idempotency<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency").finish_non_exhaustive()
    }
}

impl<S, B, RB> Service<Request<B>> for Idempotency<S>
where
    S: Service<Request<Body>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    RB: http_body::Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone that was polled ready serves this request (the usual tower pattern).
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let inner = ready.map_response(|r: Response<RB>| r.map(Body::new));
        Box::pin(flow::handle(self.shared.clone(), inner, request))
    }
}
