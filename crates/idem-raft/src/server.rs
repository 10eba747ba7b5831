//! The receiving side: a tonic service that hands each RPC to the Raft of its group.
//!
//! Why a registry instead of one Raft handle: a node serves several groups (the global
//! group, and one per region in region-affinity mode) on one port and over the same
//! connections, so every request names its group and is routed here. Groups come and go at run time (created
//! when the node learns of them, removed when it leaves them), and the service may start
//! before the Raft it serves exists: an RPC for a group that is not registered (yet)
//! answers `NOT_FOUND`, which the sender treats as unreachable and backs off.
//!
//! What the remote Raft answers (including rejections) goes back as data; only a Raft that
//! cannot serve at all (stopped, storage failure) answers [`RemoteError`], still as data.
//! gRPC statuses are kept for routing and transport problems.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};

use futures::{Stream, StreamExt};
use idem_proto::raft_v1::raft_server::{Raft as RaftRpc, RaftServer};
use idem_proto::raft_v1::{
    raft_reply, snapshot_chunk, RaftReply, RaftRequest, RemoteError, SnapshotChunk,
};
use idem_store::{Raft, Snapshot, SnapshotData, SnapshotMeta, TypeConfig, Vote};
use openraft::async_runtime::WatchReceiver;
use openraft::errors::Fatal;
use openraft::raft::{AppendEntriesRequest, SnapshotResponse, TransferLeaderRequest, VoteRequest};
use prost::bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status, Streaming};

use crate::codec::{self, CodecError, FORMAT};
use crate::DEFAULT_MAX_MESSAGE_SIZE;

/// The refusal of a snapshot announced above the size cap.
pub const SNAPSHOT_TOO_LARGE: &str = "SNAPSHOT_TOO_LARGE";
/// The refusal of a snapshot whose vote is older than the receiver's.
pub const STALE_VOTE: &str = "STALE_VOTE";

/// The Raft groups this node serves: group id → that group's Raft handle.
///
/// Cheap to clone; all clones share one map, so the node can register a group after the
/// service is already serving.
#[derive(Clone, Default)]
pub struct GroupRegistry {
    groups: Arc<RwLock<BTreeMap<u64, Raft>>>,
}

impl GroupRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `group` with `raft` from now on; returns the handle it replaces.
    pub fn insert(&self, group: u64, raft: Raft) -> Option<Raft> {
        self.groups
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(group, raft)
    }

    /// Stops serving `group` (its RPCs answer `NOT_FOUND` from now on); returns its handle.
    pub fn remove(&self, group: u64) -> Option<Raft> {
        self.groups
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&group)
    }

    /// The Raft of `group`, if served.
    pub fn get(&self, group: u64) -> Option<Raft> {
        self.groups
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&group)
            .cloned()
    }

    /// The served group ids, ascending.
    pub fn groups(&self) -> Vec<u64> {
        self.groups
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// The Raft of `group`, or the `NOT_FOUND` status a sender backs off on.
    fn raft(&self, group: u64) -> Result<Raft, Status> {
        self.get(group).ok_or_else(|| {
            Status::not_found(format!("raft group {group} is not served by this node"))
        })
    }
}

/// Default largest snapshot a peer may announce: 4 GiB.
pub const DEFAULT_MAX_SNAPSHOT_BYTES: u64 = 4 << 30;

/// Called with the reason of every snapshot this service refuses before reading its body
/// (`SNAPSHOT_TOO_LARGE`, `STALE_VOTE`), for the node's metrics.
pub type RefusalHook = Arc<dyn Fn(&'static str) + Send + Sync>;

/// The `idem.raft.v1.Raft` service: decodes each RPC, hands it to the Raft of its group
/// (see [`GroupRegistry`]) and encodes the answer.
#[derive(Clone)]
pub struct RaftService {
    registry: GroupRegistry,
    max_message_size: usize,
    max_snapshot_bytes: u64,
    on_refusal: Option<RefusalHook>,
}

impl RaftService {
    /// A service routing to the groups of `registry`, accepting messages up to
    /// [`DEFAULT_MAX_MESSAGE_SIZE`].
    pub fn new(registry: GroupRegistry) -> Self {
        RaftService {
            registry,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_snapshot_bytes: DEFAULT_MAX_SNAPSHOT_BYTES,
            on_refusal: None,
        }
    }

    /// Refuses snapshots announced larger than `bytes` before receiving any of their data
    /// (default [`DEFAULT_MAX_SNAPSHOT_BYTES`]): a sender cannot fill the disk by announcing
    /// a huge size.
    pub fn with_max_snapshot_bytes(mut self, bytes: u64) -> Self {
        self.max_snapshot_bytes = bytes;
        self
    }

    /// Calls `hook` with the reason of every snapshot refused before its body.
    pub fn on_refusal(mut self, hook: RefusalHook) -> Self {
        self.on_refusal = Some(hook);
        self
    }

    /// Whether a snapshot announced by `header` may be received: its size within the cap
    /// and its vote not older than this node's (openraft would refuse it after the whole
    /// body was written to disk). `Some` holds the answer to send instead.
    fn refuse_snapshot(
        &self,
        raft: &Raft,
        vote: &Vote,
        size: u64,
    ) -> Option<Result<Response<RaftReply>, Status>> {
        if size > self.max_snapshot_bytes {
            self.refused(SNAPSHOT_TOO_LARGE);
            tracing::warn!(
                size,
                limit = self.max_snapshot_bytes,
                "refused a snapshot announced above max_snapshot_bytes"
            );
            return Some(Err(Status::resource_exhausted(format!(
                "{SNAPSHOT_TOO_LARGE}: the snapshot announces {size} bytes, above this node's limit of {}",
                self.max_snapshot_bytes
            ))));
        }
        let metrics = raft.metrics();
        let current = metrics.borrow_watched().vote;
        if vote.partial_cmp(&current) != Some(std::cmp::Ordering::Less) {
            return None;
        }
        // What openraft answers a stale leader: this node's vote, so the sender steps down.
        self.refused(STALE_VOTE);
        tracing::debug!(
            ?vote,
            ?current,
            "refused a snapshot from a stale leader before its body"
        );
        let answer = SnapshotResponse::<TypeConfig> { vote: current };
        Some(reply("SnapshotResponse", Ok::<_, Fatal<_>>(answer)).map(Response::new))
    }

    fn refused(&self, reason: &'static str) {
        if let Some(hook) = &self.on_refusal {
            hook(reason);
        }
    }

    /// Accepts and sends messages up to `bytes` (one AppendEntries batch, one snapshot
    /// chunk); keep it equal to the senders' [`NetworkOptions::max_message_size`].
    ///
    /// [`NetworkOptions::max_message_size`]: crate::NetworkOptions::max_message_size
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// The registry this service routes with.
    pub fn registry(&self) -> &GroupRegistry {
        &self.registry
    }

    /// The tonic server to add to a `tonic::transport::Server` (see
    /// [`server_builder`](crate::server_builder)).
    pub fn into_server(self) -> RaftServer<RaftService> {
        let limit = self.max_message_size;
        RaftServer::new(self)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit)
    }

    /// Shorthand for `RaftService::new(registry).into_server()`.
    pub fn server(registry: GroupRegistry) -> RaftServer<RaftService> {
        Self::new(registry).into_server()
    }

    /// The Raft of the request's group and the decoded request.
    fn open<T: DeserializeOwned>(
        &self,
        what: &'static str,
        request: &RaftRequest,
    ) -> Result<(Raft, T), Status> {
        let raft = self.registry.raft(request.group)?;
        codec::check_versions(request.format, request.entry_version)
            .map_err(|e| codec::refuse(request.group, &e))?;
        let rpc = codec::decode(what, &request.payload).map_err(|e| e.to_status())?;
        Ok((raft, rpc))
    }
}

/// The reply for what a Raft answered: its response, or its fatal error as data.
fn reply<T: Serialize>(
    what: &'static str,
    result: Result<T, Fatal<TypeConfig>>,
) -> Result<RaftReply, Status> {
    let result = match result {
        Ok(value) => raft_reply::Result::Ok(codec::encode(what, &value).map_err(|e| internal(&e))?),
        Err(fatal) => {
            tracing::warn!(%fatal, rpc = what, "local raft cannot serve a peer's request");
            raft_reply::Result::Error(RemoteError {
                message: fatal.to_string(),
                fatal: codec::encode("fatal", &fatal).map_err(|e| internal(&e))?,
            })
        }
    };
    Ok(RaftReply {
        format: FORMAT as i32,
        result: Some(result),
    })
}

fn internal(e: &CodecError) -> Status {
    Status::internal(e.to_string())
}

/// The output of a pipelined append.
type ReplyStream = Pin<Box<dyn Stream<Item = Result<RaftReply, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl RaftRpc for RaftService {
    async fn append_entries(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let (raft, rpc): (_, AppendEntriesRequest<TypeConfig>) =
            self.open("AppendEntriesRequest", request.get_ref())?;
        let result = raft.append_entries(rpc).await.map_err(|e| e.unwrap_fatal());
        reply("AppendEntriesResponse", result).map(Response::new)
    }

    type StreamAppendStream = ReplyStream;

    async fn stream_append(
        &self,
        request: Request<Streaming<RaftRequest>>,
    ) -> Result<Response<ReplyStream>, Status> {
        let mut input = request.into_inner();
        // The first request names the group of the whole stream.
        let Some(first) = input.message().await? else {
            return Ok(Response::new(Box::pin(futures::stream::empty())));
        };
        let group = first.group;
        let (raft, first): (_, AppendEntriesRequest<TypeConfig>) =
            self.open("AppendEntriesRequest", &first)?;

        // Later requests are decoded as Raft pulls them; a malformed one (or one for another
        // group) ends the input, and its status is sent after Raft's last answer.
        let failure = Arc::new(Mutex::new(None::<Status>));
        let rest = futures::stream::unfold(
            (input, failure.clone()),
            move |(mut input, failure)| async move {
                let outcome = match input.message().await {
                    Ok(Some(request)) => decode_in_group(group, &request),
                    Ok(None) => return None,
                    Err(status) => Err(status),
                };
                match outcome {
                    Ok(rpc) => Some((rpc, (input, failure))),
                    Err(status) => {
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
                        None
                    }
                }
            },
        );
        let requests = futures::stream::once(futures::future::ready(first)).chain(rest);
        // Raft's answers end when its core stops, even if the sender keeps the stream open
        // (an idle pipeline would otherwise hold a shutting-down server forever).
        let answers = raft
            .stream_append(requests)
            .take_until(Box::pin(stopped(raft)))
            .map(|answer| reply("StreamAppendResult", answer));
        let tail = futures::stream::once(async move {
            failure.lock().unwrap_or_else(|e| e.into_inner()).take()
        })
        .filter_map(|failure| futures::future::ready(failure.map(Err)));
        Ok(Response::new(Box::pin(answers.chain(tail))))
    }

    async fn vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let (raft, rpc): (_, VoteRequest<TypeConfig>) =
            self.open("VoteRequest", request.get_ref())?;
        let result = raft.vote(rpc).await.map_err(|e| e.unwrap_fatal());
        reply("VoteResponse", result).map(Response::new)
    }

    async fn pre_vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let (raft, rpc): (_, VoteRequest<TypeConfig>) =
            self.open("VoteRequest", request.get_ref())?;
        let result = raft.pre_vote(rpc).await.map_err(|e| e.unwrap_fatal());
        reply("VoteResponse", result).map(Response::new)
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<RaftReply>, Status> {
        let mut input = request.into_inner();
        let first = input
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("empty snapshot stream"))?;
        let group = first.group;
        let raft = self.registry.raft(group)?;
        codec::check_format(first.format).map_err(|e| codec::refuse(group, &e))?;
        let Some(snapshot_chunk::Chunk::Header(header)) = first.chunk else {
            return Err(Status::invalid_argument(
                "a snapshot stream must start with its header",
            ));
        };
        let vote: Vote = codec::decode("Vote", &header.vote).map_err(|e| e.to_status())?;
        let meta: SnapshotMeta =
            codec::decode("SnapshotMeta", &header.meta).map_err(|e| e.to_status())?;
        let size = header.size;
        if let Some(answer) = self.refuse_snapshot(&raft, &vote, size) {
            return answer;
        }
        // Chunks go to a file in the group's snapshot directory as they arrive: receiving
        // takes bounded memory whatever the snapshot's size. The file is deleted if the
        // transfer fails or openraft does not install it.
        let created = raft
            .with_state_machine(|sm| Box::pin(async move { sm.begin_receiving_snapshot() }))
            .await;
        let mut file = match created {
            Ok(file) => {
                file.map_err(|e| Status::internal(format!("cannot create a snapshot file: {e}")))?
            }
            Err(fatal) => {
                return reply::<SnapshotResponse<TypeConfig>>("SnapshotResponse", Err(fatal))
                    .map(Response::new)
            }
        };
        while let Some(chunk) = input.message().await? {
            if chunk.group != group {
                return Err(Status::invalid_argument(format!(
                    "snapshot stream for group {group} carries a chunk of group {}",
                    chunk.group
                )));
            }
            let Some(snapshot_chunk::Chunk::Data(bytes)) = chunk.chunk else {
                return Err(Status::invalid_argument(
                    "only data chunks may follow the header",
                ));
            };
            if file.len() + bytes.len() as u64 > size {
                return Err(Status::invalid_argument(format!(
                    "snapshot data exceeds the announced {size} bytes"
                )));
            }
            file = append(file, bytes).await?;
        }
        if file.len() != size {
            return Err(Status::invalid_argument(format!(
                "snapshot stream ended after {} of {size} bytes",
                file.len()
            )));
        }
        tracing::info!(
            group,
            bytes = size,
            last_log_id = ?meta.last_log_id,
            "received a snapshot; installing"
        );
        let snapshot = Snapshot {
            meta,
            snapshot: file,
        };
        let result = raft.install_full_snapshot(vote, snapshot).await;
        reply("SnapshotResponse", result).map(Response::new)
    }

    async fn transfer_leader(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let (raft, rpc): (_, TransferLeaderRequest<TypeConfig>) =
            self.open("TransferLeaderRequest", request.get_ref())?;
        let result = raft.handle_transfer_leader(rpc).await;
        reply("TransferLeaderResponse", result).map(Response::new)
    }
}

/// Appends a received chunk to `file`, off the async executor.
async fn append(mut file: SnapshotData, bytes: Bytes) -> Result<SnapshotData, Status> {
    tokio::task::spawn_blocking(move || file.append(&bytes).map(|()| file))
        .await
        .map_err(|e| Status::internal(format!("snapshot write task failed: {e}")))?
        .map_err(|e| Status::internal(format!("cannot write the snapshot file: {e}")))
}

/// Resolves when the Raft's core has stopped (its metrics sender is gone).
async fn stopped(raft: Raft) {
    let mut metrics = raft.metrics();
    while metrics.changed().await.is_ok() {}
    tracing::debug!("raft stopped; ending its append streams");
}

/// Decodes a request of a pipelined append, which must stay in the stream's group.
fn decode_in_group(
    group: u64,
    request: &RaftRequest,
) -> Result<AppendEntriesRequest<TypeConfig>, Status> {
    if request.group != group {
        return Err(Status::invalid_argument(format!(
            "append stream for group {group} carries a request of group {}",
            request.group
        )));
    }
    codec::check_versions(request.format, request.entry_version)
        .map_err(|e| codec::refuse(group, &e))?;
    codec::decode("AppendEntriesRequest", &request.payload).map_err(|e| e.to_status())
}
