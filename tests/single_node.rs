//! Black-box tests of one `idemd`: concurrent first claims, replay, mismatch, takeover
//! after lease expiry, and expiry by the leader's sweep.

use std::time::{Duration, Instant};

use idem_client::{ClaimOutcome, ClientError};
use idem_core::{ClaimKind, Risk, State};
use idem_tests::{claim, client, result, target, Node, NodeOptions};

const BODY: &str = r#"{"amount": 1000, "currency": "EUR"}"#;
const SAME_BODY_OTHER_SPELLING: &str = r#"{ "currency":"EUR", "amount":1000.0 }"#;
const OTHER_BODY: &str = r#"{"amount": 2000, "currency": "EUR"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_have_one_winner_then_replay_and_mismatch() {
    let node = Node::start(NodeOptions::default());
    let client = client(&[node.endpoint()]);
    let key = target("order-1");

    let claims = run_concurrently(
        64,
        |i| {
            let body = if i % 2 == 0 {
                BODY
            } else {
                SAME_BODY_OTHER_SPELLING
            };
            claim(&key, body)
        },
        &client,
    )
    .await;
    let winners: Vec<_> = claims
        .iter()
        .filter(|c| c.outcome.kind() == ClaimKind::Acquired)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one ACQUIRED: {claims:?}");
    let losers = claims
        .iter()
        .filter(|c| c.outcome.kind() == ClaimKind::InProgress)
        .count();
    assert_eq!(losers, 63, "all others IN_PROGRESS");
    let operation_id = winners[0].operation_id;
    assert!(claims.iter().all(|c| c.operation_id == operation_id));

    let fence = winners[0].fence().unwrap();
    client.start(&key, fence).await.unwrap();
    let done = client.complete(&key, fence, &result("ch_1")).await.unwrap();
    assert_eq!(done.state, State::Completed);

    let replays = run_concurrently(64, |_| claim(&key, BODY), &client).await;
    for replay in &replays {
        match &replay.outcome {
            ClaimOutcome::Completed { result: r } => assert_eq!(r, &result("ch_1")),
            other => panic!("expected COMPLETED, got {other:?}"),
        }
    }

    let before = client.get(&key).await.unwrap().record;
    let mismatch = client.claim(claim(&key, OTHER_BODY)).await.unwrap();
    assert_eq!(mismatch.outcome, ClaimOutcome::FingerprintMismatch);
    let after = client.get(&key).await.unwrap().record;
    assert_eq!(after, before, "a mismatch never changes the record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_after_lease_expiry_fences_the_late_worker() {
    let node = Node::start(NodeOptions::default());
    let client = client(&[node.endpoint()]);
    let key = target("order-2");
    let lease = Duration::from_millis(300);

    let first = client.claim(claim(&key, BODY).lease(lease)).await.unwrap();
    let old_fence = first.fence().expect("first claim owns");
    client.start(&key, old_fence).await.unwrap();
    tokio::time::sleep(lease + Duration::from_millis(150)).await;

    let taker = client.claim(claim(&key, BODY).lease(lease)).await.unwrap();
    let ClaimOutcome::TakenOver {
        fence,
        previous_stage,
        ..
    } = taker.outcome
    else {
        panic!("expected TAKEN_OVER, got {:?}", taker.outcome);
    };
    assert_eq!(fence, old_fence + 1);
    assert_eq!(previous_stage, Some(idem_core::Stage::NotCalled));

    let late = client
        .complete(&key, old_fence, &result("late"))
        .await
        .unwrap_err();
    assert_eq!(late.reason(), "STALE_FENCE", "{late}");
    client
        .complete(&key, fence, &result("taker"))
        .await
        .unwrap();

    let replay = client.claim(claim(&key, BODY)).await.unwrap();
    assert_eq!(
        replay.outcome,
        ClaimOutcome::Completed {
            result: result("taker")
        }
    );
    assert_eq!(replay.attempts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_removes_only_terminal_records_past_retention() {
    let options = NodeOptions::default().arg("--sweep-interval", "200ms");
    let node = Node::start(options);
    let client = client(&[node.endpoint()]);
    let retention = Duration::from_secs(1);
    let keyed = |name: &str| {
        (
            target(name),
            claim(&target(name), BODY).retention(retention),
        )
    };

    let (done, request) = keyed("done");
    let fence = client.claim(request).await.unwrap().fence().unwrap();
    client.complete(&done, fence, &result("r")).await.unwrap();

    let (pending, request) = keyed("pending");
    client.claim(request).await.unwrap();

    let (running, request) = keyed("running");
    let fence = client.claim(request).await.unwrap().fence().unwrap();
    client.start(&running, fence).await.unwrap();

    let (stuck, request) = keyed("stuck");
    let request = request.risk(Risk::High).lease(Duration::from_millis(200));
    let fence = client.claim(request).await.unwrap().fence().unwrap();
    client.record_calling(&stuck, fence, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let escalated = client.claim(claim(&stuck, BODY)).await.unwrap();
    assert_eq!(escalated.outcome.kind(), ClaimKind::NeedsReconciliation);

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match client.get(&done).await {
            Err(ClientError::NotFound { .. }) => break,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => panic!("terminal record not expired in time: {other:?}"),
        }
    }
    // Well past the retention of every record: only the terminal one went.
    tokio::time::sleep(Duration::from_millis(800)).await;
    for (key, state) in [
        (&pending, State::Pending),
        (&running, State::InProgress),
        (&stuck, State::NeedsReconciliation),
    ] {
        let record = client.get(key).await.unwrap().record;
        assert_eq!(record.state, state);
    }
    assert!(
        node.metrics().contains("idem_sweep_deleted"),
        "sweep metric exported"
    );
}

/// Sends `n` claims at once (built by `request(i)`) and returns every answer.
async fn run_concurrently(
    n: usize,
    request: impl Fn(usize) -> idem_client::ClaimRequest,
    client: &idem_client::Client,
) -> Vec<idem_client::Claim> {
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let client = client.clone();
            let request = request(i);
            tokio::spawn(async move { client.claim(request).await })
        })
        .collect();
    let mut claims = Vec::with_capacity(n);
    for handle in handles {
        claims.push(handle.await.unwrap().expect("claim answered"));
    }
    claims
}
