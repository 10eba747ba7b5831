//! Connection and retry settings.
//!
//! The defaults suit a service calling idem on its request path: a claim that cannot be
//! answered within about 15 s is better reported (as `OUTCOME_UNKNOWN` or `UNAVAILABLE`) than
//! held, since the service's own caller is waiting too. Batch workers and `idemctl` may want a
//! larger budget; tests want tiny backoffs.

use std::time::Duration;

use crate::credentials::BearerToken;
use crate::tls::TlsOptions;

/// Settings of a [`crate::Client`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// Time allowed to open a TCP connection to one endpoint.
    pub connect_timeout: Duration,
    /// Time allowed for one attempt of a call, from sending to the answer. `wait` calls add
    /// their own wait budget to it.
    pub request_timeout: Duration,
    /// Interval of HTTP/2 keep-alive pings on idle connections (also the TCP keep-alive).
    pub keep_alive_interval: Duration,
    /// How long a keep-alive ping may go unanswered before the connection is dropped.
    pub keep_alive_timeout: Duration,
    /// How failed attempts are retried.
    pub retry: RetryPolicy,
    /// The region this client runs in (a region name of the cluster, e.g. `eu-west`). When
    /// set, the first call of a tenant whose leader is not known yet starts at an endpoint of
    /// this region (see [`ClientOptions::region`]).
    pub region: Option<String>,
    /// How concurrent writes to one endpoint are coalesced into batches.
    pub coalescing: Coalescing,
    /// TLS to the nodes (`https://`); `None`: plaintext `http://`.
    pub tls: Option<TlsOptions>,
    /// The bearer token sent with every call (`authorization: Bearer …`).
    pub token: Option<BearerToken>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(10),
            keep_alive_interval: Duration::from_secs(30),
            keep_alive_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            region: None,
            coalescing: Coalescing::default(),
            tls: None,
            token: None,
        }
    }
}

impl ClientOptions {
    /// Speaks `https://` to every endpoint with `tls`.
    #[must_use]
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sends `authorization: Bearer <token>` with every call.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(BearerToken::new(token));
        self
    }

    /// Runs the client in region `name`: a tenant's first call, while the client does not
    /// know the leader of the tenant's group yet, goes to an endpoint of this region rather
    /// than to the last leader seen. In region-affinity mode a tenant homed here is then
    /// decided without leaving the region, and every tenant's later calls go straight to the
    /// leader its calls named (see the crate documentation, "Routing").
    ///
    /// The endpoints' regions are learned once, from the first endpoint that answers
    /// `Admin.Status` (its own region and its membership; members of this region that were
    /// not configured are added to the endpoints). A name that is not a valid region name
    /// makes [`crate::Client::connect`] fail.
    #[must_use]
    pub fn region(mut self, name: impl Into<String>) -> Self {
        self.region = Some(name.into());
        self
    }
}

/// Coalescing of concurrent writes (claims and worker commands) to one endpoint into
/// `Idempotency.Batch` requests (see the crate documentation, "Coalescing").
///
/// A lone call is always sent at once, as the plain unary rpc; calls gather only while
/// `max_in_flight` requests to the endpoint are already under way. Answers and retries are
/// the same as without coalescing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coalescing {
    /// Most calls in one batch (the server accepts up to 256); 1 turns coalescing off.
    pub max_calls: usize,
    /// Most encoded request bytes in one batch, below the server's request limit (2 MiB by
    /// default); a call larger than this is sent alone.
    pub max_bytes: usize,
    /// Most write requests (single calls or batches) under way to one endpoint at once.
    pub max_in_flight: usize,
    /// Longest a sender waits for more calls to join its batch, and only while another
    /// request to the endpoint is under way (so a lone caller never waits): it lets the
    /// tasks that are ready to run add their calls first. Zero sends at once.
    pub linger: Duration,
}

impl Default for Coalescing {
    fn default() -> Self {
        Coalescing {
            max_calls: 64,
            max_bytes: 256 * 1024,
            max_in_flight: 4,
            linger: Duration::from_micros(200),
        }
    }
}

impl Coalescing {
    /// Every call sent on its own, with no limit on calls under way.
    pub fn off() -> Self {
        Coalescing {
            max_calls: 1,
            ..Coalescing::default()
        }
    }
}

/// Retries of transport failures, `NOT_LEADER` redirects and
/// `UNAVAILABLE_OUTCOME_UNKNOWN` answers.
///
/// Every retry re-sends the very same request (same key, holder, fence, fingerprint): the
/// server's commands are idempotent for the same holder and fence, so a retry of a request
/// that did take effect gets the same answer instead of a second effect. Definite answers
/// (`STALE_FENCE`, `INVALID_*`, a claim outcome such as `FINGERPRINT_MISMATCH`) are never
/// retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Most attempts of one call, the first included (1 = no retry). A `NOT_LEADER` redirect
    /// counts as an attempt.
    pub max_attempts: u32,
    /// Wait before the first retry; doubles on every retry.
    pub initial_backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// No new attempt starts after this much time since the call began.
    pub total_budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            total_budget: Duration::from_secs(15),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub fn no_retry() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (1 for the first retry), before jitter:
    /// `initial_backoff * 2^(retry-1)`, at most `max_backoff`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(1), Duration::from_millis(50));
        assert_eq!(policy.backoff(2), Duration::from_millis(100));
        assert_eq!(policy.backoff(5), Duration::from_millis(800));
        assert_eq!(policy.backoff(7), Duration::from_secs(2));
        assert_eq!(policy.backoff(64), Duration::from_secs(2));
        assert_eq!(RetryPolicy::no_retry().max_attempts, 1);
    }
}
