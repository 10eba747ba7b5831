//! The sending side: openraft's network factory over tonic.
//!
//! Connections. One lazily connected tonic [`Channel`] (one HTTP/2 connection, reconnected
//! by tonic after a failure) per target address and *lane*, shared by every group and every
//! openraft client of that target: `Network::for_group` hands out factories that share
//! the pool. Three lanes, because HTTP/2 multiplexes streams over one TCP connection and a
//! large message delays whatever is queued behind it:
//!
//! - replication: AppendEntries (pipelined), votes, leader transfer;
//! - heartbeat: openraft's separate heartbeat client, so a heartbeat is never stuck
//!   behind a large AppendEntries batch (a late heartbeat means a needless election);
//! - snapshot: chunked snapshot transfer, megabytes at a time.
//!
//! Timeouts. openraft gives every RPC an [`RPCOption`] whose `hard_ttl` is the deadline it
//! may enforce itself (the heartbeat interval for heartbeats and replication, the election
//! timeout for votes, `install_snapshot_timeout` for snapshots). The transport gives up at
//! `soft_ttl` (3/4 of it) with [`Timeout`], so that openraft always sees a proper error:
//! unary RPCs carry it as their gRPC deadline; the replication stream applies it to each
//! response (measured from when its request was sent; an idle stream never times out);
//! a snapshot transfer to each chunk and then to the receiver's install (plus an allowance
//! that grows with the snapshot's size).
//!
//! Errors. What the remote Raft answers, including rejections (higher vote, conflict), is
//! a normal response. A transport failure is [`Unreachable`] (openraft backs off, with
//! this crate's exponential backoff) unless it is a timeout ([`Timeout`]) or a cancelled
//! call ([`NetworkError`], retried at once). A remote Raft that cannot serve at all
//! (stopped, storage failure) is also reported as [`Unreachable`]: openraft's network
//! errors have no "remote error" variant for the v2 network, and backing off from a
//! stopped node is the right reaction.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use idem_core::placement::GLOBAL_GROUP;
use idem_proto::raft_v1::raft_client::RaftClient;
use idem_proto::raft_v1::{
    raft_reply, snapshot_chunk, RaftReply, RaftRequest, SnapshotChunk, SnapshotHeader,
};
use idem_store::{NodeInfo, Snapshot, SnapshotData, TypeConfig, Vote};
use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{
    NetworkError, RPCError, ReplicationClosed, StreamingError, Timeout, Unreachable,
};
use openraft::network::{stream_append_sequential, Backoff, RPCOption};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, RPCTypes, RaftNetworkFactory, RaftNetworkV2};
use prost::bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status, Streaming};

use crate::codec::{self, ENTRY_VERSION_WRITTEN, FORMAT};
use crate::{PeerTls, DEFAULT_MAX_MESSAGE_SIZE};

/// How a node talks to its peers. The defaults suit LAN and cross-region alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkOptions {
    /// Deadline for opening a TCP connection to a peer. Default 1 s.
    pub connect_timeout: Duration,
    /// Interval of HTTP/2 keepalive pings on each connection (finds half-open connections
    /// after a partition even when idle). Default 10 s.
    pub keepalive_interval: Duration,
    /// How long a keepalive ping may stay unanswered before the connection is dropped.
    /// Default 10 s.
    pub keepalive_timeout: Duration,
    /// Size of each chunk of a snapshot transfer (also capped by openraft's
    /// `Config::snapshot_max_chunk_size`). Default 1 MiB.
    pub snapshot_chunk_size: usize,
    /// Largest message sent or accepted (one AppendEntries batch, one snapshot chunk).
    /// Keep it equal on every node (see `RaftService::with_max_message_size`). Default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`].
    pub max_message_size: usize,
    /// First delay before retrying a peer that was unreachable; doubled after each further
    /// failure (±20 % jitter), reset by a success. Default 50 ms.
    pub backoff_initial: Duration,
    /// Largest delay between retries of an unreachable peer. Default 2 s.
    pub backoff_max: Duration,
    /// Pipeline AppendEntries over one bidirectional stream (`StreamAppend`) instead of one
    /// unary call at a time (`AppendEntries`, waiting a round trip per batch). Default true.
    pub pipeline: bool,
}

impl Default for NetworkOptions {
    fn default() -> Self {
        NetworkOptions {
            connect_timeout: Duration::from_secs(1),
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(10),
            snapshot_chunk_size: 1 << 20,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            pipeline: true,
        }
    }
}

/// Which connection to a peer an RPC uses (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Lane {
    Replication,
    Heartbeat,
    Snapshot,
}

/// The connections of a node to its peers, shared by every group.
struct Pool {
    options: NetworkOptions,
    /// Mutual TLS to peers; `None`: plaintext.
    tls: Option<PeerTls>,
    channels: Mutex<HashMap<(String, Lane), Channel>>,
}

impl Pool {
    /// The client of `addr` on `lane`, connecting lazily on first use.
    fn client(&self, addr: &str, lane: Lane) -> Result<RaftClient<Channel>, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let key = (addr.to_owned(), lane);
        let channel = match channels.get(&key) {
            Some(channel) => channel.clone(),
            None => {
                let endpoint = self.endpoint(addr)?;
                let channel = match &self.tls {
                    Some(tls) => tls.connect_lazy(&endpoint),
                    None => endpoint.connect_lazy(),
                };
                channels.insert(key, channel.clone());
                channel
            }
        };
        let limit = self.options.max_message_size;
        Ok(RaftClient::new(channel)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit))
    }

    fn endpoint(&self, addr: &str) -> Result<Endpoint, String> {
        if addr.is_empty() {
            return Err("the node has no raft address".into());
        }
        let uri = match addr.split_once("://") {
            // The TLS connector does the handshake: tonic must see plain `http`.
            Some((_, bare)) if self.tls.is_some() => format!("http://{bare}"),
            Some(_) => addr.to_owned(),
            None => format!("http://{addr}"),
        };
        let o = &self.options;
        Ok(Endpoint::from_shared(uri)
            .map_err(|e| format!("invalid raft address {addr:?}: {e}"))?
            .connect_timeout(o.connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(o.keepalive_interval)
            .keep_alive_timeout(o.keepalive_timeout)
            .keep_alive_while_idle(true)
            .http2_adaptive_window(true))
    }
}

/// openraft's network factory for one group: creates a [`Peer`] per target, addressed by
/// the target's [`NodeInfo::raft_addr`] (`host:port`, or a full `http://` URI).
///
/// Factories made with [`Network::for_group`] share the connections of the one they were
/// made from, so all groups of a node reuse one set of connections per peer.
#[derive(Clone)]
pub struct Network {
    node_id: u64,
    group: u64,
    pool: Arc<Pool>,
}

impl fmt::Debug for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Network")
            .field("node_id", &self.node_id)
            .field("group", &self.group)
            .field("options", &self.pool.options)
            .finish_non_exhaustive()
    }
}

impl Network {
    /// The factory of node `node_id` for the global group ([`GLOBAL_GROUP`]), with a new,
    /// empty connection pool.
    pub fn new(node_id: u64, options: NetworkOptions) -> Self {
        Self::with_tls(node_id, options, None)
    }

    /// Like [`Network::new`], connecting to peers over mutual TLS when `tls` is given
    /// (peers' Raft addresses are then dialled with TLS whatever their scheme says).
    pub fn with_tls(node_id: u64, options: NetworkOptions, tls: Option<PeerTls>) -> Self {
        Network {
            node_id,
            group: GLOBAL_GROUP,
            pool: Arc::new(Pool {
                options,
                tls,
                channels: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A factory for `group` sharing this one's connections.
    pub fn for_group(&self, group: u64) -> Self {
        Network {
            group,
            ..self.clone()
        }
    }

    /// The group whose RPCs this factory's peers send.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// The options of the shared connections.
    pub fn options(&self) -> &NetworkOptions {
        &self.pool.options
    }

    fn peer(&self, target: u64, node: &NodeInfo, lane: Lane) -> Peer {
        let route = Route {
            node_id: self.node_id,
            target,
            group: self.group,
            addr: Arc::from(node.raft_addr.as_str()),
        };
        let client = self.pool.client(&node.raft_addr, lane);
        if let Err(error) = &client {
            tracing::warn!(target_node = target, addr = %node.raft_addr, %error, "cannot address raft peer");
        }
        Peer {
            route,
            client,
            options: self.pool.options.clone(),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &NodeInfo) -> Peer {
        self.peer(target, node, Lane::Replication)
    }

    async fn new_heartbeat_client(&mut self, target: u64, node: &NodeInfo) -> Peer {
        self.peer(target, node, Lane::Heartbeat)
    }

    async fn new_snapshot_client(&mut self, target: u64, node: &NodeInfo) -> Peer {
        self.peer(target, node, Lane::Snapshot)
    }
}

/// Who an RPC goes to: everything an error message or a [`Timeout`] needs.
#[derive(Clone, Debug)]
struct Route {
    node_id: u64,
    target: u64,
    group: u64,
    addr: Arc<str>,
}

impl Route {
    fn unreachable(&self, what: impl fmt::Display) -> Unreachable<TypeConfig> {
        Unreachable::from_string(format!(
            "raft group {} node {} at {}: {what}",
            self.group, self.target, self.addr
        ))
    }

    fn timeout(&self, action: RPCTypes, after: Duration) -> Timeout<TypeConfig> {
        Timeout {
            action,
            id: self.node_id,
            target: self.target,
            timeout: after,
        }
    }

    /// The openraft error for a failed call.
    fn status_error(
        &self,
        action: RPCTypes,
        ttl: Duration,
        status: &Status,
    ) -> RPCError<TypeConfig> {
        tracing::debug!(
            target_node = self.target,
            group = self.group,
            addr = %self.addr,
            ?action,
            code = ?status.code(),
            message = status.message(),
            "raft rpc failed"
        );
        match status.code() {
            Code::DeadlineExceeded => RPCError::Timeout(self.timeout(action, ttl)),
            Code::Cancelled => RPCError::Network(NetworkError::from_string(format!(
                "raft group {} node {} at {}: {action} cancelled: {}",
                self.group,
                self.target,
                self.addr,
                status.message()
            ))),
            code => RPCError::Unreachable(
                self.unreachable(format_args!("{action}: {code:?}: {}", status.message())),
            ),
        }
    }

    /// The response inside a reply; a remote fatal error or an undecodable reply makes the
    /// peer unreachable for now.
    fn decode_reply<T: DeserializeOwned>(
        &self,
        what: &'static str,
        reply: RaftReply,
    ) -> Result<T, Unreachable<TypeConfig>> {
        codec::check_format(reply.format).map_err(|e| self.unreachable(e))?;
        match reply.result {
            Some(raft_reply::Result::Ok(bytes)) => {
                codec::decode(what, &bytes).map_err(|e| self.unreachable(e))
            }
            Some(raft_reply::Result::Error(remote)) => {
                Err(self.unreachable(format_args!("remote raft cannot serve: {}", remote.message)))
            }
            None => Err(self.unreachable("empty reply")),
        }
    }
}

/// A connection of one group to one target node: openraft's [`RaftNetworkV2`].
pub struct Peer {
    route: Route,
    client: Result<RaftClient<Channel>, String>,
    options: NetworkOptions,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("route", &self.route)
            .finish_non_exhaustive()
    }
}

/// Never wait on a zero deadline: it would fail before the request leaves.
fn ttl_of(option: &RPCOption) -> Duration {
    option.soft_ttl().max(Duration::from_millis(1))
}

impl Peer {
    fn client(&self) -> Result<RaftClient<Channel>, Unreachable<TypeConfig>> {
        self.client
            .clone()
            .map_err(|error| self.route.unreachable(error))
    }

    /// One unary RPC: encode, call with the soft TTL as deadline, decode.
    async fn unary<Req, Resp, F, Fut>(
        &self,
        action: RPCTypes,
        what: (&'static str, &'static str),
        (rpc, entry_version): (&Req, u32),
        option: &RPCOption,
        call: F,
    ) -> Result<Resp, RPCError<TypeConfig>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        F: FnOnce(RaftClient<Channel>, Request<RaftRequest>) -> Fut,
        Fut: Future<Output = Result<Response<RaftReply>, Status>>,
    {
        let client = self.client()?;
        let payload =
            codec::encode(what.0, rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let ttl = ttl_of(option);
        let mut request = Request::new(RaftRequest {
            group: self.route.group,
            format: FORMAT as i32,
            payload,
            entry_version,
        });
        request.set_timeout(ttl);
        let started = Instant::now();
        match tokio::time::timeout(ttl, call(client, request)).await {
            Err(_) => Err(RPCError::Timeout(self.route.timeout(action, ttl))),
            // tonic enforces the gRPC deadline itself and reports it as CANCELLED.
            Ok(Err(status)) if status.code() == Code::Cancelled && started.elapsed() >= ttl => {
                Err(RPCError::Timeout(self.route.timeout(action, ttl)))
            }
            Ok(Err(status)) => Err(self.route.status_error(action, ttl, &status)),
            Ok(Ok(response)) => self
                .route
                .decode_reply(what.1, response.into_inner())
                .map_err(RPCError::Unreachable),
        }
    }

    /// Pipelined AppendEntries over `StreamAppend` (see the module docs for its timeouts).
    ///
    /// The call starts only once openraft yields the first request: openraft applies its
    /// backoff while producing a request, so a call that failed before pulling one (the
    /// peer is down) would make openraft retry in a tight loop.
    fn pipelined<S>(&self, input: S, option: &RPCOption) -> Result<Answers, RPCError<TypeConfig>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        let client = self.client()?;
        let ttl = ttl_of(option);
        let route = self.route.clone();
        let inflight = Arc::new(Inflight::default());

        let group = route.group;
        let sent = inflight.clone();
        let (answers_alive, dropped) = tokio::sync::oneshot::channel::<()>();
        let mut requests = input
            .map(
                move |rpc| match codec::encode("AppendEntriesRequest", &rpc) {
                    Ok(payload) => {
                        sent.push();
                        Some(RaftRequest {
                            group,
                            format: FORMAT as i32,
                            payload,
                            entry_version: codec::entries_version(&rpc.entries),
                        })
                    }
                    Err(error) => {
                        // Cannot happen for these types; end the stream rather than skip one.
                        tracing::error!(%error, "cannot encode an AppendEntries request");
                        None
                    }
                },
            )
            .take_while(|request| futures::future::ready(request.is_some()))
            .filter_map(futures::future::ready)
            // The transport polls the requests on its own task, for as long as they last.
            // When openraft drops the answers (the session ended), the requests must end
            // too: openraft's request streams share one cursor, so a stale stream still
            // being polled would take entries meant for the next session.
            .take_until(dropped);
        let mut client = client;
        let call: BoxFuture<'static, Option<Result<Response<Streaming<RaftReply>>, Status>>> =
            Box::pin(async move {
                // Openraft's backoff (if any) runs inside this `next()`.
                let first = requests.next().await?;
                let requests = futures::stream::once(futures::future::ready(first)).chain(requests);
                Some(client.stream_append(Request::new(requests)).await)
            });

        let action = RPCTypes::AppendEntries;
        let start = AppendState::Calling(call);
        let answers = futures::stream::unfold(Some(start), move |state| {
            let route = route.clone();
            let inflight = inflight.clone();
            async move {
                let mut state = state?;
                loop {
                    state = match state {
                        AppendState::Calling(mut call) => match inflight.wait(&mut call, ttl).await
                        {
                            Err(Elapsed) => {
                                return Some((
                                    Err(RPCError::Timeout(route.timeout(action, ttl))),
                                    None,
                                ))
                            }
                            // Openraft had nothing to send.
                            Ok(None) => return None,
                            Ok(Some(Err(status))) => {
                                return Some((Err(route.status_error(action, ttl, &status)), None))
                            }
                            Ok(Some(Ok(response))) => {
                                AppendState::Streaming(Box::new(response.into_inner()))
                            }
                        },
                        AppendState::Streaming(mut replies) => {
                            let reply = match inflight.wait(replies.next(), ttl).await {
                                Err(Elapsed) => {
                                    return Some((
                                        Err(RPCError::Timeout(route.timeout(action, ttl))),
                                        None,
                                    ))
                                }
                                Ok(None) => return None,
                                Ok(Some(Err(status))) => {
                                    return Some((
                                        Err(route.status_error(action, ttl, &status)),
                                        None,
                                    ))
                                }
                                Ok(Some(Ok(reply))) => reply,
                            };
                            inflight.pop();
                            return match route.decode_reply::<StreamAppendResult<TypeConfig>>(
                                "StreamAppendResult",
                                reply,
                            ) {
                                // A rejection ends the stream, as on the receiving side.
                                Ok(result) => {
                                    let next =
                                        result.is_ok().then_some(AppendState::Streaming(replies));
                                    Some((Ok(result), next))
                                }
                                Err(unreachable) => {
                                    Some((Err(RPCError::Unreachable(unreachable)), None))
                                }
                            };
                        }
                    };
                }
            }
        });
        Ok(Box::pin(answers.inspect(move |_| {
            let _alive = &answers_alive;
        })))
    }

    /// Sends a snapshot in chunks and waits for the receiver to install it.
    async fn send_snapshot(
        &self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let action = RPCTypes::InstallSnapshot;
        let mut client = self.client()?;
        let ttl = ttl_of(&option);
        let chunk_size = self
            .options
            .snapshot_chunk_size
            .min(option.snapshot_chunk_size().unwrap_or(usize::MAX))
            // Leave room for the message framing.
            .min(self.options.max_message_size.saturating_sub(1024))
            .max(1);
        let encode_error = |e: codec::CodecError| StreamingError::Network(NetworkError::new(&e));
        let group = self.route.group;
        let Snapshot {
            meta,
            snapshot: data,
        } = snapshot;
        let size = data.len();
        let header = SnapshotChunk {
            group,
            format: FORMAT as i32,
            chunk: Some(snapshot_chunk::Chunk::Header(SnapshotHeader {
                vote: codec::encode("Vote", &vote).map_err(encode_error)?,
                meta: codec::encode("SnapshotMeta", &meta).map_err(encode_error)?,
                size,
            })),
        };
        tracing::info!(
            target_node = self.route.target,
            group,
            bytes = size,
            last_log_id = ?meta.last_log_id,
            "sending a snapshot"
        );

        // One chunk in flight between this task and the transport: a chunk the transport
        // does not take within the deadline means the peer stopped reading.
        let (tx, rx) = tokio::sync::mpsc::channel::<SnapshotChunk>(1);
        let call = async move {
            client
                .install_snapshot(Request::new(tokio_stream::wrappers::ReceiverStream::new(
                    rx,
                )))
                .await
        };
        let send = async move {
            if forward(&tx, header, ttl).await? {
                return Ok(());
            }
            // The file is read one chunk at a time: memory stays bounded by a few chunks
            // (this one, the channel's, the transport's), whatever the snapshot's size.
            let data = Arc::new(data);
            let mut offset = 0;
            while offset < size {
                let bytes = read_chunk(&data, offset, chunk_size).await?;
                offset += bytes.len() as u64;
                let chunk = SnapshotChunk {
                    group,
                    format: FORMAT as i32,
                    chunk: Some(snapshot_chunk::Chunk::Data(Bytes::from(bytes))),
                };
                if forward(&tx, chunk, ttl).await? {
                    return Ok(());
                }
            }
            // Dropping `tx` here ends the stream: the receiver installs.
            Ok(())
        };
        tokio::pin!(call, send, cancel);
        let mut reply_deadline: Option<Instant> = None;
        loop {
            tokio::select! {
                closed = &mut cancel => return Err(StreamingError::Closed(closed)),
                answer = &mut call => {
                    return match answer {
                        Err(status) => Err(self.route.status_error(action, ttl, &status).into()),
                        Ok(response) => self
                            .route
                            .decode_reply("SnapshotResponse", response.into_inner())
                            .map_err(StreamingError::Unreachable),
                    };
                }
                sent = &mut send, if reply_deadline.is_none() => {
                    match sent {
                        Err(SendError::Elapsed) => {
                            return Err(StreamingError::Timeout(self.route.timeout(action, ttl)));
                        }
                        Err(SendError::Read(e)) => {
                            tracing::error!(error = %e, "cannot read the snapshot file to send");
                            return Err(StreamingError::Network(NetworkError::new(&e)));
                        }
                        Ok(()) => reply_deadline = Some(Instant::now() + ttl + install_allowance(size)),
                    }
                }
                () = tokio::time::sleep_until(reply_deadline.unwrap_or_else(Instant::now)),
                    if reply_deadline.is_some() => {
                    return Err(StreamingError::Timeout(self.route.timeout(action, ttl)));
                }
            }
        }
    }
}

/// Slowest rate at which a receiver is expected to check and load a snapshot it received
/// (digest, decoding, RocksDB batches; about 10x below what this machine class does).
const INSTALL_BYTES_PER_SEC: u64 = 4 << 20;

/// Time granted to the receiver's install on top of the RPC timeout, in proportion to the
/// snapshot's size: `install_snapshot_timeout` alone would make a large state (gigabytes at
/// millions of records) time out on every attempt, so a lagging follower would never
/// catch up. A receiver that dies while installing closes the connection, which ends the
/// wait at once.
fn install_allowance(size: u64) -> Duration {
    Duration::from_millis(size.saturating_mul(1000) / INSTALL_BYTES_PER_SEC)
}

/// A deadline passed.
#[derive(Debug)]
struct Elapsed;

/// Why sending the chunks of a snapshot stopped.
#[derive(Debug)]
enum SendError {
    /// The transport did not take a chunk within the deadline.
    Elapsed,
    /// The snapshot file could not be read.
    Read(std::io::Error),
}

/// Hands `chunk` to the transport within `ttl`; `Ok(true)` when the call already ended
/// (the receiver refused: its answer says why).
async fn forward(
    tx: &tokio::sync::mpsc::Sender<SnapshotChunk>,
    chunk: SnapshotChunk,
    ttl: Duration,
) -> Result<bool, SendError> {
    match tokio::time::timeout(ttl, tx.send(chunk)).await {
        Err(_) => Err(SendError::Elapsed),
        Ok(Err(_closed)) => Ok(true),
        Ok(Ok(())) => Ok(false),
    }
}

/// Reads up to `max` bytes of the snapshot file at `offset`, off the async executor.
async fn read_chunk(
    data: &Arc<SnapshotData>,
    offset: u64,
    max: usize,
) -> Result<Vec<u8>, SendError> {
    let data = Arc::clone(data);
    tokio::task::spawn_blocking(move || data.read_chunk(offset, max))
        .await
        .map_err(|e| SendError::Read(std::io::Error::other(e)))?
        .map_err(SendError::Read)
}

/// The answers of a pipelined append, as openraft consumes them.
type Answers = BoxStream<'static, Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>;

/// The state of a pipelined append's answers.
enum AppendState {
    /// Waiting for openraft's first request (no deadline: it may be backing off or have
    /// nothing to send yet), then for the call to be accepted. `None`: no request came.
    Calling(BoxFuture<'static, Option<Result<Response<Streaming<RaftReply>>, Status>>>),
    /// Reading answers.
    Streaming(Box<Streaming<RaftReply>>),
}

/// When each unanswered request of a pipelined append was sent, oldest first.
#[derive(Default)]
struct Inflight {
    sent: Mutex<VecDeque<Instant>>,
    pushed: Notify,
}

impl Inflight {
    fn push(&self) {
        self.sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(Instant::now());
        self.pushed.notify_one();
    }

    fn pop(&self) {
        self.sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
    }

    fn oldest(&self) -> Option<Instant> {
        self.sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .front()
            .copied()
    }

    /// Waits for `fut`, failing if the oldest unanswered request is `ttl` old. With no
    /// request outstanding there is nothing to time out: an idle stream is healthy.
    async fn wait<F: Future>(&self, fut: F, ttl: Duration) -> Result<F::Output, Elapsed> {
        tokio::pin!(fut);
        loop {
            let pushed = self.pushed.notified();
            match self.oldest() {
                Some(since) => {
                    return tokio::time::timeout_at(since + ttl, &mut fut)
                        .await
                        .map_err(|_| Elapsed)
                }
                None => tokio::select! {
                    out = &mut fut => return Ok(out),
                    () = pushed => {}
                },
            }
        }
    }
}

/// Exponential backoff with ±20 % jitter, capped.
struct ExponentialBackoff {
    next: Duration,
    max: Duration,
    seed: u64,
}

impl Iterator for ExponentialBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = self.next.min(self.max);
        self.next = base.saturating_mul(2).min(self.max);
        // xorshift64: jitter only, no need for a real RNG.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let permille = 800 + (self.seed % 401) as u32;
        Some((base * permille / 1000).min(self.max))
    }
}

impl RaftNetworkV2<TypeConfig> for Peer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.unary(
            RPCTypes::AppendEntries,
            ("AppendEntriesRequest", "AppendEntriesResponse"),
            (&rpc, codec::entries_version(&rpc.entries)),
            &option,
            |mut client, request| async move { client.append_entries(request).await },
        )
        .await
    }

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<
        's,
        Result<
            BoxStream<'s, Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>,
            RPCError<TypeConfig>,
        >,
    >
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        if !self.options.pipeline {
            return stream_append_sequential(self, input, option);
        }
        let answers = self.pipelined(input, &option);
        Box::pin(async move { answers.map(|s| s as BoxStream<'s, _>) })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.unary(
            RPCTypes::Vote,
            ("VoteRequest", "VoteResponse"),
            (&rpc, ENTRY_VERSION_WRITTEN),
            &option,
            |mut client, request| async move { client.vote(request).await },
        )
        .await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.unary(
            RPCTypes::Vote,
            ("VoteRequest", "VoteResponse"),
            (&rpc, ENTRY_VERSION_WRITTEN),
            &option,
            |mut client, request| async move { client.pre_vote(request).await },
        )
        .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        self.send_snapshot(vote, snapshot, cancel, option).await
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.unary(
            RPCTypes::TransferLeader,
            ("TransferLeaderRequest", "TransferLeaderResponse"),
            (&req, ENTRY_VERSION_WRITTEN),
            &option,
            |mut client, request| async move { client.transfer_leader(request).await },
        )
        .await
    }

    fn backoff(&self) -> Option<Backoff> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ self.route.target.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1;
        Some(Backoff::new(ExponentialBackoff {
            next: self.options.backoff_initial,
            max: self.options.backoff_max,
            seed,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_allowance_grows_with_the_snapshot() {
        assert_eq!(install_allowance(0), Duration::ZERO);
        assert_eq!(install_allowance(4 << 20), Duration::from_secs(1));
        // A 10M-record state (~3.7 GB) gets a quarter of an hour, not the 10 s default.
        assert!(install_allowance(3_700_000_000) > Duration::from_secs(800));
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_cap() {
        let backoff = ExponentialBackoff {
            next: Duration::from_millis(50),
            max: Duration::from_secs(2),
            seed: 0x1234_5678_9abc_def1,
        };
        let delays: Vec<Duration> = backoff.take(10).collect();
        let bases = [50, 100, 200, 400, 800, 1600, 2000, 2000, 2000, 2000];
        for (delay, base) in delays.iter().zip(bases) {
            let base = Duration::from_millis(base);
            assert!(
                *delay >= base * 8 / 10 && *delay <= (base * 12 / 10).min(Duration::from_secs(2)),
                "{delay:?} vs {base:?}"
            );
        }
    }

    #[tokio::test]
    async fn inflight_times_out_only_with_outstanding_requests() {
        let inflight = Inflight::default();
        let ttl = Duration::from_millis(20);
        // Nothing outstanding: an idle wait does not time out.
        let idle = inflight
            .wait(tokio::time::sleep(Duration::from_millis(100)), ttl)
            .await;
        assert!(idle.is_ok());
        // An outstanding request that is never answered does.
        inflight.push();
        let stuck = inflight.wait(futures::future::pending::<()>(), ttl).await;
        assert!(stuck.is_err());
        inflight.pop();
        assert!(inflight.oldest().is_none());
    }

    /// A peer that accepts connections and never answers.
    fn black_hole() -> (std::net::TcpListener, NodeInfo) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let node = NodeInfo {
            raft_addr: listener.local_addr().unwrap().to_string(),
            ..NodeInfo::default()
        };
        (listener, node)
    }

    #[tokio::test]
    async fn a_silent_peer_times_out_before_openraft_gives_up() {
        let (_listener, node) = black_hole();
        let mut network = Network::new(1, NetworkOptions::default());
        let option = RPCOption::new(Duration::from_millis(200));

        let mut peer = network.new_client(2, &node).await;
        let started = std::time::Instant::now();
        let rpc = VoteRequest::<TypeConfig>::new(Vote::new(1, 1), None);
        let err = peer.vote(rpc, option.clone()).await.unwrap_err();
        assert!(matches!(err, RPCError::Timeout(_)), "{err}");
        assert!(
            started.elapsed() < option.hard_ttl(),
            "{:?}",
            started.elapsed()
        );

        let mut peer = network.new_snapshot_client(2, &node).await;
        let dir = tempfile::TempDir::new().unwrap();
        let mut data = SnapshotData::create_temporary(dir.path().join("s.part")).unwrap();
        data.append(&vec![7; 3 << 20]).unwrap();
        let snapshot = Snapshot {
            meta: idem_store::SnapshotMeta::default(),
            snapshot: data,
        };
        let never = futures::future::pending::<ReplicationClosed>();
        let err = peer
            .full_snapshot(Vote::new_committed(1, 1), snapshot, never, option)
            .await
            .unwrap_err();
        assert!(matches!(err, StreamingError::Timeout(_)), "{err}");
    }

    #[tokio::test]
    async fn bad_addresses_are_unreachable_not_panics() {
        let mut network = Network::new(1, NetworkOptions::default());
        let node = NodeInfo::default();
        let mut peer = network.new_client(2, &node).await;
        let rpc = VoteRequest::<TypeConfig>::new(Vote::new(1, 1), None);
        let err = peer
            .vote(rpc, RPCOption::new(Duration::from_millis(100)))
            .await
            .unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
        assert_eq!(network.for_group(7).group(), 7);
    }
}
