//! Retry and routing against tiny in-process fake nodes (`support::fake`): transient failures are retried with the very same request, NOT_LEADER
//! follows the hint and is remembered, definite rejections are returned at once.

use crate::support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_client::convert::record_to_proto;
use idem_client::{ClaimOutcome, Client};
use idem_proto::{reason, status, v1};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

use support::fake::{self, Fake};
use support::{claim, dead_addr, options, record, target, target_of};

/// A failure the mock answers before it succeeds.
#[derive(Clone, Debug)]
enum Fault {
    /// UNAVAILABLE without an idem reason (a proxy or a dying connection).
    Unavailable,
    /// UNAVAILABLE_OUTCOME_UNKNOWN.
    OutcomeUnknown,
    /// STALE_FENCE.
    Stale,
    /// No answer for this long (longer than the client's request timeout).
    Hang(Duration),
}

#[derive(Default)]
struct State_ {
    faults: Mutex<VecDeque<Fault>>,
    /// When set, every call answers NOT_LEADER pointing here.
    leader: Option<String>,
    calls: AtomicUsize,
    claims: Mutex<Vec<v1::ClaimRequest>>,
    starts: Mutex<Vec<v1::StartRequest>>,
}

#[derive(Clone, Default)]
struct Mock(Arc<State_>);

impl Mock {
    fn failing(faults: impl IntoIterator<Item = Fault>) -> Self {
        let state = State_ {
            faults: Mutex::new(faults.into_iter().collect()),
            ..State_::default()
        };
        Mock(Arc::new(state))
    }

    fn follower_of(leader: &str) -> Self {
        let state = State_ {
            leader: Some(leader.to_owned()),
            ..State_::default()
        };
        Mock(Arc::new(state))
    }

    fn calls(&self) -> usize {
        self.0.calls.load(Ordering::SeqCst)
    }

    /// Counts the call and answers its fault, if one is due.
    async fn gate(&self) -> Result<(), Status> {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(leader) = &self.0.leader {
            return Err(status::not_leader(Some(1), Some(leader)));
        }
        let fault = self.0.faults.lock().unwrap().pop_front();
        match fault {
            None => Ok(()),
            Some(Fault::Unavailable) => Err(Status::unavailable("connection reset")),
            Some(Fault::OutcomeUnknown) => Err(status::error(
                reason::UNAVAILABLE_OUTCOME_UNKNOWN,
                "commit timed out",
                [],
            )),
            Some(Fault::Stale) => Err(status::error(reason::STALE_FENCE, "stale fence", [])),
            Some(Fault::Hang(d)) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
        }
    }
}

impl Fake for Mock {
    async fn claim(
        &self,
        request: Request<v1::ClaimRequest>,
    ) -> Result<Response<v1::ClaimResponse>, Status> {
        self.0
            .claims
            .lock()
            .unwrap()
            .push(request.get_ref().clone());
        self.gate().await?;
        Ok(Response::new(support::acquired()))
    }

    async fn start(
        &self,
        request: Request<v1::StartRequest>,
    ) -> Result<Response<v1::RecordResponse>, Status> {
        let wire = request.into_inner();
        self.0.starts.lock().unwrap().push(wire.clone());
        self.gate().await?;
        let target = target_of(wire.scope, wire.key);
        Ok(Response::new(v1::RecordResponse {
            record: Some(record_to_proto(&record(&target, wire.fence))),
        }))
    }

    async fn get(&self, _: Request<v1::GetRequest>) -> Result<Response<v1::GetResponse>, Status> {
        self.gate().await?;
        Err(status::error(reason::NOT_FOUND, "no such record", []))
    }
}

/// Serves `mock` on a fresh loopback port; answers its `host:port`.
async fn serve(mock: Mock) -> String {
    let (listener, addr) = support::listener().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(fake::service(mock))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    addr
}

#[tokio::test]
async fn transient_unavailable_is_retried_with_the_same_request() {
    let mock = Mock::failing([Fault::Unavailable, Fault::Unavailable, Fault::Unavailable]);
    let addr = serve(mock.clone()).await;
    let client = Client::connect(vec![addr], options(5)).unwrap();

    let claim = client.claim(claim("acme")).await.unwrap();
    assert_eq!(claim.fence(), Some(1));
    assert!(matches!(claim.outcome, ClaimOutcome::Acquired { .. }));
    assert_eq!(mock.calls(), 4);

    // Every attempt carried the same key, holder and fingerprint.
    let claims = mock.0.claims.lock().unwrap();
    assert_eq!(claims.len(), 4);
    assert!(claims.iter().all(|c| *c == claims[0]));
    assert_eq!(claims[0].holder, claim.holder.as_str());
}

#[tokio::test]
async fn outcome_unknown_is_retried_with_the_same_fence() {
    let mock = Mock::failing([Fault::OutcomeUnknown, Fault::OutcomeUnknown]);
    let addr = serve(mock.clone()).await;
    let client = Client::connect(vec![addr], options(5)).unwrap();

    let record = client.start(&target("acme"), 7).await.unwrap();
    assert_eq!(record.fence, 7);
    assert_eq!(record.key, target("acme"));
    let starts = mock.0.starts.lock().unwrap();
    assert_eq!(starts.len(), 3);
    assert!(starts.iter().all(|s| s.fence == 7 && *s == starts[0]));
}

#[tokio::test]
async fn outcome_unknown_moves_on_to_another_node() {
    // A leader cut off from its quorum answers OUTCOME_UNKNOWN until it is replaced.
    let stale = Mock::failing(vec![Fault::OutcomeUnknown; 10]);
    let stale_addr = serve(stale.clone()).await;
    let healthy = Mock::default();
    let healthy_addr = serve(healthy.clone()).await;
    let client = Client::connect(vec![stale_addr, healthy_addr.clone()], options(4)).unwrap();

    let claim = client.claim(claim("acme")).await.unwrap();
    assert_eq!((stale.calls(), healthy.calls()), (1, 1));
    // The same holder was sent to both: a claim that did land on the old leader is
    // redelivered to us, not taken by a second attempt.
    assert_eq!(
        stale.0.claims.lock().unwrap()[0],
        healthy.0.claims.lock().unwrap()[0]
    );
    assert_eq!(
        healthy.0.claims.lock().unwrap()[0].holder,
        claim.holder.as_str()
    );
    assert_eq!(
        client.preferred_endpoint(),
        format!("http://{healthy_addr}")
    );
}

#[tokio::test]
async fn a_timed_out_attempt_is_retried() {
    let mock = Mock::failing([Fault::Hang(Duration::from_secs(2))]);
    let addr = serve(mock.clone()).await;
    let mut opts = options(3);
    opts.request_timeout = Duration::from_millis(200);
    let client = Client::connect(vec![addr], opts).unwrap();

    let claim = client.claim(claim("acme")).await.unwrap();
    assert_eq!(claim.fence(), Some(1));
    assert_eq!(mock.calls(), 2);
}

#[tokio::test]
async fn definite_rejections_are_not_retried() {
    let mock = Mock::failing([Fault::Stale]);
    let addr = serve(mock.clone()).await;
    let client = Client::connect(vec![addr], options(5)).unwrap();

    let err = client.start(&target("acme"), 1).await.unwrap_err();
    assert_eq!(err.reason(), "STALE_FENCE");
    assert_eq!(mock.calls(), 1);

    let err = client.get(&target("acme")).await.unwrap_err();
    assert_eq!(err.reason(), "NOT_FOUND");
    assert_eq!(mock.calls(), 2);
}

#[tokio::test]
async fn not_leader_follows_the_hint_and_remembers_the_leader() {
    let leader = Mock::default();
    let leader_addr = serve(leader.clone()).await;
    let follower = Mock::follower_of(&leader_addr);
    let follower_addr = serve(follower.clone()).await;
    let client = Client::connect(vec![follower_addr], options(3)).unwrap();

    let claim = client.claim(claim("acme")).await.unwrap();
    assert_eq!(claim.fence(), Some(1));
    assert_eq!(follower.calls(), 1);
    assert_eq!(leader.calls(), 1);
    assert_eq!(client.preferred_endpoint(), format!("http://{leader_addr}"));
    assert_eq!(client.endpoints().len(), 2);

    // The next call goes straight to the remembered leader.
    client.start(&target("acme"), 1).await.unwrap();
    assert_eq!(follower.calls(), 1);
    assert_eq!(leader.calls(), 2);
}

#[tokio::test]
async fn unreachable_endpoints_are_skipped_round_robin() {
    let live = Mock::default();
    let live_addr = serve(live.clone()).await;
    let client = Client::connect(vec![dead_addr().await, live_addr.clone()], options(3)).unwrap();

    client.claim(claim("acme")).await.unwrap();
    assert_eq!(live.calls(), 1);
    assert_eq!(client.preferred_endpoint(), format!("http://{live_addr}"));
}

#[tokio::test]
async fn exhausted_retries_report_unknown_writes_and_unavailable_reads() {
    let mock = Mock::failing(vec![Fault::Unavailable; 10]);
    let addr = serve(mock.clone()).await;
    let client = Client::connect(vec![addr], options(3)).unwrap();

    let err = client.claim(claim("acme")).await.unwrap_err();
    assert_eq!(err.reason(), "UNAVAILABLE_OUTCOME_UNKNOWN");
    assert_eq!(mock.calls(), 3);
    let err = client.get(&target("acme")).await.unwrap_err();
    assert_eq!(err.reason(), "UNAVAILABLE");
    assert_eq!(mock.calls(), 6);

    // Nothing listening: the write was never sent, so it is plainly unavailable.
    let client = Client::connect(vec![dead_addr().await], options(2)).unwrap();
    let err = client.claim(claim("acme")).await.unwrap_err();
    assert_eq!(err.reason(), "UNAVAILABLE");
}
