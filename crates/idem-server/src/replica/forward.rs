//! The follower's side of forwarding: calls to the leader's `idem.raft.v1.Forward`
//! service on its Raft address.
//!
//! What matters is telling "certainly not done" from "maybe done". A request that never
//! left (no connection to the leader) or that the leader refused with `NOT_LEADER`
//! (nothing proposed) may be routed again and retried. A transport failure after the
//! request was sent leaves a write indeterminate: it becomes
//! [`RequestError::OutcomeUnknown`], never a definite failure. Reads (read index, listing
//! members) change nothing and are always retried.
//!
//! Channels are connected eagerly and cached per address, so a connect failure is known
//! to have happened before sending. With `[peer_tls]` they are mutual TLS connections
//! ([`idem_raft::PeerTls`]): the leader's Raft port accepts `Forward` only from
//! certificates of the cluster CA. Every call carries the principal of the client call it
//! serves ([`super::caller`]), which the leader re-checks.

use std::collections::HashMap;
use std::error::Error as _;
use std::sync::Mutex;
use std::time::Duration;

use idem_proto::raft_v1 as rpb;
use idem_proto::reason;
use rpb::forward_client::ForwardClient;
use rpb::forward_reply::Result as Reply;
use tonic::transport::{Channel, Endpoint};

use crate::backend::RequestError;

/// Largest forwarded message (a command with its request body, an outcome with its result).
const MAX_MESSAGE: usize = 64 << 20;

/// Which `Forward` RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardKind {
    /// A write command.
    Propose,
    /// A read-index barrier.
    ReadIndex,
    /// A membership call.
    Membership,
}

impl ForwardKind {
    /// The `kind` label of `idem_forwarded_total`.
    pub fn label(self) -> &'static str {
        match self {
            ForwardKind::Propose => "propose",
            ForwardKind::ReadIndex => "read_index",
            ForwardKind::Membership => "membership",
        }
    }
}

/// Why a forwarded call produced no reply.
#[derive(Debug)]
pub enum ForwardFailure {
    /// Nothing was done on the leader (not sent, or refused as `NOT_LEADER`): route again.
    Retry(String),
    /// The answer to return: the leader's error, or an indeterminate outcome.
    Final(RequestError),
}

/// Cached connections to leaders' Raft addresses.
#[derive(Default)]
pub struct Forwarder {
    channels: Mutex<HashMap<String, Channel>>,
    tls: Option<idem_raft::PeerTls>,
}

impl Forwarder {
    /// A forwarder dialling leaders over `tls` (mutual TLS), or plaintext without it.
    pub fn new(tls: Option<idem_raft::PeerTls>) -> Self {
        Forwarder {
            channels: Mutex::default(),
            tls,
        }
    }

    /// Sends `payload` as `kind` for `group` to the node at `raft_addr`, bounded by
    /// `timeout`.
    /// `idempotent`: a failure after sending may be retried (reads).
    #[allow(clippy::too_many_arguments)]
    pub async fn call(
        &self,
        kind: ForwardKind,
        group: u64,
        raft_addr: &str,
        payload: Vec<u8>,
        timeout: Duration,
        idempotent: bool,
    ) -> Result<Reply, ForwardFailure> {
        let channel = self.channel(raft_addr, timeout).await?;
        let mut client = ForwardClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let mut request = tonic::Request::new(rpb::ForwardRequest {
            group,
            payload: payload.into(),
            principal: super::caller::current()
                .as_ref()
                .map(super::caller::to_wire),
        });
        request.set_timeout(timeout);
        crate::telemetry::context::inject(request.metadata_mut());
        let answer = match kind {
            ForwardKind::Propose => client.propose(request).await,
            ForwardKind::ReadIndex => client.read_index(request).await,
            ForwardKind::Membership => client.membership(request).await,
        };
        match answer {
            Ok(reply) => match reply.into_inner().result {
                Some(Reply::Error(error)) => Err(from_wire(error)),
                Some(reply) => Ok(reply),
                None => Err(ForwardFailure::Final(RequestError::Internal(format!(
                    "the leader at {raft_addr} sent an empty reply"
                )))),
            },
            Err(status) => {
                self.forget(raft_addr);
                let why = format!(
                    "forwarding to the leader at {raft_addr}: {}",
                    status.message()
                );
                if idempotent || is_connect_error(&status) {
                    Err(ForwardFailure::Retry(why))
                } else {
                    Err(ForwardFailure::Final(RequestError::OutcomeUnknown(
                        format!(
                            "{why}; it may or may not have been applied; retry with the same key"
                        ),
                    )))
                }
            }
        }
    }

    async fn channel(&self, raft_addr: &str, timeout: Duration) -> Result<Channel, ForwardFailure> {
        if let Some(channel) = self.lock().get(raft_addr) {
            return Ok(channel.clone());
        }
        let retry = |why: String| ForwardFailure::Retry(format!("leader at {raft_addr}: {why}"));
        let endpoint = Endpoint::from_shared(format!("http://{raft_addr}"))
            .map_err(|e| retry(e.to_string()))?
            .connect_timeout(timeout)
            .tcp_nodelay(true);
        let connect = async {
            match &self.tls {
                Some(tls) => tls.connect(&endpoint).await,
                None => endpoint.connect().await,
            }
        };
        let channel = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| retry("connect timed out".into()))?
            .map_err(|e| retry(e.to_string()))?;
        self.lock().insert(raft_addr.to_owned(), channel.clone());
        Ok(channel)
    }

    fn forget(&self, raft_addr: &str) {
        self.lock().remove(raft_addr);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The wire form of an error the leader answers.
pub fn to_wire(error: &RequestError) -> rpb::ForwardError {
    let leader_id = match error {
        RequestError::NotLeader { leader_id, .. } => leader_id.unwrap_or(0),
        _ => 0,
    };
    rpb::ForwardError {
        reason: error.reason().to_owned(),
        message: error.to_string(),
        leader_id,
    }
}

/// What an error answered by the leader means here.
fn from_wire(error: rpb::ForwardError) -> ForwardFailure {
    let rpb::ForwardError {
        reason: why,
        message,
        ..
    } = error;
    let known = reason::ALL.iter().find(|(r, _)| *r == why).map(|(r, _)| *r);
    ForwardFailure::Final(match known {
        // Nothing was done there; a stopped leader is replaced by an election.
        Some(reason::NOT_LEADER | reason::NODE_STOPPED) => return ForwardFailure::Retry(message),
        Some(reason::UNAVAILABLE_OUTCOME_UNKNOWN) => RequestError::OutcomeUnknown(message),
        Some(reason::INTERNAL) => RequestError::Internal(format!("on the leader: {message}")),
        Some(known) => RequestError::refused(known, message),
        None => RequestError::Internal(format!("the leader answered {why}: {message}")),
    })
}

/// True when the status comes from failing to open a connection: nothing was sent.
fn is_connect_error(status: &tonic::Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        source = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_errors_round_trip_by_reason() {
        let unknown = RequestError::OutcomeUnknown("write timed out".into());
        assert!(matches!(
            from_wire(to_wire(&unknown)),
            ForwardFailure::Final(RequestError::OutcomeUnknown(_))
        ));
        let not_leader = RequestError::NotLeader {
            leader_id: Some(3),
            leader_addr: None,
        };
        assert_eq!(to_wire(&not_leader).leader_id, 3);
        assert!(matches!(
            from_wire(to_wire(&not_leader)),
            ForwardFailure::Retry(_)
        ));
        let refused = RequestError::refused(reason::WRONG_STATE, "last voter");
        match from_wire(to_wire(&refused)) {
            ForwardFailure::Final(error) => assert_eq!(error, refused),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_unreachable_leader_is_retried_not_unknown() {
        let forwarder = Forwarder::default();
        let failure = forwarder
            .call(
                ForwardKind::Propose,
                0,
                "127.0.0.1:1",
                Vec::new(),
                Duration::from_millis(200),
                false,
            )
            .await
            .unwrap_err();
        assert!(matches!(failure, ForwardFailure::Retry(_)), "{failure:?}");
    }
}
