//! The tower layer that authenticates every call before the services see it.
//!
//! It runs on the whole gRPC router: every call gets its [`Principal`] in the request
//! extensions or is answered `UNAUTHENTICATED` here, except gRPC health and reflection, which
//! pass without one. Deny by default: a service added to the port later (as `idem.v1.Backup`
//! was) is guarded without anyone having to remember it. The whole call runs inside
//! [`crate::replica::caller::scope`], so what it forwards to the leader carries the
//! principal.

use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use http::{Request, Response};
use tower::{Layer, Service};

use super::authenticator::Authenticator;
use super::principal::Principal;
use crate::tls::ClientIdentity;

/// Path prefixes that pass without a principal: health checks (load balancers, probes) and
/// server reflection (tooling discovers the schema; it reveals no data).
const OPEN: [&str; 3] = [
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

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
        if OPEN.iter().any(|prefix| path.starts_with(prefix)) {
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
