//! A real openraft node on these stores: initialize, write claims, read linearizably,
//! snapshot and purge the log, restart, and keep serving.

use crate::common;

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use common::{dump, reference, workload};
use idem_core::{ClaimKind, Outcome};
use idem_store::{NodeInfo, Raft, SnapshotData, StateReader, TypeConfig};
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{Config, ReadPolicy, SnapshotPolicy};
use tempfile::TempDir;

/// A network with no peers: a single-node cluster never sends anything.
struct NoNetwork;

/// The client to a peer that does not exist.
struct NoPeer;

fn unreachable() -> Unreachable<TypeConfig> {
    Unreachable::new(&io::Error::other("single-node test has no peers"))
}

impl RaftNetworkFactory<TypeConfig> for NoNetwork {
    type Network = NoPeer;

    async fn new_client(&mut self, _target: u64, _node: &NodeInfo) -> NoPeer {
        NoPeer
    }
}

impl RaftNetworkV2<TypeConfig> for NoPeer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(unreachable()))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(unreachable()))
    }

    async fn full_snapshot(
        &mut self,
        _vote: idem_store::Vote,
        _snapshot: idem_store::Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        Err(StreamingError::Unreachable(unreachable()))
    }
}

fn config() -> Arc<Config> {
    let config = Config {
        cluster_name: "idem-store-test".into(),
        snapshot_policy: SnapshotPolicy::LogsSinceLast(10),
        max_in_snapshot_log_to_keep: 0,
        ..Default::default()
    };
    Arc::new(config.validate().unwrap())
}

async fn start(dir: &TempDir) -> (Raft, StateReader) {
    let (log, sm, reader) = idem_store::open(dir.path()).unwrap();
    let raft = Raft::new(1, config(), NoNetwork, log, sm).await.unwrap();
    (raft, reader)
}

async fn wait_leader(raft: &Raft) {
    raft.wait(Some(Duration::from_secs(10)))
        .current_leader(1, "node 1 leads")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn single_node_serves_claims_across_restart() {
    let dir = TempDir::new().unwrap();
    let requests = workload(6);
    {
        let (raft, reader) = start(&dir).await;
        let node = NodeInfo {
            region: "eu".into(),
            zone: "eu-1a".into(),
            raft_addr: "127.0.0.1:7001".into(),
            api_addr: "127.0.0.1:8001".into(),
        };
        raft.initialize(BTreeMap::from([(1u64, node)]))
            .await
            .unwrap();
        wait_leader(&raft).await;
        let first = raft.client_write(requests[0].clone()).await.unwrap();
        match first.data.outcome {
            Some(Outcome::Claim(claim)) => assert_eq!(claim.kind, ClaimKind::Acquired),
            other => panic!("unexpected outcome {other:?}"),
        }
        for request in &requests[1..] {
            let response = raft.client_write(request.clone()).await.unwrap();
            assert!(response.data.outcome.is_some());
        }
        raft.ensure_linearizable(ReadPolicy::ReadIndex)
            .await
            .unwrap();
        assert_eq!(dump(&reader), reference(&requests));
        // The snapshot policy (every 10 entries, keep none) snapshots and purges the log.
        // (A manual trigger while a policy snapshot runs is ignored, so wait for either.)
        raft.trigger().snapshot().await.unwrap();
        raft.wait(Some(Duration::from_secs(10)))
            .metrics(
                |m| m.snapshot.is_some() && m.purged == m.snapshot,
                "snapshot and purge",
            )
            .await
            .unwrap();
        assert_eq!(
            reader.membership().unwrap().voter_ids().collect::<Vec<_>>(),
            [1]
        );
        raft.shutdown().await.unwrap();
    }
    let (raft, reader) = start(&dir).await;
    assert!(raft.is_initialized().await.unwrap());
    wait_leader(&raft).await;
    assert_eq!(dump(&reader), reference(&requests));
    // The same first claim is now answered from the stored record.
    let replay = raft.client_write(requests[0].clone()).await.unwrap();
    match replay.data.outcome {
        Some(Outcome::Claim(claim)) => assert_ne!(claim.kind, ClaimKind::Acquired),
        other => panic!("unexpected outcome {other:?}"),
    }
    raft.shutdown().await.unwrap();
}
