//! The **single-node network**: the Raft network of a one-voter group, which has no peer.
//!
//! openraft needs a [`RaftNetworkFactory`] even when the membership holds only this node, and
//! a single voter never sends an RPC: it commits alone. This is not a stub that pretends to
//! work. Every RPC fails with [`Unreachable`] naming the target, so if a peer ever appears in
//! the membership (a misconfigured data directory, a membership change before node-to-node
//! networking exists), openraft backs off and the logs say exactly why, instead of messages
//! being dropped silently. Pre-vote is refused too (openraft's default would grant it).
//!
//! The replicated cluster replaces this factory with the gRPC transport of `raft.proto`
//! listening on `raft_addr`; nothing else in the node changes.

use std::future::Future;

use idem_store::{NodeInfo, Snapshot, SnapshotData, TypeConfig, Vote};
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, RaftNetworkFactory, RaftNetworkV2};

/// Creates a [`NoPeer`] for every target: a one-voter group has nobody to talk to.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleNodeNetwork;

/// The "connection" to a peer of a single-node network: every RPC is [`Unreachable`].
#[derive(Clone, Debug)]
pub struct NoPeer {
    target: u64,
    addr: String,
}

impl NoPeer {
    fn unreachable(&self, rpc: &str) -> Unreachable<TypeConfig> {
        tracing::warn!(
            target_node = self.target,
            addr = %self.addr,
            rpc,
            "single-node network cannot reach another node"
        );
        Unreachable::from_string(format!(
            "{rpc} to node {} ({}): this node runs the single-node network and has no transport to peers",
            self.target, self.addr
        ))
    }
}

impl RaftNetworkFactory<TypeConfig> for SingleNodeNetwork {
    type Network = NoPeer;

    async fn new_client(&mut self, target: u64, node: &NodeInfo) -> NoPeer {
        NoPeer {
            target,
            addr: node.raft_addr.clone(),
        }
    }
}

impl RaftNetworkV2<TypeConfig> for NoPeer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(self.unreachable("append_entries")))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(self.unreachable("vote")))
    }

    async fn pre_vote(
        &mut self,
        _rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(self.unreachable("pre_vote")))
    }

    async fn full_snapshot(
        &mut self,
        _vote: Vote,
        _snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        Err(StreamingError::Unreachable(
            self.unreachable("full_snapshot"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_rpc_is_unreachable() {
        let mut factory = SingleNodeNetwork;
        let node = NodeInfo {
            raft_addr: "10.0.0.2:7410".into(),
            ..NodeInfo::default()
        };
        let mut peer = factory.new_client(2, &node).await;
        let option = RPCOption::new(std::time::Duration::from_secs(1));
        let vote = VoteRequest::new(Vote::new(1, 1), None);
        let err = peer.vote(vote.clone(), option.clone()).await.unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
        assert!(err.to_string().contains("node 2 (10.0.0.2:7410)"), "{err}");
        let err = peer.pre_vote(vote, option).await.unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
    }
}
