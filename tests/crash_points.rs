//! kill -9 on both sides of each commit point, then restart: nothing acknowledged is lost,
//! nothing runs twice, and the retry gets the right outcome.
//!
//! The crash is injected with idemd's failpoints (`IDEM_FAILPOINTS=<point>`, which abort
//! the process at that point, like `kill -9`): before a claim is proposed, after it
//! committed but before the reply, and after a completion committed but before the reply.

use std::time::Duration;

use idem_client::{ClaimOutcome, Client, ClientOptions, RetryPolicy};
use idem_core::{Holder, State};
use idem_tests::{claim, result, target, Node, NodeOptions};

const BODY: &str = r#"{"amount": 700, "currency": "USD"}"#;

/// A client that reports the first failure instead of retrying, like a caller whose
/// request died with the server.
fn one_shot(node: &Node) -> Client {
    let options = ClientOptions {
        retry: RetryPolicy::no_retry(),
        ..ClientOptions::default()
    };
    Client::connect(vec![node.endpoint()], options).unwrap()
}

fn retrying(node: &Node) -> Client {
    idem_tests::client(&[node.endpoint()])
}

/// Restarts `node` with a failpoint armed.
fn arm(node: &mut Node, point: &str) {
    node.terminate();
    node.spawn(&[("IDEM_FAILPOINTS", point)]);
    node.wait_ready();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_before_the_claim_commits() {
    let mut node = Node::start(NodeOptions::default());
    arm(&mut node, "claim.before_commit");
    let key = target("crash-1");
    let holder = Holder::new("worker-1-attempt-1").unwrap();
    let request = claim(&key, BODY).holder(holder.clone());

    let lost = one_shot(&node).claim(request.clone()).await.unwrap_err();
    assert!(lost.is_outcome_unknown(), "the caller cannot know: {lost}");
    assert!(!node.wait_exit(Duration::from_secs(10)).success());
    node.restart();

    let retry = retrying(&node).claim(request).await.unwrap();
    assert!(
        matches!(
            retry.outcome,
            ClaimOutcome::Acquired {
                redelivered: false,
                ..
            }
        ),
        "{retry:?}"
    );
    assert_eq!(
        (retry.version, retry.attempts),
        (1, 1),
        "nothing was committed before"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_claim_commits_before_the_reply() {
    let mut node = Node::start(NodeOptions::default());
    arm(&mut node, "claim.after_commit");
    let key = target("crash-2");
    let holder = Holder::new("worker-2-attempt-1").unwrap();
    let request = claim(&key, BODY).holder(holder);

    let lost = one_shot(&node).claim(request.clone()).await.unwrap_err();
    assert!(lost.is_outcome_unknown(), "{lost}");
    assert!(!node.wait_exit(Duration::from_secs(10)).success());
    node.restart();

    let client = retrying(&node);
    let retry = client.claim(request).await.unwrap();
    assert!(
        matches!(
            retry.outcome,
            ClaimOutcome::Acquired {
                redelivered: true,
                ..
            }
        ),
        "{retry:?}"
    );
    assert_eq!(
        (retry.version, retry.attempts),
        (1, 1),
        "the claim ran once"
    );
    let other = client.claim(claim(&key, BODY)).await.unwrap();
    assert_eq!(other.outcome.kind(), idem_core::ClaimKind::InProgress);
    let fence = retry.fence().unwrap();
    client.complete(&key, fence, &result("ch_2")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_completion_commits_before_the_reply() {
    let mut node = Node::start(NodeOptions::default());
    let key = target("crash-3");
    let owned = retrying(&node).claim(claim(&key, BODY)).await.unwrap();
    let fence = owned.fence().unwrap();
    arm(&mut node, "complete.after_commit");

    let lost = one_shot(&node)
        .complete(&key, fence, &result("ch_3"))
        .await
        .unwrap_err();
    assert!(lost.is_outcome_unknown(), "{lost}");
    assert!(!node.wait_exit(Duration::from_secs(10)).success());
    node.restart();

    let client = retrying(&node);
    let stored = client.get(&key).await.unwrap().record;
    assert_eq!(
        stored.state,
        State::Completed,
        "the acknowledged-to-Raft completion survived"
    );
    let again = client.complete(&key, fence, &result("ch_3")).await.unwrap();
    assert_eq!(
        again.version, stored.version,
        "re-sending the completion changes nothing"
    );
    let replay = client.claim(claim(&key, BODY)).await.unwrap();
    assert_eq!(
        replay.outcome,
        ClaimOutcome::Completed {
            result: result("ch_3")
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_and_restart_keeps_every_acknowledged_write() {
    let mut node = Node::start(NodeOptions::default());
    let client = retrying(&node);
    let mut completed = Vec::new();
    for i in 0..50 {
        let key = target(&format!("durable-{i}"));
        let fence = client
            .claim(claim(&key, BODY))
            .await
            .unwrap()
            .fence()
            .unwrap();
        client
            .complete(&key, fence, &result(&format!("ch_{i}")))
            .await
            .unwrap();
        completed.push(key);
    }
    node.kill9();
    node.restart();
    let client = retrying(&node);
    for (i, key) in completed.iter().enumerate() {
        let replay = client.claim(claim(key, BODY)).await.unwrap();
        assert_eq!(
            replay.outcome,
            ClaimOutcome::Completed {
                result: result(&format!("ch_{i}"))
            }
        );
    }
}
