//! A rolling upgrade under load, from the previous release to this one (`make upgrade-test`).
//!
//! Three nodes start on the previous release's `idemd` (the path in `IDEM_PREVIOUS_IDEMD`,
//! which `scripts/upgrade-test.sh` builds from a git commit). Writers claim and complete
//! distinct keys through every node the whole time, recording each acknowledged answer.
//! The nodes are then replaced one at a time as docs/operations.md ("Rolling upgrade")
//! says: the followers first (stop, start this release's binary on the same data
//! directory, wait healthy and caught up), then leadership moves to an upgraded node with
//! `Admin.TransferLeader`, then the former leader is replaced. One upgraded follower is
//! then rolled back to the previous binary and forward again (the rollback path). At the
//! end every acknowledged claim is present with its last owner's fence, every
//! acknowledged completion replays with its result, and no call failed.
//!
//! Ignored by default: it needs the previous release's binary, which takes a separate
//! build (~10 minutes of CPU the first time).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_client::{ClaimOutcome, Client};
use idem_core::{State, StoredResult};
use idem_tests::{claim, result, target, Cluster, ClusterOptions, NodeOptions};
use tokio::task::JoinSet;

const BODY: &str = r#"{"amount": 1000, "currency": "EUR"}"#;
/// Writers running throughout.
const WRITERS: usize = 4;
/// How long the load runs between two steps of the upgrade.
const SETTLE: Duration = Duration::from_secs(2);
/// How long a restarted node may take to apply what the leader committed.
const CATCH_UP: Duration = Duration::from_secs(30);

/// What the writers saw acknowledged, and what failed.
#[derive(Default)]
struct Ledger {
    /// Acknowledged ownership: key name → the fence handed out.
    owned: BTreeMap<String, u64>,
    /// Acknowledged completions: key name → the stored result.
    completed: BTreeMap<String, StoredResult>,
    /// Calls that ended in an error after the client's retries, or answered unexpectedly.
    errors: Vec<String>,
}

impl Ledger {
    fn fail(ledger: &Mutex<Ledger>, what: String) {
        ledger.lock().unwrap().errors.push(what);
    }
}

/// A writer: claims distinct keys `{prefix}-{n}` and completes each, until `stop`.
async fn writer(client: Client, prefix: String, stop: Arc<AtomicBool>, ledger: Arc<Mutex<Ledger>>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("{prefix}-{n}");
        let key = target(&name);
        let fence = match client.claim(claim(&key, BODY)).await {
            Ok(c) => match c.fence() {
                Some(fence) => fence,
                None => {
                    Ledger::fail(&ledger, format!("claim {name}: not owned: {c:?}"));
                    continue;
                }
            },
            Err(e) => {
                Ledger::fail(&ledger, format!("claim {name}: {e}"));
                continue;
            }
        };
        ledger.lock().unwrap().owned.insert(name.clone(), fence);
        let stored = result(&format!("res-{name}"));
        match client.complete(&key, fence, &stored).await {
            Ok(record) if record.state == State::Completed => {
                ledger.lock().unwrap().completed.insert(name, stored);
            }
            Ok(record) => Ledger::fail(&ledger, format!("complete {name}: {:?}", record.state)),
            Err(e) => Ledger::fail(&ledger, format!("complete {name}: {e}")),
        }
    }
}

/// The load: writers on one client of every node, and what they recorded.
struct Load {
    stop: Arc<AtomicBool>,
    ledger: Arc<Mutex<Ledger>>,
    tasks: JoinSet<()>,
}

impl Load {
    fn start(client: &Client) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let mut tasks = JoinSet::new();
        for w in 0..WRITERS {
            tasks.spawn(writer(
                client.clone(),
                format!("upgrade-w{w}"),
                stop.clone(),
                ledger.clone(),
            ));
        }
        Load {
            stop,
            ledger,
            tasks,
        }
    }

    fn completed(&self) -> usize {
        self.ledger.lock().unwrap().completed.len()
    }

    /// Lets the load run for [`SETTLE`] and checks it made progress.
    async fn settle(&self, step: &str) {
        let before = self.completed();
        tokio::time::sleep(SETTLE).await;
        let after = self.completed();
        eprintln!("upgrade: {step}: {after} completions acknowledged so far");
        assert!(after > before, "no write acknowledged after: {step}");
    }

    async fn stop(self) -> Ledger {
        self.stop.store(true, Ordering::Relaxed);
        self.tasks.join_all().await;
        std::mem::take(&mut *self.ledger.lock().unwrap())
    }
}

/// Stops node `id` (SIGTERM), starts `idemd` (`None`: this release's) on its data
/// directory and waits until it is healthy and has caught up with the leader.
async fn replace(cluster: &mut Cluster, id: u64, idemd: Option<PathBuf>) {
    let exit = cluster.stop(id);
    assert!(exit.success(), "node {id} stopped badly: {exit:?}");
    cluster.node_mut(id).set_idemd(idemd);
    cluster.restart(id).await;
    cluster.wait_caught_up(id, CATCH_UP).await;
}

/// Every acknowledged claim is there with its fence; every acknowledged completion
/// replays with its result.
async fn verify(client: &Client, ledger: &Ledger) {
    for (name, fence) in &ledger.owned {
        let record = client
            .get(&target(name))
            .await
            .unwrap_or_else(|e| panic!("acknowledged claim of {name} lost: {e}"))
            .record;
        assert_eq!(record.fence, *fence, "{name}: the acknowledged fence");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the previous release's idemd: run `make upgrade-test`"]
async fn rolling_upgrade_from_the_previous_release_under_load_loses_nothing() {
    let previous = PathBuf::from(
        std::env::var_os("IDEM_PREVIOUS_IDEMD")
            .expect("IDEM_PREVIOUS_IDEMD: the previous release's idemd (make upgrade-test)"),
    );
    assert!(previous.exists(), "{} not found", previous.display());
    let options = ClusterOptions {
        node: NodeOptions::default().idemd(previous.clone()),
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(3, options).await;
    let client = cluster.client();
    let load = Load::start(&client);
    load.settle("3 nodes on the previous release").await;

    // Followers first, one at a time.
    let leader = cluster.leader().await;
    let followers: Vec<u64> = cluster
        .ids()
        .into_iter()
        .filter(|&id| id != leader)
        .collect();
    for &id in &followers {
        replace(&mut cluster, id, None).await;
        load.settle(&format!("follower {id} upgraded")).await;
    }
    // The leader last, once it handed leadership to an upgraded node.
    let to = followers[0];
    cluster.transfer_leader(to).await;
    load.settle(&format!(
        "leadership moved from {leader} to upgraded node {to}"
    ))
    .await;
    replace(&mut cluster, leader, None).await;
    load.settle(&format!(
        "node {leader} upgraded: every node on this release"
    ))
    .await;

    // The rollback path: an upgraded follower back on the previous release, then forward.
    let current = cluster.leader().await;
    let back = cluster
        .ids()
        .into_iter()
        .find(|&id| id != current)
        .expect("a follower");
    replace(&mut cluster, back, Some(previous)).await;
    load.settle(&format!("node {back} rolled back to the previous release"))
        .await;
    replace(&mut cluster, back, None).await;
    load.settle(&format!("node {back} upgraded again")).await;

    let ledger = load.stop().await;
    eprintln!(
        "upgrade: {} claims and {} completions acknowledged, {} calls failed",
        ledger.owned.len(),
        ledger.completed.len(),
        ledger.errors.len()
    );
    assert!(
        ledger.errors.is_empty(),
        "calls failed during the upgrade: {:?}",
        ledger.errors
    );
    for id in cluster.ids() {
        cluster.wait_caught_up(id, CATCH_UP).await;
    }
    verify(&client, &ledger).await;
    // Each node serves the acknowledged state by itself too.
    for id in cluster.ids() {
        verify(&cluster.client_of(id), &ledger).await;
    }
}
