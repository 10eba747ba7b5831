//! The reconciler: list the records whose outcome is unknown, ask the downstream, settle
//! what it answers definitely.
//!
//! It examines NEEDS_RECONCILIATION records (a HIGH-risk call whose worker vanished) and
//! PENDING/IN_PROGRESS records at stage CALLING unchanged for
//! [`stuck_after`](ReconcilerOptions::stuck_after) (any risk: a worker that died inside its
//! call and whose key nobody retried). For each, the [`RemoteCheck`] asks the downstream by
//! operation id, [`decide`] turns the answer into a decision, and `Admin.Reconcile` applies
//! it with the version the listing showed.
//!
//! **Why running it twice at once is safe.** Every reconcile carries the record version the
//! decision was based on. The server applies it only if the record still has that version,
//! in the same atomic write as its audit entry; the first reconciler to get there moves the
//! record on (and bumps the version and the fence), and the second gets `VERSION_MISMATCH`,
//! which is counted as a conflict and changes nothing. The same holds against a worker that
//! finishes after all: whichever write lands first wins, the other is refused. Since the
//! reconcile also advances the fence, a worker still inside its call when the record is
//! settled cannot overwrite the settlement (`STALE_FENCE`).

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Record, Stage, State};
use idem_proto::reason;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::check::{Remote, RemoteCheck};
use super::decision::{decide, Decision, Leave};
use super::error::ConfigError;
use super::metrics::Metrics;
use super::options::ReconcilerOptions;
use super::rate::TokenBucket;
use super::report::{Action, Item, PassReport};
use crate::types::{ListQuery, ReconcileTarget, Reconciliation};
use crate::{Client, ClientError};

/// Settles records of unknown outcome by asking their downstream.
pub struct Reconciler {
    client: Client,
    check: Arc<dyn RemoteCheck>,
    options: ReconcilerOptions,
    metrics: Metrics,
    bucket: Mutex<TokenBucket>,
}

impl Reconciler {
    /// A reconciler over `client`, asking `check`; counts into `metrics`.
    pub fn new(
        client: Client,
        check: Arc<dyn RemoteCheck>,
        options: ReconcilerOptions,
        metrics: Metrics,
    ) -> Result<Self, ConfigError> {
        options.validate()?;
        let bucket = TokenBucket::new(options.checks_per_second, options.burst);
        Ok(Reconciler {
            client,
            check,
            options,
            metrics,
            bucket: Mutex::new(bucket),
        })
    }

    /// The metrics this reconciler counts into.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// One pass over every eligible record. Fails only when a listing fails; a record that
    /// cannot be checked or settled is counted and left for the next pass.
    pub async fn run_pass(&self) -> Result<PassReport, ClientError> {
        let mut report = PassReport {
            dry_run: self.options.dry_run,
            ..PassReport::default()
        };
        let escalated = ListQuery {
            states: vec![State::NeedsReconciliation],
            ..self.query()
        };
        self.scan(escalated, &mut report).await?;
        let stuck = ListQuery {
            states: vec![State::Pending, State::InProgress],
            older_than: Some(self.options.stuck_after),
            ..self.query()
        };
        self.scan(stuck, &mut report).await?;
        self.metrics.pass();
        Ok(report)
    }

    /// Passes every `interval` until `shutdown` completes; `on_pass` sees each outcome.
    pub async fn watch(
        &self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()>,
        mut on_pass: impl FnMut(Result<PassReport, ClientError>),
    ) {
        tokio::pin!(shutdown);
        loop {
            let started = Instant::now();
            tokio::select! {
                _ = &mut shutdown => return,
                outcome = self.run_pass() => on_pass(outcome),
            }
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep_until(started + interval) => {}
            }
        }
    }

    fn query(&self) -> ListQuery {
        ListQuery {
            limit: Some(self.options.page_size),
            tenant: self.options.tenant.clone(),
            ..ListQuery::default()
        }
    }

    /// Every page of `query`, each eligible record handled in listing order.
    async fn scan(&self, mut query: ListQuery, report: &mut PassReport) -> Result<(), ClientError> {
        loop {
            let page = self.client.list_operations(&query).await?;
            for record in page.records.iter().filter(|r| self.eligible(r)) {
                report.record(self.handle(record).await);
            }
            match page.next_page_token {
                Some(token) => query.page_token = Some(token),
                None => return Ok(()),
            }
        }
    }

    /// NEEDS_RECONCILIATION, or a live state whose worker got as far as CALLING, of the
    /// configured endpoint.
    fn eligible(&self, record: &Record) -> bool {
        let state_ok = match record.state {
            State::NeedsReconciliation => true,
            State::Pending | State::InProgress => record.stage == Stage::Calling,
            _ => false,
        };
        let endpoint_ok = self
            .options
            .endpoint
            .as_deref()
            .is_none_or(|e| record.key.scope.endpoint() == e);
        state_ok && endpoint_ok
    }

    async fn handle(&self, record: &Record) -> Item {
        self.metrics.scanned();
        let (action, detail) = match self.ask(record).await {
            Err(error) => {
                self.metrics.check_error();
                (Action::CheckError, error)
            }
            Ok(remote) => match decide(
                record,
                &remote,
                self.options.absent,
                self.options.completed_status,
            ) {
                Decision::Leave(Leave::Unknown(why)) => {
                    self.metrics.left_alone("unknown");
                    (Action::Unknown, why)
                }
                Decision::Leave(Leave::Contradiction(why)) => {
                    self.metrics.left_alone("contradiction");
                    (Action::Contradiction, why)
                }
                Decision::Settle(target) => self.settle(record, target, &remote).await,
            },
        };
        tracing::info!(
            operation_id = %record.operation_id,
            action = action.name(),
            dry_run = self.options.dry_run,
            "reconciler"
        );
        Item {
            operation_id: record.operation_id,
            tenant: record.key.scope.tenant().to_owned(),
            endpoint: record.key.scope.endpoint().to_owned(),
            state: record.state,
            stage: record.stage,
            action,
            detail,
        }
    }

    /// The downstream's answer, rate-limited and timed; an error as text.
    async fn ask(&self, record: &Record) -> Result<Remote, String> {
        self.bucket.lock().await.take().await;
        let started = Instant::now();
        let answer = self.check.check(&record.operation_id).await;
        self.metrics.check_took(started.elapsed().as_secs_f64());
        answer.map_err(|e| e.to_string())
    }

    /// Applies `target` with the listed version (or, dry run, only reports it).
    async fn settle(
        &self,
        record: &Record,
        target: ReconcileTarget,
        remote: &Remote,
    ) -> (Action, String) {
        let state = target.state();
        let detail = match remote {
            Remote::Found { reference } => reference.clone(),
            _ => "absent downstream".to_owned(),
        };
        let name = Action::Settled(state).name();
        if self.options.dry_run {
            self.metrics.settled(name, true);
            return (Action::Settled(state), detail);
        }
        let decision = Reconciliation {
            operation_id: record.operation_id,
            expected_version: record.version,
            target,
            reason: format!(
                "{}: {} check answered {detail}",
                self.options.reason,
                self.check.kind()
            ),
            operator: self.options.operator.clone(),
        };
        match self.client.reconcile(&decision).await {
            Ok(_) => {
                self.metrics.settled(name, false);
                (Action::Settled(state), detail)
            }
            Err(error) if is_conflict(&error) => {
                self.metrics.conflict();
                (Action::Conflict, error.reason().to_owned())
            }
            Err(error) => {
                self.metrics.settle_error();
                (Action::SettleError, error.to_string())
            }
        }
    }
}

/// The record moved on between the listing and the reconcile: someone else decided it.
fn is_conflict(error: &ClientError) -> bool {
    matches!(
        error.reason(),
        reason::VERSION_MISMATCH | reason::ALREADY_TERMINAL | reason::WRONG_STATE
    )
}
