//! Black-box tests of a replicated cluster: real `idemd` processes on loopback, each with a
//! TOML configuration listing the initial members, short Raft timeouts (heartbeat 100 ms,
//! election 500 ms) so that faults heal within seconds.
//!
//! - same-key claims sent to different nodes: exactly one owner;
//! - `kill -9` of the leader under load: failover time (measured and printed), nothing
//!   acknowledged lost, never two owners of one key;
//! - a follower stopped during 10 000 writes catches up through a snapshot;
//! - membership 3 → 5 → 3 under load without a client-visible error;
//! - nodes restarted on their data directories rejoin with the same membership and serve.
//!
//! Clusters run one at a time (see `idem_tests::Cluster`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idem_client::{ClaimOutcome, Client, ClientOptions, Member, RetryPolicy};
use idem_core::{ClaimKind, State, StoredResult};
use idem_tests::{claim, result, target, Cluster, ClusterOptions};
use tokio::task::JoinSet;

const BODY: &str = r#"{"amount": 1000, "currency": "EUR"}"#;

/// Upper bound on a leader failover: from `kill -9` to the first write served.
const FAILOVER_BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_key_claims_through_different_nodes_have_one_winner() {
    let cluster = Cluster::start(3, ClusterOptions::default()).await;
    let clients: Vec<Client> = cluster
        .ids()
        .iter()
        .map(|&id| cluster.client_of(id))
        .collect();

    for round in 0..10 {
        let key = target(&format!("same-{round}"));
        let mut tasks = JoinSet::new();
        for i in 0..24 {
            let client = clients[i % clients.len()].clone();
            let request = claim(&key, BODY);
            tasks.spawn(async move { client.claim(request).await });
        }
        let claims: Vec<_> = tasks
            .join_all()
            .await
            .into_iter()
            .map(|c| c.expect("claim answered"))
            .collect();
        let winners = claims
            .iter()
            .filter(|c| c.outcome.kind() == ClaimKind::Acquired)
            .count();
        assert_eq!(
            winners, 1,
            "round {round}: exactly one ACQUIRED: {claims:?}"
        );
        assert!(
            claims
                .iter()
                .all(|c| c.owns() || c.outcome.kind() == ClaimKind::InProgress),
            "round {round}: the others are IN_PROGRESS: {claims:?}"
        );
        let operation_id = claims[0].operation_id;
        assert!(claims.iter().all(|c| c.operation_id == operation_id));
    }
}

/// What writers saw acknowledged, and what failed.
#[derive(Default)]
struct Ledger {
    /// Every ACQUIRED / TAKEN_OVER answer: key name → fences handed out.
    owners: BTreeMap<String, Vec<u64>>,
    /// Acknowledged completions: key name → the stored result.
    completed: BTreeMap<String, StoredResult>,
    /// Calls that ended in an error (after the SDK's retries).
    errors: Vec<String>,
    /// Keys claimed twice with both answers owning (two live leases).
    double_owners: Vec<String>,
}

/// A writer: claims distinct keys `{prefix}-{n}` twice concurrently (two holders, as two
/// service instances retrying the same request), and the owner completes it, until `stop`.
async fn writer(client: Client, prefix: String, stop: Arc<AtomicBool>, ledger: Arc<Mutex<Ledger>>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("{prefix}-{n}");
        let key = target(&name);
        let (a, b) = tokio::join!(
            client.claim(claim(&key, BODY)),
            client.claim(claim(&key, BODY))
        );
        let mut fences = Vec::new();
        for answer in [a, b] {
            match answer {
                Ok(c) => fences.extend(c.fence()),
                Err(e) => ledger
                    .lock()
                    .unwrap()
                    .errors
                    .push(format!("claim {name}: {e}")),
            }
        }
        if fences.is_empty() {
            continue;
        }
        {
            let mut ledger = ledger.lock().unwrap();
            if fences.len() > 1 {
                ledger.double_owners.push(name.clone());
            }
            ledger.owners.insert(name.clone(), fences.clone());
        }
        let fence = *fences.iter().max().expect("a fence");
        let stored = result(&format!("res-{name}"));
        match client.complete(&key, fence, &stored).await {
            Ok(record) => {
                assert_eq!(record.state, State::Completed, "{name}");
                ledger.lock().unwrap().completed.insert(name, stored);
            }
            Err(e) => ledger
                .lock()
                .unwrap()
                .errors
                .push(format!("complete {name}: {e}")),
        }
    }
}

/// Starts `count` writers on `client`, each with its own key prefix.
fn start_writers(
    client: &Client,
    prefix: &str,
    count: usize,
) -> (Arc<AtomicBool>, Arc<Mutex<Ledger>>, JoinSet<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut tasks = JoinSet::new();
    for w in 0..count {
        tasks.spawn(writer(
            client.clone(),
            format!("{prefix}-w{w}"),
            stop.clone(),
            ledger.clone(),
        ));
    }
    (stop, ledger, tasks)
}

/// Checks the ledger against the cluster: every acknowledged completion replays COMPLETED
/// with its result, every acknowledged claim's record exists and carries the last owner's
/// fence, and no key ever had two owners at once.
async fn verify(client: &Client, ledger: &Ledger) {
    assert!(
        ledger.double_owners.is_empty(),
        "two live leases on {:?}",
        ledger.double_owners
    );
    for (name, fences) in &ledger.owners {
        let unique: BTreeSet<_> = fences.iter().collect();
        assert_eq!(
            unique.len(),
            fences.len(),
            "{name}: a fence handed out twice"
        );
        let record = client
            .get(&target(name))
            .await
            .unwrap_or_else(|e| panic!("acknowledged claim of {name} lost: {e}"))
            .record;
        assert_eq!(
            record.fence,
            *fences.iter().max().unwrap(),
            "{name}: the record's fence is the last owner's"
        );
    }
    for (name, stored) in &ledger.completed {
        let replay = client
            .claim(claim(&target(name), BODY))
            .await
            .unwrap_or_else(|e| panic!("replay of {name}: {e}"));
        assert_eq!(
            replay.outcome,
            ClaimOutcome::Completed {
                result: stored.clone()
            },
            "{name}: acknowledged completion replays"
        );
    }
}

/// A client that tries each call once with short timeouts (a failover probe).
fn probe_client(endpoints: Vec<String>) -> Client {
    let options = ClientOptions {
        connect_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_secs(1),
        retry: RetryPolicy::no_retry(),
        ..ClientOptions::default()
    };
    Client::connect(endpoints, options).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill9_under_load_fails_over_without_losing_acknowledged_writes() {
    let mut cluster = Cluster::start(3, ClusterOptions::default()).await;
    let client = cluster.client();
    let (stop, ledger, writers) = start_writers(&client, "failover", 6);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = ledger.lock().unwrap().completed.len();
    assert!(before > 0, "writers make progress before the kill");

    let old = cluster.leader().await;
    let survivors: Vec<u64> = cluster.ids().into_iter().filter(|&id| id != old).collect();
    let probe = probe_client(survivors.iter().map(|&id| cluster.endpoint(id)).collect());
    let killed_at = Instant::now();
    cluster.kill9(old);

    // Elected: a survivor reports itself leader. Serving: a write through survivors succeeds.
    let elected = cluster
        .wait_leader(FAILOVER_BOUND, &[old])
        .await
        .unwrap_or_else(|| panic!("no new leader within {FAILOVER_BOUND:?}"));
    let elected_after = killed_at.elapsed();
    let mut n = 0;
    let served_after = loop {
        n += 1;
        let key = target(&format!("probe-{n}"));
        if probe.claim(claim(&key, BODY)).await.is_ok_and(|c| c.owns()) {
            break killed_at.elapsed();
        }
        assert!(
            killed_at.elapsed() < FAILOVER_BOUND,
            "no write served within {FAILOVER_BOUND:?} after killing leader {old}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    eprintln!(
        "leader failover: node {old} killed, node {elected} elected after {} ms, first write served after {} ms",
        elected_after.as_millis(),
        served_after.as_millis()
    );
    assert!(served_after < FAILOVER_BOUND);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    writers.join_all().await;
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    assert!(
        ledger.completed.len() > before,
        "writers make progress after the failover"
    );
    eprintln!(
        "failover load: {} keys owned, {} completions acknowledged, {} calls failed after retries",
        ledger.owners.len(),
        ledger.completed.len(),
        ledger.errors.len()
    );

    cluster.restart(old).await;
    cluster.wait_caught_up(old, Duration::from_secs(30)).await;
    verify(&client, &ledger).await;
    // The restarted node serves too.
    let through_old = cluster.client_of(old);
    let c = through_old
        .claim(claim(&target("after-heal"), BODY))
        .await
        .unwrap();
    assert!(c.owns(), "{c:?}");
}

/// The highest log index covered by a snapshot file in `data_dir/snapshots`
/// (`snapshot-<index>-<term>-<nanos>.bin`, see idem-store), if any.
fn snapshot_index(data_dir: &Path) -> Option<u64> {
    std::fs::read_dir(data_dir.join("snapshots"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let rest = name.strip_prefix("snapshot-")?;
            if !name.ends_with(".bin") {
                return None;
            }
            rest.split('-').next()?.parse().ok()
        })
        .max()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_follower_catches_up_through_a_snapshot() {
    const WRITES: u64 = 10_000;
    const WRITERS: usize = 64;
    let options = ClusterOptions {
        snapshot_logs: Some(1000),
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(3, options).await;
    let leader = cluster.leader().await;
    let follower = cluster.ids().into_iter().find(|&id| id != leader).unwrap();
    let client = cluster.client();

    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..WRITERS {
        let (client, next, done, errors) =
            (client.clone(), next.clone(), done.clone(), errors.clone());
        tasks.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= WRITES {
                    break;
                }
                match client
                    .claim(claim(&target(&format!("bulk-{n}")), BODY))
                    .await
                {
                    Ok(c) if c.owns() => {}
                    Ok(c) => errors.lock().unwrap().push(format!("bulk-{n}: {c:?}")),
                    Err(e) => errors.lock().unwrap().push(format!("bulk-{n}: {e}")),
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while done.load(Ordering::Relaxed) < 500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopped_at = cluster.status(follower).await.unwrap().applied_index;
    tokio::task::block_in_place(|| cluster.stop(follower));
    tasks.join_all().await;
    let write_time = started.elapsed();
    let errors = std::mem::take(&mut *errors.lock().unwrap());
    assert!(
        errors.is_empty(),
        "{} failed writes: {errors:?}",
        errors.len()
    );

    let leader_status = cluster.status(leader).await.unwrap();
    let leader_snapshot = snapshot_index(&cluster.node(leader).data_dir());
    assert!(
        leader_snapshot.is_some_and(|i| i > stopped_at + 1000),
        "the leader snapshotted past the follower's position {stopped_at}: {leader_snapshot:?}"
    );

    let restarted = Instant::now();
    cluster.restart(follower).await;
    let caught_up = cluster
        .wait_caught_up(follower, Duration::from_secs(60))
        .await;
    let catch_up_time = restarted.elapsed();
    assert!(caught_up.applied_index >= leader_status.commit_index);
    eprintln!(
        "follower catch-up: {WRITES} writes by {WRITERS} tasks in {} ms; follower {follower} stopped at applied {stopped_at}, \
         leader commit {} snapshot {leader_snapshot:?}; caught up in {} ms",
        write_time.as_millis(),
        leader_status.commit_index,
        catch_up_time.as_millis()
    );
    let installed = cluster
        .node(follower)
        .log()
        .contains("installed a snapshot");
    let follower_snapshot = snapshot_index(&cluster.node(follower).data_dir());
    assert!(
        installed,
        "the follower installed the leader's snapshot (its log past {stopped_at} was purged)"
    );
    assert!(
        follower_snapshot.is_some_and(|i| i > stopped_at),
        "the follower holds a snapshot past {stopped_at}: {follower_snapshot:?}"
    );

    // And it serves reads of what it missed.
    let through = cluster.client_of(follower);
    let lookup = through.get(&target("bulk-9999")).await.unwrap();
    assert_eq!(lookup.record.state, State::Pending);
}

/// The membership as comparable rows, sorted by id.
fn members(list: &[Member]) -> Vec<(u64, bool, String, String)> {
    let mut rows: Vec<_> = list
        .iter()
        .map(|m| (m.id, m.voter, m.raft_addr.clone(), m.api_addr.clone()))
        .collect();
    rows.sort();
    rows
}

fn voter_ids(list: &[Member]) -> BTreeSet<u64> {
    list.iter().filter(|m| m.voter).map(|m| m.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn membership_three_to_five_to_three_under_load() {
    let mut cluster = Cluster::start(3, ClusterOptions::default()).await;
    let client = cluster.client();
    let (stop, ledger, writers) = start_writers(&client, "members", 4);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let four = cluster.add_node().await;
    let five = cluster.add_node().await;
    let leader = cluster.leader().await;
    let status = cluster.status(leader).await.unwrap();
    assert_eq!(
        voter_ids(&status.membership),
        BTreeSet::from([1, 2, 3, four, five]),
        "{:?}",
        status.membership
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    cluster.remove_node(1).await;
    cluster.remove_node(2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    writers.join_all().await;
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    assert!(
        ledger.errors.is_empty(),
        "client-visible errors: {:?}",
        ledger.errors
    );
    assert!(!ledger.completed.is_empty());
    eprintln!(
        "membership 3 -> 5 -> 3: {} completions acknowledged, no errors",
        ledger.completed.len()
    );

    for id in [3, four, five] {
        let status = cluster.wait_caught_up(id, Duration::from_secs(30)).await;
        assert_eq!(
            voter_ids(&status.membership),
            BTreeSet::from([3, four, five]),
            "node {id}: {:?}",
            status.membership
        );
        assert_eq!(status.membership.len(), 3, "no learner left behind");
    }
    let remaining = idem_tests::client(&[3, four, five].map(|id| cluster.endpoint(id)));
    verify(&remaining, &ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarted_nodes_rejoin_with_the_same_membership_and_serve() {
    let mut cluster = Cluster::start(3, ClusterOptions::default()).await;
    let client = cluster.client();
    for n in 0..50 {
        let c = client
            .claim(claim(&target(&format!("pre-{n}")), BODY))
            .await
            .unwrap();
        assert!(c.owns());
    }
    let leader = cluster.leader().await;
    let follower = cluster.ids().into_iter().find(|&id| id != leader).unwrap();
    let before = members(&cluster.status(follower).await.unwrap().membership);
    assert_eq!(before.len(), 3);

    // One follower, SIGTERM, while the others keep writing.
    tokio::task::block_in_place(|| cluster.stop(follower));
    for n in 0..50 {
        let c = client
            .claim(claim(&target(&format!("mid-{n}")), BODY))
            .await
            .unwrap();
        assert!(c.owns());
    }
    cluster.restart(follower).await;
    let status = cluster
        .wait_caught_up(follower, Duration::from_secs(30))
        .await;
    assert_eq!(
        members(&status.membership),
        before,
        "same membership after restart"
    );
    let through = cluster.client_of(follower);
    let c = through
        .claim(claim(&target("via-restarted"), BODY))
        .await
        .unwrap();
    let fence = c.fence().expect("ACQUIRED through the restarted node");
    through
        .complete(&target("via-restarted"), fence, &result("r1"))
        .await
        .unwrap();
    let replay = through.claim(claim(&target("mid-49"), BODY)).await.unwrap();
    assert_eq!(
        replay.outcome.kind(),
        ClaimKind::InProgress,
        "it sees what it missed"
    );

    // The whole cluster, stopped and started again: nobody re-initializes.
    cluster.restart_all().await;
    for id in cluster.ids() {
        let status = cluster.wait_caught_up(id, Duration::from_secs(30)).await;
        assert_eq!(members(&status.membership), before, "node {id}");
        let c = cluster
            .client_of(id)
            .claim(claim(&target("via-restarted"), BODY))
            .await
            .unwrap();
        assert_eq!(
            c.outcome,
            ClaimOutcome::Completed {
                result: result("r1")
            },
            "node {id} after the full restart"
        );
    }
}
