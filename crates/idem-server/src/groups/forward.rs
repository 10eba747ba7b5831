//! The leader's side of forwarding: the `idem.raft.v1.Forward` service on the Raft port.
//!
//! It lives with the groups because a forwarded request names its group and runs on that
//! group's [`Replica`]; the follower's side is [`crate::replica::forward`].
//!
//! It runs the request *here*, never forwarding again (a node that is no longer the leader
//! answers `NOT_LEADER` and the follower routes again), so a request crosses at most one
//! hop and two nodes with different views of the leader cannot bounce it between them.
//! Errors are data ([`ForwardError`](idem_proto::raft_v1::ForwardError)); gRPC statuses
//! only mean transport trouble or a malformed request. A principal refused by the re-check
//! is data too (`ROLE_FORBIDDEN`/`TENANT_FORBIDDEN`), so the follower answers its client a
//! definite denial rather than an unknown outcome.

use std::sync::Arc;

use idem_core::Command;
use idem_proto::raft_v1 as rpb;
use rpb::forward_reply::Result as Reply;
use rpb::forward_server::{Forward, ForwardServer};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::set::GroupSet;
use crate::auth::{AuthMode, Principal};
use crate::backend::{MembershipChange, RequestError};
use crate::replica::caller;
use crate::replica::forward::to_wire;
use crate::replica::forwardable;
use crate::replica::Replica;
use crate::telemetry::context::forwarded_span;

/// Serves forwarded requests against the [`Replica`] of the group they name.
pub struct ForwardService {
    groups: GroupSet,
    auth: AuthMode,
}

impl ForwardService {
    /// The tonic service over this node's groups; with `auth` on it re-checks the
    /// principal each request carries ([`forwardable::authorize`]).
    pub fn server(groups: GroupSet, auth: AuthMode) -> ForwardServer<ForwardService> {
        ForwardServer::new(ForwardService { groups, auth })
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    /// The backend of the request's group.
    fn backend(&self, request: &rpb::ForwardRequest) -> Result<Arc<Replica>, Status> {
        self.groups
            .get(request.group)
            .map(|group| Arc::clone(group.backend()))
            .ok_or_else(|| Status::not_found(format!("group {} is not served here", request.group)))
    }

    /// The group's backend, the decoded payload and the forwarded principal (`None` when
    /// absent or unreadable).
    fn open<T: serde::de::DeserializeOwned>(
        &self,
        request: Request<rpb::ForwardRequest>,
    ) -> Result<(Arc<Replica>, T, Option<Principal>), Status> {
        let request = request.into_inner();
        let backend = self.backend(&request)?;
        let payload = bincode::deserialize(&request.payload)
            .map_err(|e| Status::invalid_argument(format!("undecodable payload: {e}")))?;
        let principal = request.principal.as_ref().and_then(caller::from_wire);
        Ok((backend, payload, principal))
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Reply, RequestError> {
    bincode::serialize(value)
        .map(|bytes| Reply::Ok(bytes.into()))
        .map_err(|e| RequestError::Internal(format!("encoding the reply: {e}")))
}

fn reply(result: Result<Reply, RequestError>) -> Response<rpb::ForwardReply> {
    let result = result.unwrap_or_else(|error| Reply::Error(to_wire(&error)));
    Response::new(rpb::ForwardReply {
        result: Some(result),
    })
}

#[tonic::async_trait]
impl Forward for ForwardService {
    async fn propose(
        &self,
        request: Request<rpb::ForwardRequest>,
    ) -> Result<Response<rpb::ForwardReply>, Status> {
        let span = forwarded_span("propose", request.get_ref().group, request.metadata());
        let (backend, command, principal): (_, Command, _) = self.open(request)?;
        if let Err(why) = forwardable::check(&command) {
            let name = command.name();
            tracing::warn!(command = name, why, "refused a forwarded command");
            return Err(Status::permission_denied(format!(
                "{name} cannot be forwarded: {why}"
            )));
        }
        if let Err(denied) = forwardable::authorize(self.auth, principal.as_ref(), &command) {
            tracing::warn!(
                command = command.name(),
                reason = denied.reason(),
                "refused a forwarded command's principal"
            );
            return Ok(reply(Err(denied)));
        }
        let outcome = backend.propose_here(command).instrument(span).await;
        Ok(reply(outcome.and_then(|o| encode(&o))))
    }

    async fn read_index(
        &self,
        request: Request<rpb::ForwardRequest>,
    ) -> Result<Response<rpb::ForwardReply>, Status> {
        let span = forwarded_span("read_index", request.get_ref().group, request.metadata());
        let backend = self.backend(request.get_ref())?;
        let index = backend.read_index_here().instrument(span).await;
        Ok(reply(index.map(Reply::Index)))
    }

    async fn membership(
        &self,
        request: Request<rpb::ForwardRequest>,
    ) -> Result<Response<rpb::ForwardReply>, Status> {
        let span = forwarded_span("membership", request.get_ref().group, request.metadata());
        let (backend, change, principal): (_, MembershipChange, _) = self.open(request)?;
        if let Err(denied) =
            forwardable::authorize_membership(self.auth, principal.as_ref(), &change)
        {
            return Ok(reply(Err(denied)));
        }
        let view = backend.membership_here(change).instrument(span).await;
        Ok(reply(view.and_then(|v| encode(&v))))
    }
}
