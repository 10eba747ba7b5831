//! The tower layer that authenticates every call before the services see it.
//!
//! It runs on the whole gRPC router: calls to `idem.v1.Idempotency` and `idem.v1.Admin` get
//! their [`Principal`] in the request extensions or are answered `UNAUTHENTICATED` here;
//! gRPC health and reflection pass without one. The whole call runs inside
//! [`crate::replica::caller::scope`], so what it forwards to the leader carries the
//! principal.

use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use http::{Request, Response};
use tower::{Layer, Service};

use super::authenticator::Authenticator;
use super::principal::Principal;
use crate::tls::ClientIdentity;

/// Paths that need a principal.
const GUARDED: [&str; 2] = ["/idem.v1.Idempotency/", "/idem.v1.Admin/"];

/// The layer for `tonic::transport::Server::layer`.
#[derive(Clone, Debug)]
pub struct AuthLayer {
    authenticator: Authenticator,
}

impl AuthLayer {
    /// A layer over `authenticator`.
    pub fn new(authenticator: Authenticator) -> Self {
        AuthLayer { authenticator }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            authenticator: self.authenticator.clone(),
        }
    }
}

/// The service [`AuthLayer`] wraps around the router.
#[derive(Clone, Debug)]
pub struct AuthService<S> {
    inner: S,
    authenticator: Authenticator,
}

impl<S, B, R> Service<Request<B>> for AuthService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response<R>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let path = request.uri().path();
        if !GUARDED.iter().any(|prefix| path.starts_with(prefix)) {
            return Either::Left(self.inner.call(request));
        }
        let identity = request.extensions().get::<ClientIdentity>();
        match self.authenticator.authenticate(request.headers(), identity) {
            Ok(principal) => {
                request
                    .extensions_mut()
                    .insert::<Principal>(principal.clone());
                // The call's proposals forward this principal to the leader.
                let call = self.inner.call(request);
                Either::Right(Box::pin(crate::replica::caller::scope(principal, call)))
            }
            Err(error) => {
                tracing::debug!(path, reason = error.reason(), "call not authenticated");
                let status = tonic::Status::from(error);
                let (parts, ()) = status.into_http::<()>().into_parts();
                let response = Response::from_parts(parts, R::default());
                Either::Right(Box::pin(async move { Ok(response) }))
            }
        }
    }
}
