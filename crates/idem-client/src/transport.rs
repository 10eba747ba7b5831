//! Endpoints, routing and the retry loop shared by every call.
//!
//! Any idem node accepts any request, but writes are cheapest at the leader of the Raft
//! group that decides them: a follower forwards them (one more hop, across regions in a
//! multi-region cluster), or, when it cannot reach a leader, answers `NOT_LEADER` with the
//! leader's public address (`leader-addr`) when it knows one. A follower that forwarded a call
//! says so in the `leader-addr` response metadata.
//!
//! **Routes.** In region-affinity mode each tenant's keys are decided by the group of its
//! home region, whose leader differs from tenant to tenant, so the transport keeps a *route*
//! per tenant: the endpoint that last served one of the tenant's calls itself, or the leader
//! a `leader-addr` answer or a `NOT_LEADER` hint named for it. A tenant's call (claim, worker
//! commands, get, wait, purge) starts at its route. Calls that name no tenant (admin calls,
//! lookups by operation id) and tenants without a route use the *default* route, which
//! follows every leader learned (as a single-group cluster needs) and moves round-robin past
//! endpoints that cannot be reached. The tenant table is bounded ([`MAX_ROUTES`]; it starts
//! over when full) and so is the endpoint set ([`MAX_ENDPOINTS`]; configured endpoints plus
//! learned leaders and region members).
//!
//! **Region preference.** With [`ClientOptions::region`] set, the first attempt of a tenant
//! without a route starts at an endpoint of that region (the default route when it is in the
//! region, else the first such endpoint that did not fail in the last [`FAILED_FOR`]). The
//! endpoints' regions are learned once, on the first such call, from the first endpoint whose
//! `Admin.Status` answers: its own region and its membership (members of the client's region
//! that were not configured are added). When no endpoint answers, learning is tried again
//! after [`RELEARN_AFTER`]; when no endpoint is known in the region, the default route is used.
//! Later attempts of a call move round-robin as usual.
//!
//! Failures are classified by what they say about the request:
//!
//! | failure | sent? | what the loop does |
//! |---|---|---|
//! | connect error (refused, unreachable, connect timeout) | no | next endpoint, back off |
//! | `NOT_LEADER` | no (definite) | hinted leader at once, else next endpoint |
//! | `WRONG_GROUP` | no (definite) | forget the tenant's route, back off, same request again |
//! | `UNAVAILABLE_OUTCOME_UNKNOWN`, reset, timeout, `UNAVAILABLE` without reason | maybe | next endpoint, back off, re-send the same request |
//! | any other idem reason (`REGION_FAILOVER` included) | yes, refused | return it, never retried |
//!
//! When the attempts or the time budget run out, a write that may have been sent is reported
//! as [`ClientError::OutcomeUnknown`]; a call whose last attempt was `WRONG_GROUP` as that
//! rejection; anything else as [`ClientError::Unavailable`].

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::error::Error as _;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use idem_proto::v1::admin_client::AdminClient;
use idem_proto::v1::batch_call::Request as Call;
use idem_proto::v1::batch_reply::Reply;
use idem_proto::{reason, status, v1};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tonic::transport::{ClientTlsConfig, Endpoint};
use tonic::{Code, Status};

use crate::coalescer::Coalescer;
use crate::credentials::{Authorization, Connection};
use crate::error::ClientError;
use crate::options::{ClientOptions, RetryPolicy};

/// Most endpoints kept (configured ones plus leader hints and region members), so that a
/// misbehaving server cannot make the set grow without bound.
pub const MAX_ENDPOINTS: usize = 64;

/// Most tenant routes kept; the table starts over when it is full (a tenant without a route
/// only costs one forwarded call).
pub const MAX_ROUTES: usize = 10_000;

/// How long the region preference skips an endpoint that could not be reached.
pub const FAILED_FOR: Duration = Duration::from_secs(10);

/// How long before the endpoints' regions are asked again when no endpoint answered.
pub const RELEARN_AFTER: Duration = Duration::from_secs(30);

/// Whether a call changes state: decides how an exhausted retry is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A read: exhausting the retries is `UNAVAILABLE`.
    Read,
    /// A write: exhausting the retries after a possible send is `OUTCOME_UNKNOWN`.
    Write,
}

/// Which route a call starts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    /// A call that names no tenant: the default route.
    Default,
    /// A call about one tenant's records: that tenant's route.
    Tenant(&'a str),
}

/// The scheme-qualified URI of an endpoint of a plaintext client: `http://` is added when
/// no scheme is given; `https://` needs [`crate::TlsOptions`].
#[cfg(test)]
pub(crate) fn normalize(endpoint: &str) -> Result<String, ClientError> {
    normalize_for(endpoint, false)
}

/// The scheme-qualified URI of an endpoint: `http://` (plaintext) or `https://` (`tls`) is
/// added when no scheme is given; a scheme that contradicts `tls` is refused.
pub(crate) fn normalize_for(endpoint: &str, tls: bool) -> Result<String, ClientError> {
    let endpoint = endpoint.trim().trim_end_matches('/');
    if endpoint.is_empty() {
        return Err(ClientError::invalid(
            reason::INVALID_ARGUMENT,
            "empty endpoint",
        ));
    }
    let scheme = if tls { "https://" } else { "http://" };
    let other = if tls { "http://" } else { "https://" };
    if endpoint.starts_with(other) {
        let why = if tls {
            "a client with TLS options speaks https:// only"
        } else {
            "https:// needs TLS options (a CA: idemctl --cacert)"
        };
        return Err(ClientError::invalid(
            reason::INVALID_ARGUMENT,
            format!("{endpoint}: {why}"),
        ));
    }
    if endpoint.starts_with(scheme) {
        Ok(endpoint.to_owned())
    } else {
        Ok(format!("{scheme}{endpoint}"))
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked (plain values, each
/// update a single assignment).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// One endpoint: its address and its channel, created on first use (inside the runtime),
/// the queue that coalesces writes to it, its region once learned, and when it last could
/// not be reached.
struct Node {
    uri: String,
    endpoint: Endpoint,
    authorization: Authorization,
    channel: OnceLock<Connection>,
    coalescer: Arc<Coalescer>,
    region: Mutex<Option<String>>,
    failed_at: Mutex<Option<Instant>>,
}

impl Node {
    fn new(uri: String, options: &ClientOptions, security: &Security) -> Result<Self, ClientError> {
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| ClientError::invalid(reason::INVALID_ARGUMENT, format!("{uri}: {e}")))?
            .connect_timeout(options.connect_timeout)
            .tcp_keepalive(Some(options.keep_alive_interval))
            .http2_keep_alive_interval(options.keep_alive_interval)
            .keep_alive_timeout(options.keep_alive_timeout)
            .keep_alive_while_idle(true);
        if let Some(tls) = &security.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|e| {
                ClientError::invalid(reason::INVALID_ARGUMENT, format!("{uri}: TLS: {e}"))
            })?;
        }
        Ok(Node {
            uri,
            endpoint,
            authorization: security.authorization.clone(),
            channel: OnceLock::new(),
            coalescer: Arc::new(Coalescer::new(options.coalescing.clone())),
            region: Mutex::new(None),
            failed_at: Mutex::new(None),
        })
    }

    fn channel(&self) -> Connection {
        self.channel
            .get_or_init(|| {
                Connection::new(self.endpoint.connect_lazy(), self.authorization.clone())
            })
            .clone()
    }

    fn in_region(&self, region: &str) -> bool {
        lock(&self.region).as_deref() == Some(region)
    }

    fn set_region(&self, region: &str) {
        *lock(&self.region) = Some(region.to_owned());
    }

    /// Whether the node could not be reached within the last [`FAILED_FOR`].
    fn failed_recently(&self) -> bool {
        lock(&self.failed_at).is_some_and(|at| at.elapsed() < FAILED_FOR)
    }

    fn reached(&self, reached: bool) {
        *lock(&self.failed_at) = (!reached).then(Instant::now);
    }
}

/// What a failed attempt means for the next one.
#[derive(Debug)]
enum Failure {
    /// The request never left (connection refused, connect timeout).
    NotSent(String),
    /// The request may have been applied.
    MaybeSent(String, Option<Duration>),
    /// This node is not the leader; the hint names the leader's API address.
    NotLeader(Option<String>, String),
    /// A definite refusal that changed nothing and may pass later (`WRONG_GROUP`): retried
    /// after a backoff, returned as is when the attempts run out.
    Later(ClientError),
    /// A definite answer: returned to the caller as is.
    Final(ClientError),
}

/// Where learning the endpoints' regions stands.
#[derive(Clone, Copy, Debug)]
enum Learning {
    NotYet,
    Done,
    FailedAt(Instant),
}

/// The endpoint set, the routes and the retry loop.
pub(crate) struct Transport {
    nodes: Mutex<Vec<Arc<Node>>>,
    /// The default route: an index into `nodes` (which is only ever appended to).
    preferred: AtomicUsize,
    /// Tenant -> index into `nodes`.
    routes: Mutex<HashMap<String, usize>>,
    /// Held while the regions are being learned, so that concurrent calls ask once.
    learning: tokio::sync::Mutex<Learning>,
    options: ClientOptions,
    security: Security,
}

/// The TLS configuration and bearer token of every endpoint, prepared once.
struct Security {
    tls: Option<ClientTlsConfig>,
    authorization: Authorization,
}

impl Transport {
    /// A transport over `endpoints` (at least one); nothing is connected yet.
    pub(crate) fn new(endpoints: &[String], options: ClientOptions) -> Result<Self, ClientError> {
        Transport::audited(endpoints, options, None)
    }

    /// [`Transport::new`], every call carrying `audit_reason` (`idem-audit-reason`).
    pub(crate) fn audited(
        endpoints: &[String],
        options: ClientOptions,
        audit_reason: Option<&str>,
    ) -> Result<Self, ClientError> {
        if endpoints.is_empty() {
            return Err(ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "at least one endpoint is required",
            ));
        }
        if let Some(region) = &options.region {
            idem_core::placement::validate_region(region)?;
        }
        let security = Security {
            tls: options
                .tls
                .as_ref()
                .map(|t| t.client_config())
                .transpose()?,
            authorization: Authorization::new(options.token.as_ref(), audit_reason)?,
        };
        let mut nodes: Vec<Arc<Node>> = Vec::new();
        for endpoint in endpoints {
            let uri = normalize_for(endpoint, security.tls.is_some())?;
            if !nodes.iter().any(|n| n.uri == uri) {
                nodes.push(Arc::new(Node::new(uri, &options, &security)?));
            }
        }
        Ok(Transport {
            nodes: Mutex::new(nodes),
            preferred: AtomicUsize::new(0),
            routes: Mutex::new(HashMap::new()),
            learning: tokio::sync::Mutex::new(Learning::NotYet),
            options,
            security,
        })
    }

    /// An endpoint's URI with this client's scheme.
    fn normalize(&self, endpoint: &str) -> Result<String, ClientError> {
        normalize_for(endpoint, self.security.tls.is_some())
    }

    /// The settings.
    pub(crate) fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Every known endpoint URI, configured ones first, then learned ones.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.lock().iter().map(|n| n.uri.clone()).collect()
    }

    /// The endpoint of the default route.
    pub(crate) fn preferred(&self) -> String {
        self.pick().1.uri.clone()
    }

    /// The endpoint a tenant's next call starts at, when the tenant has a route.
    pub(crate) fn route_of(&self, tenant: &str) -> Option<String> {
        let index = *lock(&self.routes).get(tenant)?;
        self.lock().get(index).map(|n| n.uri.clone())
    }

    /// Endpoints whose region is known, with it.
    pub(crate) fn regions(&self) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .filter_map(|n| lock(&n.region).clone().map(|r| (n.uri.clone(), r)))
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Node>>> {
        lock(&self.nodes)
    }

    fn node(&self, index: usize) -> (usize, Arc<Node>) {
        let nodes = self.lock();
        let index = index % nodes.len();
        (index, Arc::clone(&nodes[index]))
    }

    /// The default route.
    fn pick(&self) -> (usize, Arc<Node>) {
        self.node(self.preferred.load(Ordering::Relaxed))
    }

    /// Where attempt `attempt` of a call on `route` starts.
    async fn start(&self, route: Route<'_>, attempt: u32) -> (usize, Arc<Node>) {
        if let Route::Tenant(tenant) = route {
            let known = lock(&self.routes).get(tenant).copied();
            if let Some(index) = known {
                return self.node(index);
            }
            if attempt == 1 {
                if let Some(found) = self.in_region().await {
                    return found;
                }
            }
        }
        self.pick()
    }

    /// An endpoint of the client's region for a tenant's first call: the default route if
    /// it is in the region, else the first one not failed recently.
    async fn in_region(&self) -> Option<(usize, Arc<Node>)> {
        let region = self.options.region.as_deref()?;
        self.learn_regions().await;
        let (index, default) = self.pick();
        if default.in_region(region) && !default.failed_recently() {
            return Some((index, default));
        }
        let nodes = self.lock();
        nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.in_region(region) && !n.failed_recently())
            .map(|(i, n)| (i, Arc::clone(n)))
    }

    /// Learns the endpoints' regions from the first endpoint whose `Admin.Status` answers
    /// (once; again after [`RELEARN_AFTER`] if none answered).
    async fn learn_regions(&self) {
        let mut state = self.learning.lock().await;
        match *state {
            Learning::Done => return,
            Learning::FailedAt(at) if at.elapsed() < RELEARN_AFTER => return,
            Learning::NotYet | Learning::FailedAt(_) => {}
        }
        let wait = self
            .options
            .request_timeout
            .min(self.options.connect_timeout.saturating_mul(2));
        let mut asks = JoinSet::new();
        for node in self.lock().iter().cloned() {
            asks.spawn(async move {
                let mut admin = AdminClient::new(node.channel());
                let answer = tokio::time::timeout(wait, admin.status(v1::StatusRequest {})).await;
                (node, answer)
            });
        }
        while let Some(joined) = asks.join_next().await {
            if let Ok((node, Ok(Ok(response)))) = joined {
                self.note_regions(&node, response.into_inner());
                *state = Learning::Done;
                return;
            }
        }
        tracing::debug!("no endpoint told its region; using the default route");
        *state = Learning::FailedAt(Instant::now());
    }

    /// Records the regions a `Status` answer tells: the answering node's own, and each
    /// member's; members of the client's region that are not known yet are added.
    fn note_regions(&self, answered: &Node, status: v1::StatusResponse) {
        if !status.region.is_empty() {
            answered.set_region(&status.region);
        }
        let mine = self.options.region.as_deref();
        let mut nodes = self.lock();
        for member in status.membership {
            if member.region.is_empty() {
                continue;
            }
            let Ok(uri) = self.normalize(&member.api_addr) else {
                continue;
            };
            match nodes.iter().find(|n| n.uri == uri) {
                Some(node) => node.set_region(&member.region),
                None if mine == Some(member.region.as_str()) && nodes.len() < MAX_ENDPOINTS => {
                    if let Ok(node) = Node::new(uri, &self.options, &self.security) {
                        node.set_region(&member.region);
                        nodes.push(Arc::new(node));
                    }
                }
                None => {}
            }
        }
    }

    /// Moves the default route past `index`, unless another call already moved it.
    fn rotate_from(&self, index: usize) {
        let len = self.lock().len();
        let _ = self.preferred.compare_exchange(
            index,
            (index + 1) % len,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The index of the endpoint at `addr`, adding it when new. `None` when the address
    /// is unusable or the set is full.
    fn index_of(&self, addr: &str) -> Option<usize> {
        let uri = self.normalize(addr).ok()?;
        let mut nodes = self.lock();
        if let Some(index) = nodes.iter().position(|n| n.uri == uri) {
            return Some(index);
        }
        if nodes.len() >= MAX_ENDPOINTS {
            return None;
        }
        let node = Node::new(uri, &self.options, &self.security).ok()?;
        nodes.push(Arc::new(node));
        Some(nodes.len() - 1)
    }

    /// Prefers the leader at `addr` (adding it to the set when new) on the default route
    /// and, for a tenant's call, on the tenant's route. Returns false when the address is
    /// unusable or the set is full.
    fn prefer_leader(&self, route: Route<'_>, addr: &str) -> bool {
        let Some(index) = self.index_of(addr) else {
            return false;
        };
        self.preferred.store(index, Ordering::Relaxed);
        self.set_route(route, index);
        true
    }

    fn set_route(&self, route: Route<'_>, index: usize) {
        let Route::Tenant(tenant) = route else {
            return;
        };
        let mut routes = lock(&self.routes);
        if routes.get(tenant) == Some(&index) {
            return;
        }
        if routes.len() >= MAX_ROUTES && !routes.contains_key(tenant) {
            routes.clear();
        }
        routes.insert(tenant.to_owned(), index);
    }

    /// Forgets the tenant's route if it still points at `index` (any index when `None`).
    fn forget_route(&self, route: Route<'_>, index: Option<usize>) {
        if let Route::Tenant(tenant) = route {
            let mut routes = lock(&self.routes);
            if index.is_none() || routes.get(tenant) == index.as_ref() {
                routes.remove(tenant);
            }
        }
    }

    /// After a failure at `index`: the default route moves on, the tenant's route is
    /// forgotten if it pointed there.
    fn move_on(&self, route: Route<'_>, index: usize) {
        self.rotate_from(index);
        self.forget_route(route, Some(index));
    }

    /// Runs `rpc` on the route's endpoint with the retry policy, re-sending the same request
    /// (the closure must build the same request every time).
    pub(crate) async fn call<T, F, Fut>(
        &self,
        kind: Kind,
        route: Route<'_>,
        timeout: Duration,
        rpc: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(Connection) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.run(
            kind,
            timeout,
            Target::Routed(route),
            &self.options.retry,
            |node| rpc(node.channel()),
        )
        .await
    }

    /// Runs one claim or worker command like [`Transport::call`], coalesced with concurrent
    /// ones to the same endpoint (see [`Coalescer`]). Answers the call's reply.
    pub(crate) async fn call_coalesced(
        &self,
        route: Route<'_>,
        timeout: Duration,
        call: Call,
    ) -> Result<Reply, ClientError> {
        self.run(
            Kind::Write,
            timeout,
            Target::Routed(route),
            &self.options.retry,
            |node| {
                let (channel, coalescer) = (node.channel(), Arc::clone(&node.coalescer));
                let call = call.clone();
                async move { coalescer.call(&channel, call).await }
            },
        )
        .await
    }

    /// One attempt on one endpoint only (no routing, no retry), e.g. a node's status: the
    /// answer is about that node, now.
    pub(crate) async fn call_on<T, F, Fut>(
        &self,
        endpoint: &str,
        timeout: Duration,
        rpc: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(Connection) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let uri = self.normalize(endpoint)?;
        let known = self.lock().iter().find(|n| n.uri == uri).cloned();
        let node = match known {
            Some(node) => node,
            None => Arc::new(Node::new(uri, &self.options, &self.security)?),
        };
        self.run(
            Kind::Read,
            timeout,
            Target::Pinned(node),
            &RetryPolicy::no_retry(),
            |node| rpc(node.channel()),
        )
        .await
    }

    async fn run<T, F, Fut>(
        &self,
        kind: Kind,
        timeout: Duration,
        target: Target<'_>,
        policy: &RetryPolicy,
        rpc: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(&Node) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = Instant::now() + policy.total_budget;
        let mut maybe_sent = false;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let (index, node, route) = match &target {
                Target::Pinned(node) => (0, Arc::clone(node), None),
                Target::Routed(route) => {
                    let (index, node) = self.start(*route, attempt).await;
                    (index, node, Some(*route))
                }
            };
            let failure = match tokio::time::timeout(timeout, rpc(&node)).await {
                Ok(Ok(response)) => {
                    if let Some(route) = route {
                        node.reached(true);
                        self.follow_answer(route, &response, index, &node);
                    }
                    return Ok(response.into_inner());
                }
                Ok(Err(status)) => classify(&status),
                Err(_) => Failure::MaybeSent(format!("no answer within {timeout:?}"), None),
            };
            tracing::debug!(endpoint = %node.uri, attempt, ?failure, "idem call failed");
            if route.is_some() {
                let unreachable = matches!(failure, Failure::NotSent(_) | Failure::MaybeSent(..));
                node.reached(!unreachable);
            }
            let mut later = None;
            let (wait, message) = match failure {
                Failure::Final(error) => return Err(error),
                Failure::NotSent(message) => {
                    if let Some(route) = route {
                        self.move_on(route, index);
                    }
                    (jittered(policy, attempt), message)
                }
                Failure::MaybeSent(message, hint) => {
                    // A leader cut off from its quorum keeps answering OUTCOME_UNKNOWN
                    // (openraft does not step it down): let another node redirect us.
                    maybe_sent = true;
                    if let Some(route) = route {
                        self.move_on(route, index);
                    }
                    (
                        jittered(policy, attempt).max(hint.unwrap_or_default()),
                        message,
                    )
                }
                Failure::NotLeader(hint, message) => {
                    let moved = route.is_some_and(|route| {
                        hint.as_deref()
                            .is_some_and(|addr| self.redirect(route, addr, &node))
                    });
                    if let (false, Some(route)) = (moved, route) {
                        self.move_on(route, index);
                    }
                    let wait = if moved {
                        Duration::ZERO
                    } else {
                        jittered(policy, attempt)
                    };
                    (wait, message)
                }
                Failure::Later(error) => {
                    // The tenant's home is changing: its route may be stale.
                    if let Some(route) = route {
                        self.forget_route(route, None);
                    }
                    let wait =
                        jittered(policy, attempt).max(error.retry_after().unwrap_or_default());
                    let message = error.to_string();
                    later = Some(error);
                    (wait, message)
                }
            };
            if attempt >= policy.max_attempts || Instant::now() + wait > deadline {
                return Err(match later {
                    Some(error) if !(kind == Kind::Write && maybe_sent) => error,
                    _ => exhausted(kind, maybe_sent, attempt, &node.uri, message),
                });
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Learns from an answer: a follower that forwarded the call names the leader in
    /// `leader-addr` (preferred from now on, on the default route and the tenant's); a node
    /// that served a tenant's call itself becomes the tenant's route.
    fn follow_answer<T>(
        &self,
        route: Route<'_>,
        response: &tonic::Response<T>,
        index: usize,
        from: &Node,
    ) {
        let leader = response
            .metadata()
            .get(reason::LEADER_ADDR_METADATA_KEY)
            .and_then(|v| v.to_str().ok());
        let redirected = leader.is_some_and(|addr| self.redirect(route, addr, from));
        if !redirected {
            self.set_route(route, index);
        }
    }

    /// Follows a leader hint; true when it names another node than `from`.
    fn redirect(&self, route: Route<'_>, addr: &str, from: &Node) -> bool {
        let other = self.normalize(addr).is_ok_and(|uri| uri != from.uri);
        other && self.prefer_leader(route, addr)
    }
}

/// Where a call goes: routed, or to one given endpoint.
enum Target<'a> {
    Routed(Route<'a>),
    Pinned(Arc<Node>),
}

/// The error of a call whose attempts ran out.
fn exhausted(kind: Kind, maybe_sent: bool, attempts: u32, uri: &str, last: String) -> ClientError {
    let message = format!("{attempts} attempt(s), last on {uri}: {last}");
    if kind == Kind::Write && maybe_sent {
        ClientError::OutcomeUnknown { message }
    } else {
        ClientError::Unavailable { message }
    }
}

/// The backoff of `retry` with jitter: a uniform wait in `[backoff/2, backoff]`, so that
/// clients that failed together do not retry together.
fn jittered(policy: &RetryPolicy, retry: u32) -> Duration {
    let backoff = policy.backoff(retry);
    let random = RandomState::new().build_hasher().finish();
    let half = backoff / 2;
    let extra_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(random.checked_rem(extra_nanos.max(1)).unwrap_or(0))
}

/// What a failed status means (see the module table).
fn classify(status: &Status) -> Failure {
    let message = status.message().to_owned();
    match status::reason_of(status).as_deref() {
        Some(reason::NOT_LEADER) => Failure::NotLeader(status::leader_hint(status).1, message),
        Some(reason::UNAVAILABLE_OUTCOME_UNKNOWN) => {
            Failure::MaybeSent(message, status::retry_after(status))
        }
        Some(reason::WRONG_GROUP) => Failure::Later(definite(reason::WRONG_GROUP, status)),
        Some(reason) => Failure::Final(definite(reason, status)),
        None if is_connect_error(status) => Failure::NotSent(message),
        None if is_transport_error(status) => Failure::MaybeSent(message, None),
        None => Failure::Final(ClientError::Rejected {
            reason: code_name(status.code()).to_owned(),
            code: status.code(),
            message,
            retry_after: status::retry_after(status),
        }),
    }
}

/// The error for a definite answer with an idem reason.
fn definite(reason: &str, status: &Status) -> ClientError {
    let message = status.message().to_owned();
    if reason == reason::NOT_FOUND {
        ClientError::NotFound { message }
    } else if status.code() == Code::InvalidArgument {
        ClientError::invalid(reason, message)
    } else {
        ClientError::Rejected {
            reason: reason.to_owned(),
            code: status.code(),
            message,
            retry_after: status::retry_after(status),
        }
    }
}

/// True when the status comes from failing to open a connection: the request was not sent.
fn is_connect_error(status: &Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// True for statuses without an idem reason that a broken or overloaded connection
/// produces (the request may or may not have reached the server).
fn is_transport_error(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded => true,
        // h2 protocol errors (e.g. a stream reset without a status) surface as INTERNAL
        // with the h2 error as source; a server's own INTERNAL carries a reason.
        Code::Internal => status.source().is_some(),
        _ => false,
    }
}

/// The canonical upper-case name of a gRPC code, e.g. `UNIMPLEMENTED`.
pub(crate) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_client_speaks_https_to_every_endpoint() {
        assert_eq!(normalize_for("a:1", true).unwrap(), "https://a:1");
        assert_eq!(normalize_for("https://a:1/", true).unwrap(), "https://a:1");
        assert!(normalize_for("http://a:1", true).is_err());
    }

    #[test]
    fn endpoints_are_normalized() {
        assert_eq!(
            normalize("127.0.0.1:7400").unwrap(),
            "http://127.0.0.1:7400"
        );
        assert_eq!(normalize("http://a:1/").unwrap(), "http://a:1");
        assert_eq!(normalize(" b:2 ").unwrap(), "http://b:2");
        assert!(normalize("").is_err());
        assert!(normalize("https://a:1").is_err());
        let t = Transport::new(
            &["a:1".into(), "http://a:1".into(), "b:2".into()],
            ClientOptions::default(),
        )
        .unwrap();
        assert_eq!(t.endpoints(), ["http://a:1", "http://b:2"]);
        assert!(Transport::new(&[], ClientOptions::default()).is_err());
    }

    #[test]
    fn leader_hints_are_learned_and_rotation_wraps() {
        let t = Transport::new(&["a:1".into(), "b:2".into()], ClientOptions::default()).unwrap();
        assert_eq!(t.preferred(), "http://a:1");
        t.rotate_from(0);
        assert_eq!(t.preferred(), "http://b:2");
        t.rotate_from(1);
        assert_eq!(t.preferred(), "http://a:1");
        // A stale rotation (someone else already moved) changes nothing.
        t.rotate_from(1);
        assert_eq!(t.preferred(), "http://a:1");
        assert!(t.prefer_leader(Route::Default, "c:3"));
        assert_eq!(t.preferred(), "http://c:3");
        assert_eq!(t.endpoints().len(), 3);
        assert!(t.prefer_leader(Route::Default, "b:2"));
        assert_eq!(t.preferred(), "http://b:2");
        assert_eq!(t.endpoints().len(), 3);
    }

    #[test]
    fn tenant_routes_are_learned_forgotten_and_bounded() {
        let t = Transport::new(&["a:1".into(), "b:2".into()], ClientOptions::default()).unwrap();
        let acme = Route::Tenant("acme");
        assert_eq!(t.route_of("acme"), None);
        // A leader named for acme becomes acme's route and the default.
        assert!(t.prefer_leader(acme, "c:3"));
        assert_eq!(t.route_of("acme").as_deref(), Some("http://c:3"));
        assert_eq!(t.preferred(), "http://c:3");
        // Another tenant served by b: only its own route changes.
        t.set_route(Route::Tenant("globex"), 1);
        assert_eq!(t.route_of("globex").as_deref(), Some("http://b:2"));
        assert_eq!(t.route_of("acme").as_deref(), Some("http://c:3"));
        // A failure elsewhere keeps acme's route; a failure at its route forgets it.
        t.move_on(acme, 1);
        assert_eq!(t.route_of("acme").as_deref(), Some("http://c:3"));
        t.move_on(acme, 2);
        assert_eq!(t.route_of("acme"), None);
        assert_eq!(t.preferred(), "http://a:1", "the default moved past c");
        // The default route never gets a tenant entry.
        t.set_route(Route::Default, 0);
        t.forget_route(Route::Tenant("globex"), None);
        assert!(lock(&t.routes).is_empty());
        // The table starts over when full.
        for i in 0..MAX_ROUTES {
            t.set_route(Route::Tenant(&format!("t{i}")), 0);
        }
        assert_eq!(lock(&t.routes).len(), MAX_ROUTES);
        t.set_route(Route::Tenant("t0"), 1);
        assert_eq!(lock(&t.routes).len(), MAX_ROUTES);
        t.set_route(Route::Tenant("one-more"), 1);
        assert_eq!(lock(&t.routes).len(), 1);
    }

    #[test]
    fn regions_are_learned_from_a_status_answer() {
        let options = ClientOptions::default().region("r2");
        let t = Transport::new(&["a:1".into(), "b:2".into()], options).unwrap();
        let member = |id: u64, addr: &str, region: &str| v1::Member {
            id,
            api_addr: addr.into(),
            region: region.into(),
            ..v1::Member::default()
        };
        let answered = Arc::clone(&t.lock()[0]);
        t.note_regions(
            &answered,
            v1::StatusResponse {
                region: "r1".into(),
                membership: vec![
                    member(2, "b:2", "r2"),
                    member(3, "c:3", "r2"),
                    member(4, "d:4", "r3"),
                    member(5, "", "r2"),
                    member(6, "e:5", ""),
                ],
                ..v1::StatusResponse::default()
            },
        );
        // Members of the client's region are added, others only annotated when known.
        assert_eq!(
            t.regions(),
            [
                ("http://a:1".to_owned(), "r1".to_owned()),
                ("http://b:2".to_owned(), "r2".to_owned()),
                ("http://c:3".to_owned(), "r2".to_owned()),
            ]
        );
        assert!(Transport::new(
            &["a:1".into()],
            ClientOptions::default().region("Bad Region")
        )
        .is_err());
    }

    #[test]
    fn statuses_are_classified() {
        let stale = status::error(reason::STALE_FENCE, "stale", []);
        assert!(matches!(
            classify(&stale),
            Failure::Final(ClientError::Rejected { ref reason, .. }) if reason == "STALE_FENCE"
        ));
        let key = status::error(reason::INVALID_KEY, "bad", []);
        assert!(matches!(
            classify(&key),
            Failure::Final(ClientError::InvalidArgument { .. })
        ));
        let missing = status::error(reason::NOT_FOUND, "none", []);
        assert!(matches!(
            classify(&missing),
            Failure::Final(ClientError::NotFound { .. })
        ));
        let failover = status::with_retry_after(
            reason::REGION_FAILOVER,
            "failover",
            Duration::from_millis(700),
        );
        match classify(&failover) {
            Failure::Final(e) => assert_eq!(e.retry_after(), Some(Duration::from_millis(700))),
            other => panic!("{other:?}"),
        }
        let moving = status::error(reason::WRONG_GROUP, "moving", []);
        assert!(matches!(
            classify(&moving),
            Failure::Later(ClientError::Rejected { ref reason, .. }) if reason == "WRONG_GROUP"
        ));
        let unknown = status::error(reason::UNAVAILABLE_OUTCOME_UNKNOWN, "timeout", []);
        assert!(matches!(classify(&unknown), Failure::MaybeSent(..)));
        let leader = status::not_leader(Some(2), Some("n2:7400"));
        assert!(matches!(
            classify(&leader),
            Failure::NotLeader(Some(ref a), _) if a == "n2:7400"
        ));
        assert!(matches!(
            classify(&Status::unavailable("reset")),
            Failure::MaybeSent(..)
        ));
        assert!(matches!(
            classify(&Status::unimplemented("no")),
            Failure::Final(ClientError::Rejected { ref reason, .. }) if reason == "UNIMPLEMENTED"
        ));
    }

    #[test]
    fn jitter_stays_within_half_and_full_backoff() {
        let policy = RetryPolicy::default();
        for retry in 1..10 {
            let full = policy.backoff(retry);
            let wait = jittered(&policy, retry);
            assert!(wait >= full / 2 && wait <= full, "{wait:?} vs {full:?}");
        }
    }

    #[test]
    fn exhausted_writes_after_a_possible_send_are_unknown() {
        let e = exhausted(Kind::Write, true, 3, "http://a:1", "reset".into());
        assert_eq!(e.reason(), "UNAVAILABLE_OUTCOME_UNKNOWN");
        assert!(e.message().contains("3 attempt(s)"));
        assert_eq!(
            exhausted(Kind::Read, true, 3, "u", "x".into()).reason(),
            "UNAVAILABLE"
        );
        assert_eq!(
            exhausted(Kind::Write, false, 3, "u", "x".into()).reason(),
            "UNAVAILABLE"
        );
    }
}
