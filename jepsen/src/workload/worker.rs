//! The worker protocol, one attempt at a time.
//!
//! ```text
//! claim(key, body) ── ACQUIRED / TAKEN_OVER(fence) ──> call(key, fence)      [CALLING]
//!                  │                                    │ STALE_FENCE: stop
//!                  │                                    v
//!                  │               previous stage CALLING? ask the ledger: executed?
//!                  │                                    v
//!                  │                   ledger.execute(key, operation_id, fence)   (unless done)
//!                  │                                    v
//!                  │                       complete(key, fence, result)
//!                  ├── IN_PROGRESS: back off briefly
//!                  ├── NEEDS_RECONCILIATION: ask the ledger, reconcile (as an operator)
//!                  └── COMPLETED / FAILED / mismatch: maybe read the key
//! ```
//!
//! In the high-risk workload an owner may die right after `CALLING` (before or after
//! executing): it retires without completing, and its record waits for a reconcile.
//!
//! As in Jepsen, a process whose operation ended `:info` (outcome unknown) is considered
//! crashed: the worker abandons the attempt and continues as a new process number (its old
//! number plus the concurrency) with a fresh client. The abandoned key is left to the lease:
//! another worker takes it over, exactly the situation idem exists for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_client::{ClaimOutcome, Client, ClientOptions, Coalescing, RetryPolicy};
use idem_core::{Stage, State};

use super::store::{Completion, Store};
use super::{Behaviour, KeyPool, StallPoint};
use crate::cluster::security::Access;
use crate::history::Recorder;
use crate::ledger_service::LedgerClient;
use idem_testkit::Rng;

/// What all workers of a test share.
pub struct Shared {
    /// The history.
    pub recorder: Arc<Recorder>,
    /// The key window.
    pub keys: KeyPool,
    /// The ledger service.
    pub ledger: LedgerClient,
    /// Workload knobs.
    pub behaviour: Behaviour,
    /// Every node's API address.
    pub endpoints: Vec<String>,
    /// What every worker client presents (TLS and the workers' token, or nothing).
    pub access: Access,
    /// The client every even-numbered worker uses (see [`worker_client`]).
    pub pooled: Client,
    /// An administrator's client (reconciles, with the admin token on a secure cluster).
    pub admin: Client,
    /// Number of workers (the step between a worker's process numbers).
    pub concurrency: u64,
    /// No attempt starts after this instant.
    pub deadline: Instant,
    /// The run's seed.
    pub seed: u64,
}

/// Client settings for workers: short timeouts, a few retries of the same request, and
/// `access` (TLS and the workers' token on a secure cluster).
pub fn client_options(access: &Access) -> ClientOptions {
    access.apply(ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(4),
        keep_alive_interval: Duration::from_secs(5),
        keep_alive_timeout: Duration::from_secs(2),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
            total_budget: Duration::from_secs(6),
        },
        region: None,
        coalescing: Coalescing::default(),
        tls: None,
        token: None,
    })
}

/// The client that even-numbered workers share, as the tasks of one service share its
/// client: their concurrent calls are coalesced into batches, with one request under way per
/// endpoint at most, so that batches (and batches lost to a fault) are part of every run.
pub fn pooled_client(endpoints: &[String], access: &Access) -> anyhow::Result<Client> {
    let options = ClientOptions {
        coalescing: Coalescing {
            max_in_flight: 1,
            ..Coalescing::default()
        },
        ..client_options(access)
    };
    Ok(Client::connect(endpoints.to_vec(), options)?)
}

/// A client bound to every node, starting with node `first` (0-based) so that workers spread
/// over the nodes.
pub fn client_for(endpoints: &[String], first: usize, access: &Access) -> anyhow::Result<Client> {
    let mut rotated = endpoints.to_vec();
    rotated.rotate_left(first % endpoints.len().max(1));
    Ok(Client::connect(rotated, client_options(access))?)
}

/// The client of worker `index`'s process `process`: even workers share the pooled client
/// (bound to every node, coalescing), odd workers each have their own, bound to one node
/// only, so that requests also enter through followers and exercise their forwarding to the
/// leader (the client still follows a leader hint it is given). A retired process's calls
/// are abandoned either way; the shared client is not part of what crashed.
pub fn worker_client(shared: &Shared, index: u64, process: u64) -> anyhow::Result<Client> {
    let endpoints = &shared.endpoints;
    if index.is_multiple_of(2) || endpoints.len() < 2 {
        return Ok(shared.pooled.clone());
    }
    let one = endpoints[(index + process) as usize % endpoints.len()].clone();
    Ok(Client::connect(vec![one], client_options(&shared.access))?)
}

/// One worker: a sequence of client processes.
pub struct Worker {
    index: u64,
    process: u64,
    rng: Rng,
    shared: Arc<Shared>,
    store: Store,
}

enum Next {
    /// Go on with the next attempt.
    Continue,
    /// The store refused or was unreachable: wait a little first.
    Backoff,
    /// Outcome unknown: continue as a new process.
    Retire,
}

impl Worker {
    /// Worker number `index` (its first process number).
    pub fn new(index: u64, shared: Arc<Shared>) -> anyhow::Result<Worker> {
        let client = worker_client(&shared, index, index)?;
        Ok(Worker {
            index,
            process: index,
            rng: Rng::stream(shared.seed, index + 1),
            store: Store::new(client, Arc::clone(&shared.recorder)),
            shared,
        })
    }

    /// Runs attempts until the deadline.
    pub async fn run(mut self) {
        while Instant::now() < self.shared.deadline {
            let key = self.shared.keys.next(&mut self.rng);
            let pause = match self.attempt(&key).await {
                Next::Continue => self.rng.between(5, 40),
                Next::Backoff => self.rng.between(100, 300),
                Next::Retire => {
                    self.retire();
                    self.rng.between(100, 300)
                }
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    fn retire(&mut self) {
        self.process += self.shared.concurrency;
        if let Ok(client) = worker_client(&self.shared, self.index, self.process) {
            self.store = Store::new(client, Arc::clone(&self.shared.recorder));
        }
    }

    async fn attempt(&mut self, key: &str) -> Next {
        let body = self.shared.behaviour.body(&mut self.rng);
        let policy = (self.shared.behaviour.lease, self.shared.behaviour.risk);
        let claim = match self.store.claim(self.process, key, &body, policy).await {
            Completion::Ok(claim) => claim,
            Completion::Fail(_) => return Next::Backoff,
            Completion::Info(_) => return Next::Retire,
        };
        let operation_id = claim.operation_id.to_string();
        match claim.outcome {
            ClaimOutcome::Acquired { fence, .. } => self.own(key, &operation_id, fence, None).await,
            ClaimOutcome::TakenOver {
                fence,
                previous_stage,
                ..
            } => {
                let check_first = previous_stage.is_none_or(|s| s == Stage::Calling);
                self.own(key, &operation_id, fence, Some(check_first)).await
            }
            ClaimOutcome::InProgress { retry_after, .. } => {
                let wait = retry_after.clamp(Duration::from_millis(20), Duration::from_millis(300));
                tokio::time::sleep(wait).await;
                Next::Continue
            }
            ClaimOutcome::NeedsReconciliation => self.reconcile(key).await,
            _ => self.maybe_read(key).await,
        }
    }

    async fn maybe_read(&mut self, key: &str) -> Next {
        if !self.rng.chance(self.shared.behaviour.read_chance) {
            return Next::Continue;
        }
        match self.store.read(self.process, key).await {
            Completion::Ok(_) => Next::Continue,
            Completion::Fail(_) => Next::Backoff,
            Completion::Info(_) => Next::Retire,
        }
    }

    /// An operator's answer to `NEEDS_RECONCILIATION`: ask the ledger whether the operation
    /// executed, then settle the record (version-checked: of concurrent reconcilers, one wins).
    async fn reconcile(&mut self, key: &str) -> Next {
        let Some(record) = self.store.record(&self.shared.admin, key).await else {
            return Next::Backoff;
        };
        if record.state != State::NeedsReconciliation {
            return Next::Continue;
        }
        let operation_id = record.operation_id.to_string();
        let executed = match self.shared.ledger.executed(&operation_id).await {
            Ok(executed) => executed,
            Err(e) => {
                eprintln!("worker {}: ledger query failed: {e:#}", self.index);
                return Next::Backoff;
            }
        };
        let reference = executed.then(|| format!("ledger-{operation_id}"));
        let admin = &self.shared.admin;
        match self
            .store
            .reconcile(admin, self.process, &record, reference.as_deref())
            .await
        {
            Completion::Ok(()) => Next::Continue,
            Completion::Fail(_) => Next::Backoff,
            Completion::Info(_) => Next::Retire,
        }
    }

    /// The owner's part; `taken_over` is `Some(check_ledger_first)` after a takeover.
    async fn own(
        &mut self,
        key: &str,
        operation_id: &str,
        fence: u64,
        taken_over: Option<bool>,
    ) -> Next {
        let stall = self.shared.behaviour.stall(&mut self.rng);
        self.stall_at(stall, StallPoint::BeforeCall).await;
        match self.store.call(self.process, key, fence).await {
            Completion::Ok(()) => {}
            Completion::Fail(_) => return Next::Backoff,
            Completion::Info(_) => return Next::Retire,
        }
        if self.rng.chance(self.shared.behaviour.die_after_call_chance) {
            return self.die_mid_call(key, operation_id, fence).await;
        }
        let already = match taken_over {
            Some(true) => match self.shared.ledger.executed(operation_id).await {
                Ok(done) => done,
                Err(e) => {
                    eprintln!("worker {}: ledger query failed: {e:#}", self.index);
                    return Next::Continue;
                }
            },
            _ => false,
        };
        if !already {
            let executed = self
                .shared
                .ledger
                .execute(key, operation_id, Some(fence), self.process)
                .await;
            if let Err(e) = executed {
                // The downstream may or may not have executed: leave the key to a takeover.
                eprintln!("worker {}: ledger call failed: {e:#}", self.index);
                return Next::Continue;
            }
        }
        self.stall_at(stall, StallPoint::BeforeComplete).await;
        let resource = format!("p{}-f{fence}", self.process);
        match self
            .store
            .complete(self.process, key, fence, &resource)
            .await
        {
            Completion::Ok(()) => Next::Continue,
            Completion::Fail(_) => Next::Backoff,
            Completion::Info(_) => Next::Retire,
        }
    }

    /// The owner dies after `CALLING`: half the time after the downstream executed, half the
    /// time before; either way it never completes, and its process is retired.
    async fn die_mid_call(&mut self, key: &str, operation_id: &str, fence: u64) -> Next {
        if self.rng.chance(0.5) {
            let ledger = &self.shared.ledger;
            if let Err(e) = ledger
                .execute(key, operation_id, Some(fence), self.process)
                .await
            {
                eprintln!("worker {}: ledger call failed: {e:#}", self.index);
            }
        }
        Next::Retire
    }

    async fn stall_at(&self, stall: Option<(StallPoint, Duration)>, here: StallPoint) {
        if let Some((point, duration)) = stall {
            if point == here {
                tokio::time::sleep(duration).await;
            }
        }
    }
}

/// Reads every key once through a healthy cluster (after the final heal), so the
/// acknowledged checker sees any loss. Unknown outcomes are retried a few times under new
/// process numbers starting at `first_process`.
pub async fn final_reads(
    endpoints: &[String],
    access: &Access,
    recorder: &Arc<Recorder>,
    keys: &[String],
    first_process: u64,
) -> anyhow::Result<FinalReads> {
    let mut process = first_process;
    let mut store = Store::new(client_for(endpoints, 0, access)?, Arc::clone(recorder));
    let mut summary = FinalReads::default();
    for key in keys {
        let mut done = false;
        for _ in 0..5 {
            match store.read(process, key).await {
                Completion::Ok(_) => {
                    done = true;
                    break;
                }
                Completion::Fail(_) => {}
                Completion::Info(_) => {
                    process += 1;
                    store = Store::new(
                        client_for(endpoints, process as usize, access)?,
                        Arc::clone(recorder),
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if done {
            summary.read += 1;
        } else {
            summary.unread.push(key.clone());
        }
    }
    Ok(summary)
}

/// What the final reads achieved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FinalReads {
    /// Keys read successfully.
    pub read: usize,
    /// Keys no read succeeded for.
    pub unread: Vec<String>,
}
