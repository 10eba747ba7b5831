//! The expiry sweep: the leader deletes terminal records past their retention.
//!
//! Deletion is a replicated decision like any other change, so the sweep does not delete
//! anything itself: it proposes bounded `Expire` commands through Raft and apply picks the
//! records (oldest first, terminal only: PENDING, IN_PROGRESS, RETRYABLE_FAILURE and
//! NEEDS_RECONCILIATION never expire by time). Only the leader proposes; on a follower, or
//! when nothing is due, a tick costs one local index read and writes nothing to the log.
//!
//! While a batch comes back full the sweep proposes the next one at once, so a backlog
//! (after downtime, or a burst of expiring keys) drains without waiting for further ticks,
//! bounded per tick so a huge backlog cannot monopolise the log.

use std::sync::Arc;
use std::time::Duration;

use idem_core::command::Expire;
use idem_core::{Command, Outcome};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, RequestError};
use crate::metrics::Metrics;

/// Most batches one tick proposes.
pub const MAX_BATCHES_PER_TICK: usize = 100;

/// Sweep settings.
#[derive(Clone, Copy, Debug)]
pub struct SweepConfig {
    /// Time between ticks.
    pub interval: Duration,
    /// Records per `Expire` command.
    pub batch: u32,
}

/// Runs the sweep until `shutdown` is cancelled, over every group `backends` names at
/// each tick (each group expires its own records, on its own leader).
pub async fn run(
    backends: impl Fn() -> Vec<Arc<dyn Backend>> + Send + 'static,
    config: SweepConfig,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        for backend in backends() {
            if let Err(error) = sweep_once(backend.as_ref(), config, &metrics, &shutdown).await {
                metrics.sweep_failures.inc();
                tracing::warn!(%error, reason = error.reason(), "expiry sweep failed; retrying at the next tick");
            }
        }
    }
}

/// One tick: propose batches while this node leads, records are due and batches are full.
/// Returns the number of records deleted.
pub async fn sweep_once(
    backend: &dyn Backend,
    config: SweepConfig,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<u64, RequestError> {
    let mut deleted = 0;
    for _ in 0..MAX_BATCHES_PER_TICK {
        if shutdown.is_cancelled() || !backend.raft_status().is_leader() {
            break;
        }
        if backend.due(backend.now(), 1)? == 0 {
            break;
        }
        let command = Command::Expire(Expire {
            limit: config.batch,
        });
        metrics.sweep_batches.inc();
        let expired = match backend.propose(command).await {
            Ok(Outcome::Expired { operation_ids }) => operation_ids.len() as u64,
            Ok(_) => {
                return Err(RequestError::Internal(
                    "expire: unexpected outcome from apply".into(),
                ))
            }
            // Leadership moved between the check and the proposal: the new leader sweeps.
            Err(RequestError::NotLeader { .. }) => break,
            Err(error) => return Err(error),
        };
        deleted += expired;
        metrics.sweep_deleted.inc_by(expired);
        if expired < u64::from(config.batch) {
            break;
        }
    }
    if deleted > 0 {
        tracing::info!(deleted, "expired records deleted");
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;

    use idem_core::command::{Claim, Complete, Fenced};
    use idem_core::fingerprint::Fingerprint;
    use idem_core::{Holder, IdempotencyKey, OperationId, Policy, RecordKey, Scope, StoredResult};

    use super::*;
    use crate::backend::memory::MemoryBackend;

    async fn finished(backend: &MemoryBackend, key: &str, retention: Duration) {
        let target = RecordKey::new(
            Scope::new("acme", "prod", "u", "POST /x").unwrap(),
            IdempotencyKey::new(key).unwrap(),
        );
        let claim = Command::Claim(Claim {
            target: target.clone(),
            fingerprints: vec![Fingerprint::new("jcs-sha256/v1", 1, vec![1; 32]).unwrap()],
            policy: Policy {
                retention,
                ..Policy::default()
            },
            holder: Holder::new("w").unwrap(),
            operation_id: OperationId::generate(),
        });
        backend.propose(claim).await.unwrap();
        let complete = Command::Complete(Complete {
            owner: Fenced { target, fence: 1 },
            result: StoredResult {
                status_code: 200,
                fields: std::collections::BTreeMap::from_iter(HashMap::<String, String>::new()),
                ..StoredResult::default()
            },
        });
        assert!(matches!(
            backend.propose(complete).await.unwrap(),
            Outcome::Record(_)
        ));
    }

    #[tokio::test]
    async fn deletes_due_records_in_full_batches_then_stops() {
        let backend = MemoryBackend::new();
        for i in 0..5 {
            finished(&backend, &format!("short-{i}"), Duration::from_secs(1)).await;
        }
        finished(&backend, "long", Duration::from_secs(3600)).await;
        let metrics = Metrics::new();
        let config = SweepConfig {
            interval: Duration::from_secs(1),
            batch: 2,
        };
        let token = CancellationToken::new();

        // Nothing due yet: no command proposed.
        let applied_before = *backend.applied().borrow();
        assert_eq!(
            sweep_once(backend.as_ref(), config, &metrics, &token)
                .await
                .unwrap(),
            0
        );
        assert_eq!(*backend.applied().borrow(), applied_before);
        assert_eq!(metrics.sweep_batches.get(), 0);

        backend.advance(Duration::from_secs(2));
        let deleted = sweep_once(backend.as_ref(), config, &metrics, &token)
            .await
            .unwrap();
        assert_eq!(deleted, 5);
        assert_eq!(metrics.sweep_deleted.get(), 5);
        assert_eq!(metrics.sweep_batches.get(), 3, "2 + 2 + 1");
        assert_eq!(backend.scan(&[], None, 100).unwrap().len(), 1);

        // Followers never sweep.
        backend.advance(Duration::from_secs(7200));
        backend.not_leader.store(true, Ordering::SeqCst);
        assert_eq!(
            sweep_once(backend.as_ref(), config, &metrics, &token)
                .await
                .unwrap(),
            0
        );
        backend.not_leader.store(false, Ordering::SeqCst);
        assert_eq!(
            sweep_once(backend.as_ref(), config, &metrics, &token)
                .await
                .unwrap(),
            1
        );
    }
}
