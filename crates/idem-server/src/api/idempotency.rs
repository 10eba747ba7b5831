//! The `idem.v1.Idempotency` service: claims, worker mutations and reads.
//!
//! Every handler reads decode ([`super::decode`]) → policy → replay or propose → encode
//! ([`super::encode`]).
//!
//! Claims and worker mutations become core [`Command`]s proposed through the [`Backend`]
//! (Raft); the proposer generates the operation id and resolves the policy, so apply stays
//! deterministic. Reads pass a linearizable barrier, then read the applied state and report
//! what a matching claim would see now ([`ClaimKind::preview`]).
//!
//! Visibility is decided here, not in the core: a claim's `fence` is only shown to the caller
//! that owns the record, and a claim with another request's fingerprint learns nothing of
//! the stored result or error.

use std::sync::Arc;
use std::time::Duration;

use idem_core::command::Claim;
use idem_core::fingerprint::Fingerprint;
use idem_core::{ClaimKind, ClaimOutcome, Command, OperationId, Outcome, Record, RecordKey, State};
use idem_proto::v1 as pb;
use idem_proto::v1::idempotency_server::Idempotency;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use crate::api::decode::{self, ClaimInput, Lookup};
use crate::api::{batch, encode, observe, record_operation, ApiContext};
use crate::auth::{Principal, Role};
use crate::backend::RequestError;
use crate::limits::CallKind;
use crate::signals::{self, KeyWarning};

/// A terminal record is replayed locally only if it is retained at least this much longer:
/// a replica may lag the leader's expiry sweep by about this much before it could replay
/// a record the leader already deleted.
const REPLAY_MARGIN: Duration = Duration::from_secs(60);

/// The `idem.v1.Idempotency` service.
#[derive(Clone)]
pub struct IdempotencyService {
    ctx: Arc<ApiContext>,
}

impl IdempotencyService {
    /// A service over `ctx`.
    pub fn new(ctx: Arc<ApiContext>) -> Self {
        IdempotencyService { ctx }
    }

    async fn handle_claim(
        &self,
        caller: Result<Principal, RequestError>,
        req: pb::ClaimRequest,
    ) -> Result<pb::ClaimResponse, RequestError> {
        let caller = caller?;
        let ClaimInput {
            target,
            holder,
            fingerprints,
            overrides,
        } = decode::claim::claim(req, self.ctx.limits).await?;
        caller.require(Role::Worker, Some(target.scope.tenant()))?;
        let warnings = self.key_warnings(&target);
        let policy = self
            .ctx
            .policies
            .resolve(target.scope.endpoint(), &overrides)?;
        // To replay a terminal record locally, and to classify the answer for metrics (was
        // a lease found expired?).
        let prior = self.ctx.backend.record(&target).ok().flatten();
        if let Some(outcome) = prior
            .as_ref()
            .and_then(|record| self.local_replay(record, &fingerprints))
        {
            let limits = &self.ctx.tenant_limits;
            limits.charge(target.scope.tenant(), CallKind::Replay)?;
            self.ctx.metrics.local_replays.inc();
            record_operation(&outcome.record.operation_id);
            self.count_claim(prior.as_ref(), &outcome, &warnings);
            tracing::debug!(outcome = outcome.kind.name(), "claim replayed locally");
            return Ok(warned(claim_response(&outcome), &warnings));
        }
        let tenant = target.scope.tenant().to_owned();
        let limits = &self.ctx.tenant_limits;
        let slot = limits
            .admit_claim(&tenant, prior.is_none(), &self.ctx.backend)
            .await?;
        let command = Command::Claim(Claim {
            target,
            fingerprints,
            policy,
            holder,
            operation_id: OperationId::generate(),
        });
        let proposed = self.ctx.backend.propose(command).await;
        limits.settle_claim(&tenant, slot, &proposed);
        let outcome = match proposed? {
            Outcome::Claim(outcome) => outcome,
            other => return Err(self.unexpected("claim", other)),
        };
        record_operation(&outcome.record.operation_id);
        self.count_claim(prior.as_ref(), &outcome, &warnings);
        tracing::debug!(outcome = outcome.kind.name(), "claim");
        Ok(warned(claim_response(&outcome), &warnings))
    }

    /// The warnings about `target`'s key, when the check is on (`key_warnings`).
    fn key_warnings(&self, target: &RecordKey) -> Vec<KeyWarning> {
        if self.ctx.key_warnings {
            signals::classify(target.key.as_str())
        } else {
            Vec::new()
        }
    }

    /// The answer to a claim of a terminal record from this node's replica, without a
    /// Raft round trip: terminal records are immutable, so the answer is the one apply
    /// would give (docs/design.md §3). Records close to their retention end go to the leader,
    /// whose sweep may already have deleted them (see docs/regions.md, purge lag).
    fn local_replay(&self, record: &Record, fingerprints: &[Fingerprint]) -> Option<ClaimOutcome> {
        let outcome = idem_core::apply::replay(record, fingerprints)?;
        let horizon = self.ctx.backend.now().plus(REPLAY_MARGIN);
        let retained = record.expires_at.is_none_or(|at| at > horizon);
        retained.then_some(outcome)
    }

    fn count_claim(&self, prior: Option<&Record>, outcome: &ClaimOutcome, warnings: &[KeyWarning]) {
        let metrics = &self.ctx.metrics;
        metrics
            .claims
            .with_label_values(&[outcome.kind.name()])
            .inc();
        let tenant = outcome.record.key.scope.tenant();
        metrics.count_tenant_claim(tenant, outcome.kind);
        metrics.count_key_warnings(tenant, warnings);
        let now = std::time::Instant::now();
        self.ctx
            .hot_keys
            .count(&outcome.record.key, outcome.kind, now);
        if outcome.kind == ClaimKind::TakenOver && !outcome.redelivered {
            let stage = outcome.previous_stage.map_or("NONE", |s| s.name());
            metrics.takeovers.with_label_values(&[stage]).inc();
        }
        if let Some(result) = lease_expiry(prior, outcome) {
            metrics.lease_expiries.with_label_values(&[result]).inc();
        }
    }

    /// Proposes a worker mutation and returns the record it changed.
    async fn mutate(&self, command: Command) -> Result<pb::RecordResponse, RequestError> {
        let name = command.name();
        let tenant = command.tenant().unwrap_or_default().to_owned();
        self.ctx.tenant_limits.charge(&tenant, CallKind::Mutation)?;
        let proposed = self.ctx.backend.propose(command).await;
        self.ctx.tenant_limits.settle_mutation(&tenant, &proposed);
        match proposed? {
            Outcome::Record(record) => {
                record_operation(&record.operation_id);
                Ok(pb::RecordResponse {
                    record: Some(encode::record_to_proto(&record)),
                })
            }
            Outcome::Rejected(rejection) => {
                if rejection == idem_core::Rejection::StaleFence {
                    self.ctx.metrics.stale_fences.inc();
                }
                self.ctx
                    .metrics
                    .rejections
                    .with_label_values(&[name, rejection.reason()])
                    .inc();
                Err(rejection.into())
            }
            other => Err(self.unexpected(name, other)),
        }
    }

    fn unexpected(&self, command: &str, outcome: Outcome) -> RequestError {
        if let Outcome::Rejected(rejection) = outcome {
            self.ctx
                .metrics
                .rejections
                .with_label_values(&[command, rejection.reason()])
                .inc();
            return rejection.into();
        }
        RequestError::Internal(format!("{command}: unexpected outcome from apply"))
    }

    async fn handle_get(
        &self,
        caller: &Principal,
        target: Lookup,
    ) -> Result<pb::GetResponse, RequestError> {
        authorize(caller, &target)?;
        self.barrier(&target).await?;
        let record = self.lookup(caller, &target)?;
        let outcome = ClaimKind::preview(&record, self.ctx.backend.now());
        Ok(pb::GetResponse {
            record: Some(encode::record_to_proto(&record)),
            outcome: encode::claim_kind_to_proto(outcome).into(),
        })
    }

    /// A linearizable barrier on the group(s) that may hold `target`: the tenant's group
    /// for a key, every group for an operation id.
    async fn barrier(&self, target: &Lookup) -> Result<(), RequestError> {
        match target {
            Lookup::Key(key) => self.ctx.backend.read_barrier_for(key.scope.tenant()).await,
            Lookup::Operation(_) => self.ctx.backend.read_barrier().await,
        }
    }

    /// The record `target` names, if it belongs to one of the caller's tenants: a record of
    /// another tenant is refused like a forbidden scope, and never returned.
    fn lookup(&self, caller: &Principal, target: &Lookup) -> Result<Record, RequestError> {
        let record = match target {
            Lookup::Key(key) => self.ctx.backend.record(key)?,
            Lookup::Operation(id) => self.ctx.backend.operation(id)?,
        };
        let record = record.ok_or(RequestError::Rejected(idem_core::Rejection::NotFound))?;
        caller.require(Role::Worker, Some(record.key.scope.tenant()))?;
        record_operation(&record.operation_id);
        Ok(record)
    }

    async fn handle_wait(
        &self,
        caller: Result<Principal, RequestError>,
        req: pb::WaitRequest,
    ) -> Result<pb::WaitResponse, RequestError> {
        let caller = caller?;
        let (target, budget) = decode::lookup::wait(req)?;
        authorize(&caller, &target)?;
        self.wait_for(&caller, target, Instant::now() + budget)
            .await
    }

    /// Polls the applied state until the record settles, the deadline passes, the node
    /// shuts down or loses leadership.
    async fn wait_for(
        &self,
        caller: &Principal,
        target: Lookup,
        deadline: Instant,
    ) -> Result<pb::WaitResponse, RequestError> {
        let backend = &self.ctx.backend;
        self.barrier(&target).await?;
        let tenant = self.lookup(caller, &target)?.key.scope.tenant().to_owned();
        // Subscribed before every read below, so no change is missed.
        let mut applied = backend.applied_for(&tenant);
        loop {
            applied.borrow_and_update();
            let record = self.lookup(caller, &target)?;
            let now = backend.now();
            let outcome = ClaimKind::preview(&record, now);
            let settled = record.state.is_terminal() || outcome != ClaimKind::InProgress;
            let response = pb::WaitResponse {
                record: Some(encode::record_to_proto(&record)),
                terminal: record.state.is_terminal(),
                outcome: encode::claim_kind_to_proto(outcome).into(),
            };
            if settled || Instant::now() >= deadline || !backend.leads_for(&tenant) {
                return Ok(response);
            }
            // The preview changes when the lease runs out even if nothing is applied.
            let lease_end = record.lease.as_ref().map_or(deadline, |lease| {
                Instant::now() + now.until(lease.expires_at)
            });
            let wake = deadline.min(lease_end + Duration::from_millis(1));
            tokio::select! {
                changed = applied.changed() => {
                    if changed.is_err() {
                        return Ok(response);
                    }
                }
                () = tokio::time::sleep_until(wake) => {}
                () = self.ctx.shutdown.cancelled() => return Ok(response),
            }
        }
    }
}

/// The check before a read: the worker role, and for a key the scope's tenant (for an
/// operation id, the record's tenant is checked once it is found).
fn authorize(caller: &Principal, target: &Lookup) -> Result<(), RequestError> {
    match target {
        Lookup::Key(key) => caller.require(Role::Worker, Some(key.scope.tenant())),
        Lookup::Operation(_) => caller.require(Role::Worker, None),
    }
}

/// Whether a claim found an expired lease, and what followed (for metrics).
///
/// Classified from a local read just before the claim; under concurrent claims of one key
/// the count may be off by the racing claims, never the claim outcomes themselves.
fn lease_expiry(prior: Option<&Record>, outcome: &ClaimOutcome) -> Option<&'static str> {
    let prior = prior?;
    let expired_lease = prior.state.is_active() && prior.lease.is_some() && !outcome.redelivered;
    if !expired_lease || prior.operation_id != outcome.record.operation_id {
        return None;
    }
    match outcome.kind {
        ClaimKind::TakenOver => Some("taken_over"),
        ClaimKind::NeedsReconciliation if prior.state != State::NeedsReconciliation => {
            Some("needs_reconciliation")
        }
        _ => None,
    }
}

/// `response` with the key's `warnings`: advisory, the outcome is the same without them.
fn warned(mut response: pb::ClaimResponse, warnings: &[KeyWarning]) -> pb::ClaimResponse {
    response.warnings = warnings
        .iter()
        .map(|w| encode::key_warning_to_proto(*w).into())
        .collect();
    response
}

/// What a claimant sees of a claim's outcome.
///
/// The fence only when the caller owns the record; the result only with `COMPLETED`, the
/// error only with `FAILED`; nothing stored with a fingerprint mismatch.
pub fn claim_response(outcome: &ClaimOutcome) -> pb::ClaimResponse {
    let record = &outcome.record;
    let kind = outcome.kind;
    let owns = kind.owns();
    let lease_expires_at_ms = match (&record.lease, owns || kind == ClaimKind::InProgress) {
        (Some(lease), true) => lease.expires_at.millis(),
        _ => 0,
    };
    let previous_stage = match (kind, outcome.previous_stage) {
        (ClaimKind::TakenOver, Some(stage)) => encode::stage_to_proto(stage),
        _ => pb::Stage::Unspecified,
    };
    let remote_ref = match (kind, outcome.previous_stage) {
        (ClaimKind::TakenOver, Some(idem_core::Stage::RemoteConfirmed)) => {
            record.remote_ref.clone().unwrap_or_default()
        }
        _ => String::new(),
    };
    pb::ClaimResponse {
        outcome: encode::claim_kind_to_proto(kind).into(),
        operation_id: record.operation_id.to_string(),
        fence: if owns { record.fence } else { 0 },
        state: encode::state_to_proto(record.state).into(),
        stage: encode::stage_to_proto(record.stage).into(),
        version: record.version,
        attempts: record.attempts,
        previous_stage: previous_stage.into(),
        retry_after_ms: match kind {
            ClaimKind::InProgress => outcome.retry_after.map_or(0, encode::duration_to_ms),
            _ => 0,
        },
        result: match kind {
            ClaimKind::Completed => record.result.as_ref().map(encode::result_to_proto),
            _ => None,
        },
        error: match kind {
            ClaimKind::Failed => record.error.as_ref().map(encode::error_to_proto),
            _ => None,
        },
        lease_expires_at_ms,
        redelivered: outcome.redelivered,
        remote_ref,
        required_algorithm: match kind {
            ClaimKind::FingerprintUnverifiable => record.fingerprint.algorithm.clone(),
            _ => String::new(),
        },
        // About the key, not the record: added by the handler ([`warned`]).
        warnings: Vec::new(),
    }
}

#[tonic::async_trait]
impl Idempotency for IdempotencyService {
    async fn claim(
        &self,
        request: Request<pb::ClaimRequest>,
    ) -> Result<Response<pb::ClaimResponse>, Status> {
        observe(
            &self.ctx.metrics,
            "idempotency",
            "claim",
            self.handle_claim(self.ctx.caller(&request), request.into_inner()),
        )
        .await
    }

    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "start", async {
            let command = decode::owner::start(req)?;
            caller?.require(Role::Worker, command.tenant())?;
            self.mutate(command).await
        })
        .await
    }

    async fn record_external_call(
        &self,
        request: Request<pb::RecordExternalCallRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(
            &self.ctx.metrics,
            "idempotency",
            "record_external_call",
            async {
                let command = decode::owner::record_external_call(req)?;
                caller?.require(Role::Worker, command.tenant())?;
                self.mutate(command).await
            },
        )
        .await
    }

    async fn renew(
        &self,
        request: Request<pb::RenewRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "renew", async {
            let command = decode::owner::renew(req)?;
            caller?.require(Role::Worker, command.tenant())?;
            self.mutate(command).await
        })
        .await
    }

    async fn complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "complete", async {
            let command = decode::owner::complete(req)?;
            caller?.require(Role::Worker, command.tenant())?;
            self.mutate(command).await
        })
        .await
    }

    async fn fail(
        &self,
        request: Request<pb::FailRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "fail", async {
            let command = decode::owner::fail(req)?;
            caller?.require(Role::Worker, command.tenant())?;
            self.mutate(command).await
        })
        .await
    }

    async fn release(
        &self,
        request: Request<pb::ReleaseRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "release", async {
            let command = decode::owner::release(req)?;
            caller?.require(Role::Worker, command.tenant())?;
            self.mutate(command).await
        })
        .await
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "cancel", async {
            let command = decode::owner::cancel(req)?;
            caller?.require(Role::Worker, command.tenant())?;
            self.mutate(command).await
        })
        .await
    }

    async fn get(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::GetResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "get", async {
            let target = decode::lookup::get(req)?;
            self.handle_get(&caller?, target).await
        })
        .await
    }

    async fn get_operation(
        &self,
        request: Request<pb::GetOperationRequest>,
    ) -> Result<Response<pb::GetResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let req = request.into_inner();
        observe(&self.ctx.metrics, "idempotency", "get_operation", async {
            let target = decode::lookup::get_operation(req)?;
            self.handle_get(&caller?, target).await
        })
        .await
    }

    async fn wait(
        &self,
        request: Request<pb::WaitRequest>,
    ) -> Result<Response<pb::WaitResponse>, Status> {
        observe(
            &self.ctx.metrics,
            "idempotency",
            "wait",
            self.handle_wait(self.ctx.caller(&request), request.into_inner()),
        )
        .await
    }

    async fn batch(
        &self,
        request: Request<pb::BatchRequest>,
    ) -> Result<Response<pb::BatchResponse>, Status> {
        observe(
            &self.ctx.metrics,
            "idempotency",
            "batch",
            batch::run(self, self.ctx.caller(&request), request.into_inner()),
        )
        .await
    }
}
