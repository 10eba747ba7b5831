//! The leader's side of forwarding: the `idem.raft.v1.Forward` service on the Raft port.
//!
//! It runs the request *here*, never forwarding again (a node that is no longer the leader
//! answers `NOT_LEADER` and the follower routes again), so a request crosses at most one
//! hop and two nodes with different views of the leader cannot bounce it between them.
//! Errors are data ([`ForwardError`](idem_proto::raft_v1::ForwardError)); gRPC statuses
//! only mean transport trouble or a malformed request.

use std::sync::Arc;

use idem_core::Command;
use idem_proto::raft_v1 as rpb;
use rpb::forward_reply::Result as Reply;
use rpb::forward_server::{Forward, ForwardServer};
use tonic::{Request, Response, Status};

use crate::api::{ApiError, MembershipChange};
use crate::raft::forward::to_wire;
use crate::raft::RaftBackend;

/// Serves forwarded requests against this node's [`RaftBackend`].
pub struct ForwardService {
    backend: Arc<RaftBackend>,
}

impl ForwardService {
    /// The tonic service over `backend`.
    pub fn server(backend: Arc<RaftBackend>) -> ForwardServer<ForwardService> {
        ForwardServer::new(ForwardService { backend })
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }
}

/// Checks the group and decodes the payload.
fn open<T: serde::de::DeserializeOwned>(
    request: Request<rpb::ForwardRequest>,
) -> Result<T, Status> {
    let request = request.into_inner();
    if request.group != idem_raft::GLOBAL_GROUP {
        return Err(Status::not_found(format!(
            "group {} is not served here",
            request.group
        )));
    }
    bincode::deserialize(&request.payload)
        .map_err(|e| Status::invalid_argument(format!("undecodable payload: {e}")))
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Reply, ApiError> {
    bincode::serialize(value)
        .map(|bytes| Reply::Ok(bytes.into()))
        .map_err(|e| ApiError::Internal(format!("encoding the reply: {e}")))
}

fn reply(result: Result<Reply, ApiError>) -> Response<rpb::ForwardReply> {
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
        let command: Command = open(request)?;
        let outcome = self.backend.propose_here(command).await;
        Ok(reply(outcome.and_then(|o| encode(&o))))
    }

    async fn read_index(
        &self,
        request: Request<rpb::ForwardRequest>,
    ) -> Result<Response<rpb::ForwardReply>, Status> {
        if request.get_ref().group != idem_raft::GLOBAL_GROUP {
            return Err(Status::not_found("group is not served here"));
        }
        let index = self.backend.read_index_here().await;
        Ok(reply(index.map(Reply::Index)))
    }

    async fn membership(
        &self,
        request: Request<rpb::ForwardRequest>,
    ) -> Result<Response<rpb::ForwardReply>, Status> {
        let change: MembershipChange = open(request)?;
        let view = self.backend.membership_here(change).await;
        Ok(reply(view.and_then(|v| encode(&v))))
    }
}
