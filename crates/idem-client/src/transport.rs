//! Endpoints, routing and the retry loop shared by every call.
//!
//! Any idem node accepts any request, but writes are cheapest at the Raft leader: a follower
//! forwards them (one more hop), or, when it cannot reach a leader, answers `NOT_LEADER`
//! with the leader's public address (`leader-addr`) when it knows one. The transport
//! therefore keeps one *preferred* endpoint, starts every call there, moves to the hinted
//! leader on `NOT_LEADER` (adding its address to the endpoint set if it was not configured)
//! and to the next endpoint, round-robin, when a node cannot be reached. A follower that
//! forwarded a call to the leader says so in the `leader-addr` response metadata: the
//! transport then prefers that leader too.
//!
//! Failures are classified by what they say about the request:
//!
//! | failure | sent? | what the loop does |
//! |---|---|---|
//! | connect error (refused, unreachable, connect timeout) | no | next endpoint, back off |
//! | `NOT_LEADER` | no (definite) | hinted leader at once, else next endpoint |
//! | `UNAVAILABLE_OUTCOME_UNKNOWN`, reset, timeout, `UNAVAILABLE` without reason | maybe | next endpoint, back off, re-send the same request |
//! | any other idem reason | yes, refused | return it, never retried |
//!
//! When the attempts or the time budget run out, a write that may have been sent is reported
//! as [`ClientError::OutcomeUnknown`], anything else as [`ClientError::Unavailable`].

use std::collections::hash_map::RandomState;
use std::error::Error as _;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use idem_proto::{reason, status};
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::error::ClientError;
use crate::options::{ClientOptions, RetryPolicy};

/// Most endpoints kept (configured ones plus leader hints), so that a misbehaving server
/// cannot make the set grow without bound.
const MAX_ENDPOINTS: usize = 64;

/// Whether a call changes state: decides how an exhausted retry is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A read: exhausting the retries is `UNAVAILABLE`.
    Read,
    /// A write: exhausting the retries after a possible send is `OUTCOME_UNKNOWN`.
    Write,
}

/// The scheme-qualified URI of an endpoint: `http://` is added when no scheme is given.
pub(crate) fn normalize(endpoint: &str) -> Result<String, ClientError> {
    let endpoint = endpoint.trim().trim_end_matches('/');
    if endpoint.is_empty() {
        return Err(ClientError::invalid(
            reason::INVALID_ARGUMENT,
            "empty endpoint",
        ));
    }
    if endpoint.starts_with("https://") {
        return Err(ClientError::invalid(
            reason::INVALID_ARGUMENT,
            format!("{endpoint}: TLS is not supported yet; use http://"),
        ));
    }
    if endpoint.starts_with("http://") {
        Ok(endpoint.to_owned())
    } else {
        Ok(format!("http://{endpoint}"))
    }
}

/// One endpoint: its address and its channel, created on first use (inside the runtime).
struct Node {
    uri: String,
    endpoint: Endpoint,
    channel: OnceLock<Channel>,
}

impl Node {
    fn new(uri: String, options: &ClientOptions) -> Result<Self, ClientError> {
        let endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| ClientError::invalid(reason::INVALID_ARGUMENT, format!("{uri}: {e}")))?
            .connect_timeout(options.connect_timeout)
            .tcp_keepalive(Some(options.keep_alive_interval))
            .http2_keep_alive_interval(options.keep_alive_interval)
            .keep_alive_timeout(options.keep_alive_timeout)
            .keep_alive_while_idle(true);
        Ok(Node {
            uri,
            endpoint,
            channel: OnceLock::new(),
        })
    }

    fn channel(&self) -> Channel {
        self.channel
            .get_or_init(|| self.endpoint.connect_lazy())
            .clone()
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
    /// A definite answer: returned to the caller as is.
    Final(ClientError),
}

/// The endpoint set, the preferred endpoint and the retry loop.
pub(crate) struct Transport {
    nodes: Mutex<Vec<Arc<Node>>>,
    preferred: AtomicUsize,
    options: ClientOptions,
}

impl Transport {
    /// A transport over `endpoints` (at least one); nothing is connected yet.
    pub(crate) fn new(endpoints: &[String], options: ClientOptions) -> Result<Self, ClientError> {
        if endpoints.is_empty() {
            return Err(ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "at least one endpoint is required",
            ));
        }
        let mut nodes: Vec<Arc<Node>> = Vec::new();
        for endpoint in endpoints {
            let uri = normalize(endpoint)?;
            if !nodes.iter().any(|n| n.uri == uri) {
                nodes.push(Arc::new(Node::new(uri, &options)?));
            }
        }
        Ok(Transport {
            nodes: Mutex::new(nodes),
            preferred: AtomicUsize::new(0),
            options,
        })
    }

    /// The settings.
    pub(crate) fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Every known endpoint URI, configured ones first, then learned leaders.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.lock().iter().map(|n| n.uri.clone()).collect()
    }

    /// The endpoint the next call starts with.
    pub(crate) fn preferred(&self) -> String {
        self.pick().1.uri.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Node>>> {
        // The list is only ever appended to: a panic elsewhere cannot leave it inconsistent.
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pick(&self) -> (usize, Arc<Node>) {
        let nodes = self.lock();
        let index = self.preferred.load(Ordering::Relaxed) % nodes.len();
        (index, Arc::clone(&nodes[index]))
    }

    /// Moves the preference past `index`, unless another call already moved it.
    fn rotate_from(&self, index: usize) {
        let len = self.lock().len();
        let _ = self.preferred.compare_exchange(
            index,
            (index + 1) % len,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Prefers the leader at `addr` (adding it to the set when new). Returns false when the
    /// address is unusable or the set is full.
    fn prefer_leader(&self, addr: &str) -> bool {
        let Ok(uri) = normalize(addr) else {
            return false;
        };
        let mut nodes = self.lock();
        let index = match nodes.iter().position(|n| n.uri == uri) {
            Some(index) => index,
            None if nodes.len() < MAX_ENDPOINTS => match Node::new(uri, &self.options) {
                Ok(node) => {
                    nodes.push(Arc::new(node));
                    nodes.len() - 1
                }
                Err(_) => return false,
            },
            None => return false,
        };
        self.preferred.store(index, Ordering::Relaxed);
        true
    }

    /// Runs `rpc` on the preferred endpoint with the retry policy, re-sending the same request
    /// (the closure must build the same request every time).
    pub(crate) async fn call<T, F, Fut>(
        &self,
        kind: Kind,
        timeout: Duration,
        rpc: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.run(kind, timeout, None, &self.options.retry, rpc)
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
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let uri = normalize(endpoint)?;
        let known = self.lock().iter().find(|n| n.uri == uri).cloned();
        let node = match known {
            Some(node) => node,
            None => Arc::new(Node::new(uri, &self.options)?),
        };
        self.run(
            Kind::Read,
            timeout,
            Some(node),
            &RetryPolicy::no_retry(),
            rpc,
        )
        .await
    }

    async fn run<T, F, Fut>(
        &self,
        kind: Kind,
        timeout: Duration,
        pinned: Option<Arc<Node>>,
        policy: &RetryPolicy,
        rpc: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = Instant::now() + policy.total_budget;
        let mut maybe_sent = false;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let (index, node) = match &pinned {
                Some(node) => (0, Arc::clone(node)),
                None => self.pick(),
            };
            let failure = match tokio::time::timeout(timeout, rpc(node.channel())).await {
                Ok(Ok(response)) => {
                    if pinned.is_none() {
                        self.follow_forwarding(&response, &node);
                    }
                    return Ok(response.into_inner());
                }
                Ok(Err(status)) => classify(&status),
                Err(_) => Failure::MaybeSent(format!("no answer within {timeout:?}"), None),
            };
            tracing::debug!(endpoint = %node.uri, attempt, ?failure, "idem call failed");
            let routed = pinned.is_none();
            let (wait, message) = match failure {
                Failure::Final(error) => return Err(error),
                Failure::NotSent(message) => {
                    if routed {
                        self.rotate_from(index);
                    }
                    (jittered(policy, attempt), message)
                }
                Failure::MaybeSent(message, hint) => {
                    // A leader cut off from its quorum keeps answering OUTCOME_UNKNOWN
                    // (openraft does not step it down): let another node redirect us.
                    maybe_sent = true;
                    if routed {
                        self.rotate_from(index);
                    }
                    (
                        jittered(policy, attempt).max(hint.unwrap_or_default()),
                        message,
                    )
                }
                Failure::NotLeader(hint, message) => {
                    let moved = routed
                        && hint
                            .as_deref()
                            .is_some_and(|addr| self.redirect(addr, &node));
                    if !moved && routed {
                        self.rotate_from(index);
                    }
                    let wait = if moved {
                        Duration::ZERO
                    } else {
                        jittered(policy, attempt)
                    };
                    (wait, message)
                }
            };
            if attempt >= policy.max_attempts || Instant::now() + wait > deadline {
                return Err(exhausted(kind, maybe_sent, attempt, &node.uri, message));
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// A follower that forwarded the call to the leader names it in `leader-addr`: prefer
    /// the leader for the next calls.
    fn follow_forwarding<T>(&self, response: &tonic::Response<T>, from: &Node) {
        let leader = response
            .metadata()
            .get(reason::LEADER_ADDR_METADATA_KEY)
            .and_then(|v| v.to_str().ok());
        if let Some(addr) = leader {
            self.redirect(addr, from);
        }
    }

    /// Follows a leader hint; true when it names another node than `from`.
    fn redirect(&self, addr: &str, from: &Node) -> bool {
        let other = normalize(addr).is_ok_and(|uri| uri != from.uri);
        other && self.prefer_leader(addr)
    }
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
        assert!(t.prefer_leader("c:3"));
        assert_eq!(t.preferred(), "http://c:3");
        assert_eq!(t.endpoints().len(), 3);
        assert!(t.prefer_leader("b:2"));
        assert_eq!(t.preferred(), "http://b:2");
        assert_eq!(t.endpoints().len(), 3);
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
