//! Three (then four) in-process nodes on loopback, each with its own RocksDB store and its
//! own tonic server, replicating idem commands over the `idem.raft.v1` transport.

mod harness;

use std::collections::BTreeSet;

use anyhow::anyhow;
use harness::{test_options, Cluster};
use idem_proto::raft_v1::raft_client::RaftClient;
use idem_proto::raft_v1::{
    raft_reply, snapshot_chunk, Format, RaftRequest, SnapshotChunk, SnapshotHeader,
};
use idem_raft::{LogPolicy, NetworkOptions};
use idem_store::{SnapshotMeta, TypeConfig, Vote};
use openraft::async_runtime::WatchReceiver;
use openraft::raft::{VoteRequest, VoteResponse};
use openraft::ServerState;
use prost::bytes::Bytes;
use tonic::Code;

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

fn keys(prefix: &str, n: usize) -> impl Iterator<Item = String> + '_ {
    (0..n).map(move |i| format!("{prefix}-{i}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicates_transfers_leadership_and_promotes_a_learner() -> anyhow::Result<()> {
    init_tracing();
    let (mut c, leader) = Cluster::three(LogPolicy::default(), test_options()).await?;

    // Claims proposed on the leader are applied by every state machine.
    let (claimed, last) = c.claim(leader, keys("a", 20)).await?;
    for id in 1..=3 {
        c.applied(id, last.index()).await?;
    }
    let expected = c.records(leader, &claimed)?;
    for id in 1..=3 {
        assert_eq!(c.records(id, &claimed)?, expected, "node {id}");
    }

    // Leadership moves to the chosen node, which then serves writes.
    let to = (1..=3).find(|&id| id != leader).unwrap();
    c.node(leader).raft.trigger().transfer_leader(to).await?;
    c.wait(to, "leadership transferred", |m| {
        m.state == ServerState::Leader
    })
    .await?;
    assert_eq!(c.leader().await?, to);
    let (more, last) = c.claim(to, keys("b", 10)).await?;
    for id in 1..=3 {
        c.applied(id, last.index()).await?;
        c.records(id, &more)?;
    }

    // A new node joins as a learner, catches up, and is promoted to voter.
    c.start(4).await?;
    let leader = c.node(to).raft.clone();
    leader.add_learner(4, c.info(4), true).await?;
    leader
        .change_membership(BTreeSet::from([1, 2, 3, 4]), false)
        .await?;
    for id in 1..=4 {
        c.wait(id, "node 4 is a voter", |m| {
            m.membership_config.membership().voter_ids().any(|v| v == 4)
        })
        .await?;
    }
    let (late, last) = c.claim(to, keys("c", 5)).await?;
    for id in 1..=4 {
        c.applied(id, last.index()).await?;
    }
    assert_eq!(c.records(4, &claimed)?, expected);
    assert_eq!(c.records(4, &late)?, c.records(to, &late)?);
    c.shutdown().await
}

/// A leader that restarts stands for election again: back in its old term, it could write
/// entries at indexes whose entries of that term it lost (unsynced when the power went) but
/// its followers kept (see `RaftTimeouts::config_with`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_does_not_resume_its_term() -> anyhow::Result<()> {
    init_tracing();
    let (mut c, leader) = Cluster::three(LogPolicy::default(), test_options()).await?;
    let (before, _) = c.claim(leader, keys("before", 3)).await?;
    let term = c.node(leader).raft.metrics().borrow_watched().current_term;

    // Back well within the followers' election timeout (800 ms at least), so only its own
    // restart could make it leader again in the same term.
    c.stop(leader).await?;
    c.start(leader).await?;
    let now = c.leader().await?;
    let new_term = c.node(now).raft.metrics().borrow_watched().current_term;
    assert!(
        new_term > term,
        "node {now} leads in term {new_term}, the term of the leader before the restart ({term})"
    );
    let (after, last) = c.claim(now, keys("after", 3)).await?;
    for id in 1..=3 {
        c.applied(id, last.index()).await?;
        c.records(id, &before)?;
        c.records(id, &after)?;
    }
    c.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_catches_up_through_a_snapshot() -> anyhow::Result<()> {
    init_tracing();
    // Snapshot every 10 entries and purge everything a snapshot covers.
    let log = LogPolicy {
        snapshot_logs_since_last: 10,
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        max_payload_entries: 300,
    };
    let (mut c, leader) = Cluster::three(log, test_options()).await?;
    let (early, last) = c.claim(leader, keys("early", 3)).await?;
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let before = c.applied(follower, last.index()).await?;
    let follower_had = before.last_applied.as_ref().map_or(0, |l| l.index());

    // The follower is down while the others move far past what it has, snapshot and
    // purge: it can only catch up through a snapshot.
    c.stop(follower).await?;
    let (late, last) = c.claim(leader, keys("late", 40)).await?;
    let on_leader = c
        .wait(leader, "leader snapshots and purges", |m| {
            m.purged
                .as_ref()
                .is_some_and(|p| p.index() > follower_had + 10)
        })
        .await?;
    let purged = on_leader.purged.unwrap();

    c.start(follower).await?;
    let caught_up = c.applied(follower, last.index()).await?;
    let installed = caught_up
        .snapshot
        .ok_or_else(|| anyhow!("follower has no snapshot"))?;
    assert!(
        installed.index() >= purged.index(),
        "the follower's snapshot {installed} does not cover the leader's purge point {purged}"
    );
    // Its log starts after the purge point: nothing older than the snapshot is kept.
    let follower_purged = caught_up
        .purged
        .ok_or_else(|| anyhow!("follower log not purged"))?;
    assert!(
        follower_purged.index() >= purged.index(),
        "{follower_purged} < {purged}"
    );
    // And it has every record, the ones it saw and the ones it only got by snapshot.
    assert_eq!(c.records(follower, &early)?, c.records(leader, &early)?);
    assert_eq!(c.records(follower, &late)?, c.records(leader, &late)?);

    // It keeps replicating normally afterwards.
    let (after, last) = c.claim(leader, keys("after", 3)).await?;
    c.applied(follower, last.index()).await?;
    c.records(follower, &after)?;
    c.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_appends_and_wire_errors() -> anyhow::Result<()> {
    init_tracing();
    // Without pipelining: one AppendEntries call at a time.
    let options = NetworkOptions {
        pipeline: false,
        ..test_options()
    };
    let (mut c, leader) = Cluster::three(LogPolicy::default(), options).await?;
    let (claimed, last) = c.claim(leader, keys("u", 10)).await?;
    for id in 1..=3 {
        c.applied(id, last.index()).await?;
        assert_eq!(c.records(id, &claimed)?, c.records(leader, &claimed)?);
    }

    let mut client = RaftClient::connect(format!("http://{}", c.addr(leader))).await?;
    let stale = VoteRequest::<TypeConfig>::new(Vote::new(1, 9), None);
    let payload = Bytes::from(bincode::serialize(&stale)?);
    let versioned = |group: u64, format: Format, payload: Bytes, entry_version: u32| RaftRequest {
        group,
        format: format as i32,
        payload,
        entry_version,
    };
    let request = |group: u64, format: Format, payload: Bytes| versioned(group, format, payload, 1);

    // A group this node does not serve.
    let status = client
        .vote(request(7, Format::BincodeV1, payload.clone()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    // A format it does not speak.
    let status = client
        .vote(request(0, Format::Unspecified, payload.clone()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    // Log entries of a newer version than this node reads: refused, never decoded.
    let newer = idem_raft::ENTRY_VERSION_READ + 1;
    let status = client
        .vote(versioned(0, Format::BincodeV1, payload.clone(), newer))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(
        status.message().contains(&format!("version {newer}")),
        "{status:?}"
    );
    // Garbage.
    let status = client
        .vote(request(0, Format::BincodeV1, Bytes::from_static(b"\x01")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // A stale candidate is refused by Raft, as data, for a vote and a pre-vote alike; the
    // pre-vote comes without an entry version, as from a release before versions were sent.
    let replies = [
        client
            .vote(request(0, Format::BincodeV1, payload.clone()))
            .await?
            .into_inner(),
        client
            .pre_vote(versioned(0, Format::BincodeV1, payload, 0))
            .await?
            .into_inner(),
    ];
    for reply in replies {
        let Some(raft_reply::Result::Ok(bytes)) = reply.result else {
            panic!("expected a vote response, got {reply:?}");
        };
        let response: VoteResponse<TypeConfig> = bincode::deserialize(&bytes)?;
        assert!(!response.is_granted_to(&Vote::new(1, 9)), "{response:?}");
    }

    // A snapshot stream that ends short of its announced size is refused, not installed.
    let header = SnapshotChunk {
        group: 0,
        format: Format::BincodeV1 as i32,
        chunk: Some(snapshot_chunk::Chunk::Header(SnapshotHeader {
            vote: Bytes::from(bincode::serialize(&Vote::new_committed(1, 9))?),
            meta: Bytes::from(bincode::serialize(&SnapshotMeta::default())?),
            size: 10,
        })),
    };
    let data = SnapshotChunk {
        group: 0,
        format: Format::BincodeV1 as i32,
        chunk: Some(snapshot_chunk::Chunk::Data(Bytes::from_static(b"12345"))),
    };
    let status = client
        .install_snapshot(futures::stream::iter([header, data]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    // The cluster did not notice any of it.
    assert_eq!(c.leader().await?, leader);
    let (_, last) = c.claim(leader, keys("v", 3)).await?;
    for id in 1..=3 {
        c.applied(id, last.index()).await?;
    }
    c.shutdown().await
}
