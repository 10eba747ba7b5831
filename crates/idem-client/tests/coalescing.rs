//! Coalescing against an in-process fake node: calls made at the same time through one
//! client share `Batch` requests while the endpoint is busy, each gets its own answer (its
//! own error included), a lone call goes out at once as the plain rpc, abandoned calls are
//! not sent late, a batch refused as a whole is sent again call by call, a batch answered
//! with the wrong number of replies fails its calls rather than mix their answers up, and a
//! node without `Batch` gets every call one by one.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use idem_client::{Client, ClientOptions, Coalescing};
use idem_proto::v1::batch_call::Request as Call;
use idem_proto::v1::batch_reply::Reply;
use idem_proto::{reason, status, v1};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

use support::fake::{self, Fake};
use support::{claim, options};

/// A node that answers claims after `delay`: ACQUIRED with the fence named by the tenant
/// (`t7` gets fence 7), or INVALID_KEY for a tenant starting with `bad`.
#[derive(Default)]
struct State_ {
    delay: Duration,
    no_batch: bool,
    /// Refuses every batch as above its request limit.
    too_large: bool,
    /// Answers every batch with one reply too few (a broken server).
    short_reply: bool,
    unary: AtomicUsize,
    batches: Mutex<Vec<usize>>,
    tenants: Mutex<Vec<String>>,
}

#[derive(Clone, Default)]
struct Node(Arc<State_>);

impl Node {
    fn new(delay: Duration, no_batch: bool) -> Self {
        Node(Arc::new(State_ {
            delay,
            no_batch,
            ..State_::default()
        }))
    }

    fn unary(&self) -> usize {
        self.0.unary.load(Ordering::SeqCst)
    }

    fn batches(&self) -> Vec<usize> {
        self.0.batches.lock().unwrap().clone()
    }

    async fn answer(&self, request: v1::ClaimRequest) -> Result<v1::ClaimResponse, Status> {
        let tenant = request.scope.unwrap().tenant;
        self.0.tenants.lock().unwrap().push(tenant.clone());
        tokio::time::sleep(self.0.delay).await;
        if tenant.starts_with("bad") {
            return Err(status::error(
                reason::INVALID_KEY,
                "refused by the fake",
                [],
            ));
        }
        Ok(v1::ClaimResponse {
            fence: tenant[1..].parse().unwrap(),
            ..support::acquired()
        })
    }
}

impl Fake for Node {
    async fn claim(
        &self,
        request: Request<v1::ClaimRequest>,
    ) -> Result<Response<v1::ClaimResponse>, Status> {
        self.0.unary.fetch_add(1, Ordering::SeqCst);
        self.answer(request.into_inner()).await.map(Response::new)
    }

    async fn batch(
        &self,
        request: Request<v1::BatchRequest>,
    ) -> Result<Response<v1::BatchResponse>, Status> {
        if self.0.no_batch {
            return Err(Status::unimplemented("an older node"));
        }
        let calls = request.into_inner().calls;
        self.0.batches.lock().unwrap().push(calls.len());
        if self.0.too_large {
            return Err(status::error(
                reason::REQUEST_TOO_LARGE,
                "request message too large",
                [],
            ));
        }
        let replies = join_all(calls.into_iter().map(|call| async move {
            let Some(Call::Claim(claim)) = call.request else {
                panic!("the test only claims");
            };
            let reply = match self.answer(claim).await {
                Ok(answer) => Reply::Claim(answer),
                Err(status) => Reply::Error(status::to_call_error(&status)),
            };
            v1::BatchReply { reply: Some(reply) }
        }))
        .await;
        let mut replies = replies;
        if self.0.short_reply {
            replies.pop();
        }
        Ok(Response::new(v1::BatchResponse { replies }))
    }
}

/// Serves `node` on a fresh loopback port; answers a client with `coalescing`.
async fn client_of(node: Node, coalescing: Coalescing) -> Client {
    let (listener, addr) = support::listener().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(fake::service(node))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let options = ClientOptions {
        coalescing,
        ..options(1)
    };
    Client::connect(vec![addr], options).unwrap()
}

fn one_at_a_time() -> Coalescing {
    Coalescing {
        max_in_flight: 1,
        ..Coalescing::default()
    }
}

/// Claims tenants `t1..=n` (`bad<i>` where `bad(i)`) at once; answers each caller's fence
/// or error reason, in tenant order.
async fn claim_all(client: &Client, n: u64, bad: impl Fn(u64) -> bool) -> Vec<Result<u64, String>> {
    let calls = (1..=n).map(|i| {
        let client = client.clone();
        let tenant = if bad(i) {
            format!("bad{i}")
        } else {
            format!("t{i}")
        };
        tokio::spawn(async move {
            match client.claim(claim(&tenant)).await {
                Ok(claim) => Ok(claim.fence().unwrap()),
                Err(error) => Err(error.reason().to_owned()),
            }
        })
    });
    join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn calls_gather_while_the_endpoint_is_busy_and_get_their_own_answers() {
    let node = Node::new(Duration::from_millis(300), false);
    let client = client_of(node.clone(), one_at_a_time()).await;

    let answers = claim_all(&client, 20, |i| i == 5).await;
    for (i, answer) in (1..=20).zip(&answers) {
        if i == 5 {
            assert_eq!(answer, &Err(reason::INVALID_KEY.to_owned()));
        } else {
            assert_eq!(answer, &Ok(i), "tenant t{i}");
        }
    }
    // The first call found the endpoint idle and went alone; the 19 that came while it was
    // under way went together.
    assert_eq!(node.unary(), 1);
    assert_eq!(node.batches(), vec![19]);

    // A lone call is the plain rpc.
    assert_eq!(claim_all(&client, 1, |_| false).await, vec![Ok(1)]);
    assert_eq!(node.unary(), 2);
}

#[tokio::test]
async fn batches_respect_their_call_limit() {
    let node = Node::new(Duration::from_millis(300), false);
    let coalescing = Coalescing {
        max_calls: 8,
        ..one_at_a_time()
    };
    let client = client_of(node.clone(), coalescing).await;

    let answers = claim_all(&client, 20, |_| false).await;
    assert_eq!(answers, (1..=20).map(Ok).collect::<Vec<_>>());
    assert_eq!(node.unary(), 1);
    assert_eq!(node.batches(), vec![8, 8, 3]);
}

#[tokio::test]
async fn off_sends_every_call_alone_and_at_once() {
    let node = Node::new(Duration::from_millis(300), false);
    let client = client_of(node.clone(), Coalescing::off()).await;

    let started = tokio::time::Instant::now();
    let answers = claim_all(&client, 20, |_| false).await;
    assert_eq!(answers, (1..=20).map(Ok).collect::<Vec<_>>());
    assert_eq!((node.unary(), node.batches()), (20, vec![]));
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "ran concurrently"
    );
}

#[tokio::test]
async fn a_node_without_batch_gets_the_calls_one_by_one() {
    let node = Node::new(Duration::from_millis(300), true);
    let client = client_of(node.clone(), one_at_a_time()).await;

    let answers = claim_all(&client, 10, |_| false).await;
    assert_eq!(answers, (1..=10).map(Ok).collect::<Vec<_>>());
    assert_eq!(node.unary(), 10);
    // Learned once: later calls are not offered as a batch again.
    let answers = claim_all(&client, 10, |_| false).await;
    assert_eq!(answers, (1..=10).map(Ok).collect::<Vec<_>>());
    assert_eq!(node.unary(), 20);
}

#[tokio::test]
async fn a_batch_refused_as_too_large_is_sent_one_by_one() {
    let node = Node(Arc::new(State_ {
        delay: Duration::from_millis(300),
        too_large: true,
        ..State_::default()
    }));
    let client = client_of(node.clone(), one_at_a_time()).await;

    let answers = claim_all(&client, 10, |_| false).await;
    assert_eq!(answers, (1..=10).map(Ok).collect::<Vec<_>>());
    assert_eq!(node.batches(), vec![9]);
    assert_eq!(node.unary(), 10);
}

#[tokio::test]
async fn a_batch_answered_with_too_few_replies_fails_each_of_its_calls() {
    let node = Node(Arc::new(State_ {
        delay: Duration::from_millis(300),
        short_reply: true,
        ..State_::default()
    }));
    let client = client_of(node.clone(), one_at_a_time()).await;

    let answers = claim_all(&client, 10, |_| false).await;
    // The first call went alone; no call of the batch gets another call's answer.
    assert_eq!(answers[0], Ok(1));
    assert_eq!(node.batches(), vec![9]);
    assert!(
        answers[1..].iter().all(|answer| answer.is_err()),
        "{answers:?}"
    );
}

#[tokio::test]
async fn an_abandoned_call_is_not_sent_late() {
    let node = Node::new(Duration::from_millis(300), false);
    let client = client_of(node.clone(), one_at_a_time()).await;

    let busy = {
        let client = client.clone();
        tokio::spawn(async move { client.claim(claim("t1")).await.unwrap().fence() })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Queued behind t1, then given up on.
    let gave_up = tokio::time::timeout(Duration::from_millis(50), client.claim(claim("t2"))).await;
    assert!(gave_up.is_err());
    assert_eq!(busy.await.unwrap(), Some(1));
    assert_eq!(claim_all(&client, 3, |_| false).await.len(), 3);
    let tenants = node.0.tenants.lock().unwrap().clone();
    assert_eq!(
        tenants.iter().filter(|t| *t == "t2").count(),
        1,
        "{tenants:?}"
    );
    assert_eq!(tenants[0], "t1");
}
