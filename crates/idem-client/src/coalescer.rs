//! Coalescing of concurrent writes to one endpoint into `Idempotency.Batch` calls.
//!
//! A service that handles many requests at once calls `claim` and `complete` from many tasks
//! through one [`crate::Client`]. Sent one by one, each call costs a whole gRPC request on
//! the leader (HTTP/2 framing, decoding, a handler dispatch): the larger part of a small
//! write's CPU there. Sent together, they cost one request, and their Raft entries are
//! appended and replicated together.
//!
//! **How.** Every call joins its endpoint's queue, then competes for one of
//! [`Coalescing::max_in_flight`] send slots. Whoever gets a slot takes everything queued (up
//! to [`Coalescing::max_calls`] calls and [`Coalescing::max_bytes`]) and sends it: alone as
//! the plain unary call, or as one `Batch`. A caller whose call was taken by someone else's
//! batch just waits for its answer. A lone caller never waits for a batch to fill: it finds
//! a free slot and sends at once, on its own task, exactly as without coalescing; calls only
//! gather while other requests are under way, and that is when gathering them pays. Then
//! the slot holder lingers briefly ([`Coalescing::linger`], at most 200 µs by default) while
//! callers that are ready to run keep adding calls, so that the callers one answer woke
//! together ride in one batch instead of one each.
//!
//! **Same answers.** The server runs each call of a batch through the handler it would reach
//! alone, and answers it on its own: a call's outcome or error, with the same reason and
//! hints, and the batch's `leader-addr` metadata. So the retry loop above sees what it would
//! see for a single call. A batch that fails as a whole (connection lost, timeout) fails
//! each of its calls the same way, which the retry loop handles as it would for one call:
//! every retry re-sends the same request, so a call that did take effect is not repeated.
//!
//! **Abandoned calls** (the caller's attempt timed out while queued) are dropped from the
//! queue rather than sent late. A batch the server refuses as a whole (too large for its
//! request limit, or malformed) is sent again one call at a time, so no call fails for
//! having been batched. A server without `Batch` (an older version) answers
//! `UNIMPLEMENTED`: the endpoint's calls are then sent one by one from then on.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::credentials::Connection;
use idem_proto::v1::batch_call::Request as Call;
use idem_proto::v1::batch_reply::Reply;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_proto::{status, v1};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tonic::{Code, Extensions, Response, Status};

use crate::options::Coalescing;

/// The answer to one call: its reply (never [`Reply::Error`]) with the response metadata of
/// the request that carried it, or its status.
pub(crate) type Answer = Result<Response<Reply>, Status>;

/// One endpoint's queue of calls waiting to be sent.
pub(crate) struct Coalescer {
    settings: Coalescing,
    queue: Mutex<VecDeque<Waiting>>,
    slots: Arc<Semaphore>,
    next_id: AtomicU64,
    /// Set when the endpoint answered `Batch` with `UNIMPLEMENTED`.
    no_batch: Arc<AtomicBool>,
}

/// A queued call and where its answer goes.
struct Waiting {
    id: u64,
    call: Call,
    bytes: usize,
    reply: oneshot::Sender<Answer>,
}

impl Coalescer {
    /// An empty queue with `settings`.
    pub(crate) fn new(settings: Coalescing) -> Self {
        let slots = settings.max_in_flight.max(1);
        Coalescer {
            settings,
            queue: Mutex::new(VecDeque::new()),
            slots: Arc::new(Semaphore::new(slots)),
            next_id: AtomicU64::new(0),
            no_batch: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Sends `call` on `channel`, alone or in a batch with other callers' calls.
    pub(crate) async fn call(&self, channel: &Connection, call: Call) -> Answer {
        if self.settings.max_calls <= 1 || self.no_batch.load(Ordering::Relaxed) {
            return unary(channel.clone(), call).await;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, mut answer) = oneshot::channel();
        let bytes = call.encoded_len();
        self.lock().push_back(Waiting {
            id,
            call,
            bytes,
            reply,
        });
        loop {
            let slot = tokio::select! {
                biased;
                answer = &mut answer => return answer.unwrap_or_else(|_| Err(lost())),
                slot = Arc::clone(&self.slots).acquire_owned() => {
                    slot.expect("the semaphore is never closed")
                }
            };
            self.linger().await;
            let (batch, still_queued) = self.take(id);
            if let [only] = batch.as_slice() {
                if only.id == id {
                    // Our own call alone: send it on this task, as without coalescing.
                    let only = batch.into_iter().next().expect("one call");
                    let result = unary(channel.clone(), only.call).await;
                    drop(slot);
                    return result;
                }
            }
            if !batch.is_empty() {
                // Others' calls ride along: send on a task of its own, so that this caller
                // giving up cannot cancel their request.
                tokio::spawn(self.send(channel.clone(), batch, slot));
            }
            if !still_queued {
                return answer.await.unwrap_or_else(|_| Err(lost()));
            }
        }
    }

    /// Before a slot holder takes its batch: while another request to the endpoint is under
    /// way (so a lone caller never waits) and the queue has room, lets the tasks that are
    /// ready to run (typically the callers an answer just woke) add their calls, for as long
    /// as each pass adds some, within [`Coalescing::linger`]. Yielding instead of sleeping:
    /// the timer's millisecond resolution would overshoot the bound, and a pass that adds
    /// nothing ends the wait at once, so it costs no CPU to speak of.
    async fn linger(&self) {
        let busy = |s: &Self| s.slots.available_permits() + 1 < s.settings.max_in_flight.max(1);
        if self.settings.linger.is_zero() || !busy(self) {
            return;
        }
        let until = std::time::Instant::now() + self.settings.linger;
        let mut queued = self.lock().len();
        while queued < self.settings.max_calls && std::time::Instant::now() < until {
            tokio::task::yield_now().await;
            let now = self.lock().len();
            if now <= queued || !busy(self) {
                return;
            }
            queued = now;
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the calls to send next (skipping abandoned ones), and whether call `id` is
    /// still queued after them.
    fn take(&self, id: u64) -> (Vec<Waiting>, bool) {
        let mut queue = self.lock();
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(next) = queue.front() {
            if next.reply.is_closed() {
                queue.pop_front();
                continue;
            }
            let full = batch.len() >= self.settings.max_calls
                || (!batch.is_empty() && bytes + next.bytes > self.settings.max_bytes);
            if full {
                break;
            }
            bytes += next.bytes;
            batch.extend(queue.pop_front());
        }
        let still_queued = queue.iter().any(|w| w.id == id);
        (batch, still_queued)
    }

    /// Sends `batch` (holding `slot` until answered) and hands every call its answer.
    fn send(
        &self,
        channel: Connection,
        batch: Vec<Waiting>,
        slot: OwnedSemaphorePermit,
    ) -> impl Future<Output = ()> + Send + 'static {
        let no_batch = Arc::clone(&self.no_batch);
        async move {
            let _slot = slot;
            let (calls, replies): (Vec<Call>, Vec<oneshot::Sender<Answer>>) =
                batch.into_iter().map(|w| (w.call, w.reply)).unzip();
            if calls.len() == 1 || no_batch.load(Ordering::Relaxed) {
                return one_by_one(channel, calls, replies).await;
            }
            // Kept for an endpoint without `Batch`, as every retry keeps its request.
            let request = v1::BatchRequest {
                calls: calls
                    .iter()
                    .map(|call| v1::BatchCall {
                        request: Some(call.clone()),
                    })
                    .collect(),
            };
            match IdempotencyClient::new(channel.clone()).batch(request).await {
                Err(status) if refused_as_a_batch(&status) => {
                    if status.code() == Code::Unimplemented {
                        no_batch.store(true, Ordering::Relaxed);
                    }
                    one_by_one(channel, calls, replies).await;
                }
                answers => deliver(answers, replies),
            }
        }
    }
}

/// Whether the server refused the batch itself, before running any of its calls: `Batch`
/// unknown (`UNIMPLEMENTED`, an older server), or the batch malformed or too large for it
/// (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`, e.g. a request limit configured below
/// [`Coalescing::max_bytes`]). Its calls are then sent one by one, and each gets the answer
/// it would get alone; a whole-batch failure of any other kind (connection lost, timeout,
/// `UNAVAILABLE`) fails each call the same way, for the retry loop to handle.
fn refused_as_a_batch(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unimplemented | Code::InvalidArgument | Code::ResourceExhausted
    )
}

/// Sends each call as its own unary request, concurrently.
async fn one_by_one(channel: Connection, calls: Vec<Call>, replies: Vec<oneshot::Sender<Answer>>) {
    let sends = calls.into_iter().zip(replies).map(|(call, reply)| {
        let channel = channel.clone();
        async move {
            // The caller may have given up; its answer is then dropped.
            let _ = reply.send(unary(channel, call).await);
        }
    });
    futures::future::join_all(sends).await;
}

/// Hands each caller its reply from a batch's `answers`.
fn deliver(
    answers: Result<Response<v1::BatchResponse>, Status>,
    replies: Vec<oneshot::Sender<Answer>>,
) {
    let response = match answers {
        Ok(response) => response,
        Err(status) => {
            for reply in replies {
                let _ = reply.send(Err(status.clone()));
            }
            return;
        }
    };
    let (metadata, response, _) = response.into_parts();
    if response.replies.len() != replies.len() {
        let status = Status::internal(format!(
            "a batch of {} calls was answered with {} replies",
            replies.len(),
            response.replies.len()
        ));
        for reply in replies {
            let _ = reply.send(Err(status.clone()));
        }
        return;
    }
    for (answer, reply) in response.replies.into_iter().zip(replies) {
        let answer = match answer.reply {
            Some(Reply::Error(error)) => Err(status::from_call_error(error)),
            Some(found) => Ok(Response::from_parts(
                metadata.clone(),
                found,
                Extensions::default(),
            )),
            None => Err(Status::internal("a batch reply without an answer")),
        };
        let _ = reply.send(answer);
    }
}

/// Sends `call` as the unary rpc it stands for.
async fn unary(channel: Connection, call: Call) -> Answer {
    let mut client = IdempotencyClient::new(channel);
    match call {
        Call::Claim(r) => client.claim(r).await.map(|r| r.map(Reply::Claim)),
        Call::Start(r) => client.start(r).await.map(|r| r.map(Reply::Record)),
        Call::RecordExternalCall(r) => client
            .record_external_call(r)
            .await
            .map(|r| r.map(Reply::Record)),
        Call::Renew(r) => client.renew(r).await.map(|r| r.map(Reply::Record)),
        Call::Complete(r) => client.complete(r).await.map(|r| r.map(Reply::Record)),
        Call::Fail(r) => client.fail(r).await.map(|r| r.map(Reply::Record)),
        Call::Release(r) => client.release(r).await.map(|r| r.map(Reply::Record)),
        Call::Cancel(r) => client.cancel(r).await.map(|r| r.map(Reply::Record)),
    }
}

/// The answer of a call whose batch was dropped before answering (the runtime is shutting
/// down): it may have been sent.
fn lost() -> Status {
    Status::unavailable("the batch carrying this call was dropped before its answer")
}
