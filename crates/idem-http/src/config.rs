//! The layer's configuration: where the scope comes from, and a policy per route.
//!
//! Idempotency is a property of an operation, not of a whole service, so everything that
//! changes the answer is chosen per route: whether the key is required, the risk class, the
//! lease, how long a duplicate may be held, which headers and body fields identify the
//! request, which response headers are replayed and which 4xx answers are final results.
//! Routes that are not configured pass through untouched.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderName, Method, StatusCode};
use idem_core::Risk;

use crate::replay::Render;
use crate::route::{RouteTemplate, TemplateError};

/// Room kept in a record's `max_result_bytes` for the rest of a result (status, resource,
/// fields, replayed headers) next to a verbatim body.
pub const RESULT_ROOM: usize = 16 * 1024;

/// The largest `store_body`: idem's largest record limit less [`RESULT_ROOM`].
pub const MAX_STORED_BODY: usize = idem_core::policy::MAX_RESULT_BYTES as usize - RESULT_ROOM;

/// The authenticated caller, put in the request extensions by the service's authentication
/// layer (which runs before this one). The default source of the tenant and the actor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The caller's organisation.
    pub tenant: String,
    /// The end user or account the request acts for.
    pub actor: String,
}

/// A function reading a scope part from the request head.
pub type Extractor = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// Where a scope part (tenant or actor) comes from.
#[derive(Clone)]
pub enum ScopeSource {
    /// The [`Principal`] in the request extensions (the default).
    Principal,
    /// The same value for every request (a single-tenant service).
    Fixed(String),
    /// A request header. Only behind a gateway that sets it: a client could forge it.
    Header(HeaderName),
    /// A function of the request head.
    Custom(Extractor),
}

impl fmt::Debug for ScopeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeSource::Principal => f.write_str("Principal"),
            ScopeSource::Fixed(v) => f.debug_tuple("Fixed").field(v).finish(),
            ScopeSource::Header(h) => f.debug_tuple("Header").field(h).finish(),
            ScopeSource::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Which part of the principal a [`ScopeSource::Principal`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrincipalPart {
    Tenant,
    Actor,
}

impl ScopeSource {
    /// The value for this request, if any.
    pub(crate) fn read(&self, parts: &Parts, part: PrincipalPart) -> Option<String> {
        match self {
            ScopeSource::Principal => parts.extensions.get::<Principal>().map(|p| match part {
                PrincipalPart::Tenant => p.tenant.clone(),
                PrincipalPart::Actor => p.actor.clone(),
            }),
            ScopeSource::Fixed(value) => Some(value.clone()),
            ScopeSource::Header(name) => parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            ScopeSource::Custom(extract) => extract(parts),
        }
    }
}

/// What a duplicate that arrives while the first request runs gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InFlight {
    /// `409 Conflict` with `Retry-After` at once (the draft's behaviour).
    Conflict,
    /// Hold the duplicate with `Wait` up to this budget, then answer as the first request
    /// did (replay), or run it if the first failed retryably; 409 when the budget runs out.
    Wait(Duration),
}

/// Which parts of a request identify it, beyond method, route, path parameters and query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FingerprintSpec {
    /// Request headers that take part (e.g. a currency or account header). Never
    /// authorization or tracing headers.
    pub headers: Vec<HeaderName>,
    /// JSON Pointers (RFC 6901, e.g. `/amount`) of the body members that take part;
    /// `None` means the whole body.
    pub body_fields: Option<Vec<String>>,
    /// Send the canonical request for the server to fingerprint, rather than the digest
    /// computed here (same algorithm, more bytes on the wire).
    pub server_hashed: bool,
}

/// The policy of one route.
#[derive(Clone)]
pub struct RoutePolicy {
    /// A request without `Idempotency-Key` is refused with 400 (else it passes through).
    pub key_required: bool,
    /// The record's risk class (`High`: unknown outcomes wait for reconciliation, writes are
    /// refused during a region failover).
    pub risk: Risk,
    /// The lease of an attempt; the layer renews it every third of it while the handler runs.
    pub lease: Duration,
    /// How long a terminal record is kept (`None`: the server's policy, 24 h).
    pub retention: Option<Duration>,
    /// What an in-flight duplicate gets.
    pub in_flight: InFlight,
    /// Which request parts identify the request.
    pub fingerprint: FingerprintSpec,
    /// Response headers stored with the result and replayed (e.g. `location`).
    pub replay_headers: Vec<HeaderName>,
    /// 4xx statuses that are final *results* (completed and replayed like a 2xx, e.g. 409
    /// for "already refunded"); other 4xx are terminal failures.
    pub complete_statuses: Vec<StatusCode>,
    /// The status of `NEEDS_RECONCILIATION` (409, or 503 for clients that retry on 503).
    pub reconciliation_status: StatusCode,
    /// The longest the handler may run; past it the answer is 504 and the record is
    /// released or failed retryably.
    pub handler_timeout: Option<Duration>,
    /// How a replayed result's body is rendered (default: [`crate::replay::JsonRender`]).
    pub render: Option<Arc<dyn Render>>,
    /// Opt-in: keep the first answer's body and content type verbatim, up to this many
    /// bytes (at most [`MAX_STORED_BODY`]), and replay them instead of calling `render`.
    /// The record's `max_result_bytes` is raised to fit. A body of unknown length (a
    /// stream) or above the limit is not kept: that replay is rendered. `None` (default):
    /// nothing of the body is stored.
    pub store_body: Option<usize>,
    /// The largest request body accepted, in bytes (default 1 MiB, the fingerprint limit).
    pub max_body_bytes: usize,
}

impl Default for RoutePolicy {
    fn default() -> Self {
        RoutePolicy {
            key_required: true,
            risk: Risk::Normal,
            lease: Duration::from_secs(30),
            retention: None,
            in_flight: InFlight::Conflict,
            fingerprint: FingerprintSpec::default(),
            replay_headers: vec![http::header::LOCATION],
            complete_statuses: Vec::new(),
            reconciliation_status: StatusCode::CONFLICT,
            handler_timeout: None,
            render: None,
            store_body: None,
            max_body_bytes: idem_core::fingerprint::jcs::DEFAULT_MAX_BYTES,
        }
    }
}

impl fmt::Debug for RoutePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoutePolicy")
            .field("key_required", &self.key_required)
            .field("risk", &self.risk)
            .field("lease", &self.lease)
            .field("in_flight", &self.in_flight)
            .field("fingerprint", &self.fingerprint)
            .field("render", &self.render.is_some())
            .field("store_body", &self.store_body)
            .finish_non_exhaustive()
    }
}

/// One configured route.
#[derive(Clone, Debug)]
pub(crate) struct RouteEntry {
    pub(crate) method: Method,
    pub(crate) template: RouteTemplate,
    pub(crate) policy: Arc<RoutePolicy>,
}

/// The layer's configuration: the scope sources and the protected routes.
#[derive(Clone, Debug)]
pub struct Config {
    /// The scope's environment (`test`, `live`, ...).
    pub environment: String,
    /// Where the tenant comes from.
    pub tenant: ScopeSource,
    /// Where the actor comes from.
    pub actor: ScopeSource,
    routes: Vec<RouteEntry>,
}

impl Config {
    /// A configuration for `environment`, tenant and actor from the [`Principal`], no routes.
    pub fn new(environment: impl Into<String>) -> Self {
        Config {
            environment: environment.into(),
            tenant: ScopeSource::Principal,
            actor: ScopeSource::Principal,
            routes: Vec::new(),
        }
    }

    /// Sets where the tenant comes from.
    #[must_use]
    pub fn tenant(mut self, source: ScopeSource) -> Self {
        self.tenant = source;
        self
    }

    /// Sets where the actor comes from.
    #[must_use]
    pub fn actor(mut self, source: ScopeSource) -> Self {
        self.actor = source;
        self
    }

    /// Protects `method template` (axum 0.8 template syntax) with `policy`.
    pub fn route(
        mut self,
        method: Method,
        template: &str,
        policy: RoutePolicy,
    ) -> Result<Self, TemplateError> {
        let template = RouteTemplate::parse(template)?;
        self.routes.push(RouteEntry {
            method,
            template,
            policy: Arc::new(policy),
        });
        Ok(self)
    }

    /// The route of a request: by the template axum matched when there is one, else by
    /// matching the configured templates against the path. Returns the entry and the
    /// path parameters.
    pub(crate) fn find(
        &self,
        method: &Method,
        matched: Option<&str>,
        path: &str,
    ) -> Option<(&RouteEntry, Vec<(String, String)>)> {
        self.routes
            .iter()
            .filter(|r| r.method == method)
            .filter(|r| matched.is_none_or(|m| m == r.template.as_str()))
            .find_map(|r| r.template.matches(path).map(|params| (r, params)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_routes_by_method_template_and_path() {
        let config = Config::new("test")
            .route(Method::POST, "/v1/charges", RoutePolicy::default())
            .unwrap()
            .route(
                Method::POST,
                "/v1/charges/{id}/refunds",
                RoutePolicy::default(),
            )
            .unwrap();
        let (entry, params) = config
            .find(&Method::POST, None, "/v1/charges/c1/refunds")
            .unwrap();
        assert_eq!(entry.template.as_str(), "/v1/charges/{id}/refunds");
        assert_eq!(params, vec![("id".to_owned(), "c1".to_owned())]);
        assert!(config.find(&Method::GET, None, "/v1/charges").is_none());
        assert!(config
            .find(&Method::POST, Some("/other"), "/v1/charges")
            .is_none());
        assert!(config
            .find(&Method::POST, Some("/v1/charges"), "/v1/charges")
            .is_some());
    }

    #[test]
    fn scope_sources() {
        let (mut parts, ()) = http::Request::builder()
            .header("x-tenant", "acme")
            .body(())
            .unwrap()
            .into_parts();
        parts.extensions.insert(Principal {
            tenant: "t1".into(),
            actor: "u1".into(),
        });
        let read = |s: ScopeSource, p| s.read(&parts, p);
        assert_eq!(
            read(ScopeSource::Principal, PrincipalPart::Actor).unwrap(),
            "u1"
        );
        assert_eq!(
            read(ScopeSource::Principal, PrincipalPart::Tenant).unwrap(),
            "t1"
        );
        let header = ScopeSource::Header(HeaderName::from_static("x-tenant"));
        assert_eq!(read(header, PrincipalPart::Tenant).unwrap(), "acme");
        let custom = ScopeSource::Custom(Arc::new(|p: &Parts| Some(p.method.to_string())));
        assert_eq!(read(custom, PrincipalPart::Actor).unwrap(), "GET");
        assert_eq!(
            read(ScopeSource::Fixed("x".into()), PrincipalPart::Actor).unwrap(),
            "x"
        );
    }
}
