//! The `idem.v1.Admin` service: listing, reconciliation, purge, node status, (through
//! `members`) cluster membership and (through `tokens`) the replicated API tokens.
//!
//! Changes (reconcile, purge, and through `regions` the placement changes) are core
//! commands through the same Raft path as worker commands, so each one is audited in the
//! same atomic write as the change, as the authenticated principal ([`Attribution`]);
//! `ListAudit` reads the log back ([`AuditQuery`]). Listing is a
//! bounded, resumable scan of the applied records behind a read barrier; its page token is
//! the hex encoding of the last record key it looked at, so a page that stopped at its scan
//! bound (few matches among many records) still lets the client continue where it stopped.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use idem_core::command::{PurgeSubject, Reconcile, ReconcileTarget};
use idem_core::scope::{validate_actor, validate_tenant};
use idem_core::{Command, ErrorSummary, Outcome, Record, State, Timestamp};
use idem_proto::v1 as pb;
use idem_proto::v1::admin_server::Admin;
use tonic::{Request, Response, Status};

use crate::api::attribution::Attribution;
use crate::api::audit::AuditQuery;
use crate::api::decode::fields;
use crate::api::{encode, members, regions, tokens, top};
use crate::api::{observe, record_operation, ApiContext};
use crate::auth::{Principal, Role};
use crate::backend::{Backend, RequestError};
use crate::policy::Policies;

/// `ListOperations` page size when the request says 0.
pub const DEFAULT_LIST_LIMIT: usize = 100;
/// Largest `ListOperations` page.
pub const MAX_LIST_LIMIT: usize = 1000;
/// Most records one `ListOperations` call examines before returning a partial page.
pub const MAX_LIST_SCAN: usize = 10_000;
/// Records scrubbed per `PurgeSubject` Raft command.
pub const PURGE_BATCH: u32 = 500;
/// The operator recorded when a request names none.
pub const DEFAULT_OPERATOR: &str = "idemctl";
/// Records read per scan call.
const SCAN_PAGE: usize = 500;

/// The `idem.v1.Admin` service.
#[derive(Clone)]
pub struct AdminService {
    ctx: Arc<ApiContext>,
}

/// A validated `ListOperations` request.
struct ListQuery {
    stuck: bool,
    states: BTreeSet<State>,
    older_than_ms: u64,
    limit: usize,
    prefix: Vec<u8>,
    after: Option<Vec<u8>>,
}

impl ListQuery {
    fn parse(req: pb::ListOperationsRequest) -> Result<Self, RequestError> {
        let mut states = BTreeSet::new();
        for value in req.states {
            states.extend(fields::state_filter(value)?);
        }
        if req.stuck {
            if states.iter().any(|s| !s.is_active()) {
                return Err(RequestError::argument(
                    "stuck: only PENDING and IN_PROGRESS records can be stuck",
                ));
            }
            if states.is_empty() {
                states.extend([State::Pending, State::InProgress]);
            }
        }
        let limit = match req.limit {
            0 => DEFAULT_LIST_LIMIT,
            n => (n as usize).min(MAX_LIST_LIMIT),
        };
        let prefix = if req.tenant.is_empty() {
            Vec::new()
        } else {
            validate_tenant(&req.tenant)?;
            tenant_prefix(&req.tenant)
        };
        let after = if req.page_token.is_empty() {
            None
        } else {
            let token = hex::decode(&req.page_token)
                .ok()
                .filter(|t| t.starts_with(&prefix) && !t.is_empty())
                .ok_or_else(|| {
                    RequestError::argument(
                        "page_token: not a token of a previous page of this query",
                    )
                })?;
            Some(token)
        };
        Ok(ListQuery {
            stuck: req.stuck,
            states,
            older_than_ms: req.older_than_ms,
            limit,
            prefix,
            after,
        })
    }

    fn matches(&self, record: &Record, now: Timestamp, policies: &Policies) -> bool {
        let state_ok = self.states.is_empty() || self.states.contains(&record.state);
        let age = now.millis().saturating_sub(record.updated_at.millis());
        let older_than = if self.stuck && self.older_than_ms == 0 {
            let after = policies.stuck_after(record.key.scope.endpoint());
            u64::try_from(after.as_millis()).unwrap_or(u64::MAX)
        } else {
            self.older_than_ms
        };
        state_ok && age >= older_than
    }

    /// Runs the query: matching records and the cursor to resume from (`None` at the end).
    fn run(
        &self,
        backend: &dyn Backend,
        now: Timestamp,
        policies: &Policies,
    ) -> Result<(Vec<Record>, Option<Vec<u8>>), RequestError> {
        let mut found = Vec::new();
        let mut cursor = self.after.clone();
        let mut scanned = 0;
        while scanned < MAX_LIST_SCAN {
            let page = backend.scan(&self.prefix, cursor.as_deref(), SCAN_PAGE)?;
            let full = page.len() == SCAN_PAGE;
            for record in page {
                scanned += 1;
                cursor = Some(record.key.encode());
                if self.matches(&record, now, policies) {
                    found.push(record);
                    if found.len() == self.limit {
                        return Ok((found, cursor));
                    }
                }
            }
            if !full {
                return Ok((found, None));
            }
        }
        Ok((found, cursor))
    }
}

/// The encoded-key prefix of every record of a tenant: the first length-prefixed field of
/// `RecordKey::encode` (tenant, actor, environment, endpoint, key).
fn tenant_prefix(tenant: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(tenant.len() + 1);
    prefix.push(u8::try_from(tenant.len()).unwrap_or(u8::MAX));
    prefix.extend_from_slice(tenant.as_bytes());
    prefix
}

fn operator(operator: String) -> String {
    if operator.is_empty() {
        DEFAULT_OPERATOR.to_owned()
    } else {
        operator
    }
}

impl AdminService {
    /// A service over `ctx`.
    pub fn new(ctx: Arc<ApiContext>) -> Self {
        AdminService { ctx }
    }

    async fn list(
        &self,
        caller: Result<Principal, RequestError>,
        req: pb::ListOperationsRequest,
    ) -> Result<pb::ListOperationsResponse, RequestError> {
        let caller = caller?;
        if req.tenant.is_empty() {
            caller.require_all_tenants(Role::Operator)?;
        } else {
            caller.require(Role::Operator, Some(&req.tenant))?;
        }
        let query = ListQuery::parse(req)?;
        self.ctx.backend.read_barrier().await?;
        let backend = Arc::clone(&self.ctx.backend);
        let policies = Arc::clone(&self.ctx.policies);
        let (records, cursor) = tokio::task::spawn_blocking(move || {
            let now = backend.now();
            query.run(backend.as_ref(), now, &policies)
        })
        .await
        .map_err(|e| RequestError::Internal(format!("list task failed: {e}")))??;
        Ok(pb::ListOperationsResponse {
            records: records.iter().map(encode::record_to_proto).collect(),
            next_page_token: cursor.map(hex::encode).unwrap_or_default(),
        })
    }

    async fn reconcile(
        &self,
        caller: Result<Principal, RequestError>,
        req: pb::ReconcileRequest,
    ) -> Result<pb::ReconcileResponse, RequestError> {
        let caller = caller?;
        caller.require(Role::Admin, None)?;
        let operation_id = fields::operation_id(&req.operation_id)?;
        record_operation(&operation_id);
        let target = match pb::State::try_from(req.target) {
            Ok(pb::State::Completed) => {
                ReconcileTarget::Completed(fields::stored_result(req.result)?)
            }
            Ok(pb::State::RetryableFailure) => ReconcileTarget::RetryableFailure(match req.error {
                Some(_) => fields::error_summary(req.error)?,
                None => ErrorSummary {
                    code: "reconciled".to_owned(),
                    message: String::new(),
                },
            }),
            Ok(pb::State::TerminalFailure) => {
                ReconcileTarget::TerminalFailure(fields::error_summary(req.error)?)
            }
            Ok(pb::State::Cancelled) => ReconcileTarget::Cancelled,
            _ => return Err(RequestError::argument(
                "target must be STATE_COMPLETED, STATE_RETRYABLE_FAILURE, STATE_TERMINAL_FAILURE or STATE_CANCELLED",
            )),
        };
        let admin = operator(caller.audited_name(req.operator));
        let command = Command::Reconcile(Reconcile {
            operation_id,
            expected_version: req.expected_version,
            target,
            reason: req.reason,
            admin: admin.clone(),
        });
        command.validate()?;
        match self.ctx.backend.propose(command).await? {
            Outcome::Record(record) => {
                tracing::info!(
                    operator = %admin,
                    state = record.state.name(),
                    version = record.version,
                    "record reconciled"
                );
                Ok(pb::ReconcileResponse {
                    record: Some(encode::record_to_proto(&record)),
                })
            }
            Outcome::Rejected(rejection) => Err(rejection.into()),
            _ => Err(RequestError::Internal(
                "reconcile: unexpected outcome from apply".into(),
            )),
        }
    }

    async fn purge(
        &self,
        caller: Result<Principal, RequestError>,
        req: pb::PurgeSubjectRequest,
    ) -> Result<pb::PurgeSubjectResponse, RequestError> {
        let caller = caller?;
        caller.require(Role::Admin, None)?;
        validate_tenant(&req.tenant)?;
        validate_actor(&req.actor)?;
        let admin = operator(caller.audited_name(req.operator));
        let mut scrubbed_total = 0;
        let mut after = None;
        loop {
            let command = Command::PurgeSubject(PurgeSubject {
                tenant: req.tenant.clone(),
                actor: req.actor.clone(),
                reason: req.reason.clone(),
                admin: admin.clone(),
                after,
                limit: PURGE_BATCH,
            });
            command.validate()?;
            match self.ctx.backend.propose(command).await? {
                Outcome::Purged { scrubbed, next } => {
                    scrubbed_total += scrubbed;
                    match next {
                        Some(key) => after = Some(key),
                        None => break,
                    }
                }
                Outcome::Rejected(rejection) => return Err(rejection.into()),
                _ => {
                    return Err(RequestError::Internal(
                        "purge: unexpected outcome from apply".into(),
                    ))
                }
            }
        }
        tracing::info!(operator = %admin, tenant = %req.tenant, scrubbed = scrubbed_total, "subject purged");
        Ok(pb::PurgeSubjectResponse {
            records_scrubbed: scrubbed_total,
        })
    }

    async fn list_audit(
        &self,
        caller: Result<Principal, RequestError>,
        req: pb::ListAuditRequest,
    ) -> Result<pb::ListAuditResponse, RequestError> {
        let query = AuditQuery::parse(&caller?, req)?;
        self.ctx.backend.read_barrier().await?;
        let backend = Arc::clone(&self.ctx.backend);
        tokio::task::spawn_blocking(move || query.run(backend.as_ref()))
            .await
            .map_err(|e| RequestError::Internal(format!("audit task failed: {e}")))?
    }

    async fn status(&self) -> Result<pb::StatusResponse, RequestError> {
        let backend = &self.ctx.backend;
        let raft = backend.raft_status();
        let stats = self.ctx.stats.get(Arc::clone(backend)).await?;
        let now = backend.now();
        Ok(pb::StatusResponse {
            node_id: raft.node_id,
            leader_id: raft.leader_id.unwrap_or(0),
            term: raft.term,
            commit_index: raft.commit_index,
            applied_index: raft.applied_index,
            last_log_index: raft.last_log_index,
            membership: raft
                .members
                .iter()
                .map(|m| pb::Member {
                    id: m.id,
                    region: m.region.clone(),
                    zone: m.zone.clone(),
                    raft_addr: m.raft_addr.clone(),
                    api_addr: m.api_addr.clone(),
                    voter: m.voter,
                    ..pb::Member::default()
                })
                .collect(),
            version: crate::VERSION.to_owned(),
            records_by_state: stats
                .by_state
                .iter()
                .map(|(state, n)| (encode::state_name(*state).to_owned(), *n))
                .collect(),
            oldest_pending_age_ms: stats.oldest_active_age_ms(now.millis()),
            region: self.ctx.region.clone(),
            zone: self.ctx.zone.clone(),
            failover: backend.groups().iter().any(|g| g.failover.is_some()),
        })
    }
}

/// Runs `handler` once the caller is known to have at least `role`.
async fn guarded<T>(
    caller: Result<Principal, RequestError>,
    role: Role,
    handler: impl Future<Output = Result<T, RequestError>>,
) -> Result<T, RequestError> {
    caller?.require(role, None)?;
    handler.await
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn list_operations(
        &self,
        request: Request<pb::ListOperationsRequest>,
    ) -> Result<Response<pb::ListOperationsResponse>, Status> {
        let caller = self.ctx.caller(&request);
        observe(
            &self.ctx.metrics,
            "admin",
            "list_operations",
            self.list(caller, request.into_inner()),
        )
        .await
    }

    async fn reconcile(
        &self,
        request: Request<pb::ReconcileRequest>,
    ) -> Result<Response<pb::ReconcileResponse>, Status> {
        let caller = self.ctx.caller(&request);
        observe(
            &self.ctx.metrics,
            "admin",
            "reconcile",
            AdminService::reconcile(self, caller, request.into_inner()),
        )
        .await
    }

    async fn purge_subject(
        &self,
        request: Request<pb::PurgeSubjectRequest>,
    ) -> Result<Response<pb::PurgeSubjectResponse>, Status> {
        let caller = self.ctx.caller(&request);
        observe(
            &self.ctx.metrics,
            "admin",
            "purge_subject",
            self.purge(caller, request.into_inner()),
        )
        .await
    }

    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let caller = self.ctx.caller(&request);
        observe(
            &self.ctx.metrics,
            "admin",
            "status",
            guarded(caller, Role::Operator, AdminService::status(self)),
        )
        .await
    }

    async fn top_keys(
        &self,
        request: Request<pb::TopKeysRequest>,
    ) -> Result<Response<pb::TopKeysResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let answer = async { top::top_keys(&self.ctx, caller, request.into_inner()) };
        observe(&self.ctx.metrics, "admin", "top_keys", answer).await
    }

    async fn top_tenants(
        &self,
        request: Request<pb::TopTenantsRequest>,
    ) -> Result<Response<pb::TopTenantsResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let answer = async { top::top_tenants(&self.ctx, caller, request.into_inner()) };
        observe(&self.ctx.metrics, "admin", "top_tenants", answer).await
    }

    async fn list_members(
        &self,
        request: Request<pb::ListMembersRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let ctx = &self.ctx;
        observe(
            &ctx.metrics,
            "admin",
            "list_members",
            guarded(caller, Role::Operator, members::list(ctx)),
        )
        .await
    }

    async fn add_member(
        &self,
        request: Request<pb::AddMemberRequest>,
    ) -> Result<Response<pb::AddMemberResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = members::add(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "add_member",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn promote_member(
        &self,
        request: Request<pb::PromoteMemberRequest>,
    ) -> Result<Response<pb::MembersResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = members::promote(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "promote_member",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn remove_member(
        &self,
        request: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::MembersResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = members::remove(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "remove_member",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn transfer_leader(
        &self,
        request: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let ctx = &self.ctx;
        let handler = members::transfer(ctx, request.into_inner());
        observe(
            &ctx.metrics,
            "admin",
            "transfer_leader",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn get_cluster_config(
        &self,
        request: Request<pb::GetClusterConfigRequest>,
    ) -> Result<Response<pb::ClusterConfig>, Status> {
        let caller = self.ctx.caller(&request);
        let ctx = &self.ctx;
        observe(
            &ctx.metrics,
            "admin",
            "get_cluster_config",
            guarded(caller, Role::Operator, regions::config(ctx)),
        )
        .await
    }

    async fn set_mode(
        &self,
        request: Request<pb::SetModeRequest>,
    ) -> Result<Response<pb::ClusterConfig>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = regions::set_mode(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "set_mode",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn add_region(
        &self,
        request: Request<pb::AddRegionRequest>,
    ) -> Result<Response<pb::ClusterConfig>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = regions::add_region(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "add_region",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn bind_tenant(
        &self,
        request: Request<pb::BindTenantRequest>,
    ) -> Result<Response<pb::ClusterConfig>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = regions::bind(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "bind_tenant",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn unbind_tenant(
        &self,
        request: Request<pb::UnbindTenantRequest>,
    ) -> Result<Response<pb::ClusterConfig>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = regions::unbind(ctx, request.into_inner(), by);
        observe(
            &ctx.metrics,
            "admin",
            "unbind_tenant",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn list_groups(
        &self,
        request: Request<pb::ListGroupsRequest>,
    ) -> Result<Response<pb::ListGroupsResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let ctx = &self.ctx;
        let handler = async { Ok(regions::list(ctx)) };
        observe(
            &ctx.metrics,
            "admin",
            "list_groups",
            guarded(caller, Role::Operator, handler),
        )
        .await
    }

    async fn confirm_failover(
        &self,
        request: Request<pb::ConfirmFailoverRequest>,
    ) -> Result<Response<pb::GroupStatus>, Status> {
        let caller = self.ctx.caller(&request);
        let mut req = request.into_inner();
        if let Ok(principal) = &caller {
            // Audited as the authenticated admin, never as whoever the request names.
            req.admin = principal.audited_name(std::mem::take(&mut req.admin));
        }
        let ctx = &self.ctx;
        let handler = regions::confirm(ctx, req);
        observe(
            &ctx.metrics,
            "admin",
            "confirm_failover",
            guarded(caller, Role::Admin, handler),
        )
        .await
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        let caller = self.ctx.caller(&request);
        observe(
            &self.ctx.metrics,
            "admin",
            "list_audit",
            AdminService::list_audit(self, caller, request.into_inner()),
        )
        .await
    }

    async fn create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = async {
            tokens::authorize(caller)?;
            tokens::create(ctx, request.into_inner(), by).await
        };
        observe(&ctx.metrics, "admin", "create_token", handler).await
    }

    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::RevokeTokenResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let by = Attribution::of(&caller, &request);
        let ctx = &self.ctx;
        let handler = async {
            tokens::authorize(caller)?;
            tokens::revoke(ctx, request.into_inner(), by).await
        };
        observe(&ctx.metrics, "admin", "revoke_token", handler).await
    }

    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let caller = self.ctx.caller(&request);
        let ctx = &self.ctx;
        let handler = async {
            tokens::authorize(caller)?;
            tokens::list(ctx).await
        };
        observe(&ctx.metrics, "admin", "list_tokens", handler).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_prefix_is_the_first_key_field() {
        let key = idem_core::RecordKey::new(
            idem_core::Scope::new("acme", "prod", "u1", "POST /x").unwrap(),
            idem_core::IdempotencyKey::new("k").unwrap(),
        );
        assert!(key.encode().starts_with(&tenant_prefix("acme")));
        assert!(!key.encode().starts_with(&tenant_prefix("acm")));
    }

    #[test]
    fn list_query_validates_its_input() {
        let parse = |req: pb::ListOperationsRequest| ListQuery::parse(req).map(|q| q.limit);
        assert_eq!(parse(pb::ListOperationsRequest::default()).unwrap(), 100);
        let big = pb::ListOperationsRequest {
            limit: 5000,
            ..Default::default()
        };
        assert_eq!(parse(big).unwrap(), 1000);
        let bad_token = pb::ListOperationsRequest {
            page_token: "zz".into(),
            ..Default::default()
        };
        assert_eq!(parse(bad_token).unwrap_err().reason(), "INVALID_ARGUMENT");
        let other_tenant = pb::ListOperationsRequest {
            tenant: "acme".into(),
            page_token: hex::encode(tenant_prefix("other")),
            ..Default::default()
        };
        assert_eq!(
            parse(other_tenant).unwrap_err().reason(),
            "INVALID_ARGUMENT"
        );
        let bad_state = pb::ListOperationsRequest {
            states: vec![99],
            ..Default::default()
        };
        assert_eq!(parse(bad_state).unwrap_err().reason(), "INVALID_ARGUMENT");
        let bad_tenant = pb::ListOperationsRequest {
            tenant: "a b".into(),
            ..Default::default()
        };
        assert_eq!(parse(bad_tenant).unwrap_err().reason(), "INVALID_SCOPE");
        let stuck_terminal = pb::ListOperationsRequest {
            stuck: true,
            states: vec![pb::State::Completed.into()],
            ..Default::default()
        };
        assert_eq!(
            parse(stuck_terminal).unwrap_err().reason(),
            "INVALID_ARGUMENT"
        );
    }

    #[test]
    fn stuck_means_active_and_idle_past_the_endpoints_threshold() {
        use std::time::Duration;

        use idem_core::testing::Harness;

        use crate::policy::EndpointPolicy;

        let mut policies = Policies::default();
        policies.endpoints.insert(
            "POST /v1/charges".into(),
            EndpointPolicy {
                stuck_after: Some(Duration::from_secs(60)),
                ..EndpointPolicy::default()
            },
        );
        let mut h = Harness::new(idem_core::MemoryStore::new());
        let key = Harness::<idem_core::MemoryStore>::target("k");
        h.acquire(&key, "w1");
        let record = h.record(&key).unwrap();
        let at = |secs: u64| Timestamp(record.updated_at.millis() + secs * 1000);
        let query = |older_than_ms| {
            ListQuery::parse(pb::ListOperationsRequest {
                stuck: true,
                older_than_ms,
                ..Default::default()
            })
            .unwrap()
        };
        let stuck = query(0);
        assert!(!stuck.matches(&record, at(59), &policies));
        assert!(stuck.matches(&record, at(60), &policies));
        // Another endpoint: the 15-minute default.
        let mut other = record.clone();
        other.key.scope = idem_core::Scope::new("acme", "live", "user-1", "POST /v1/x").unwrap();
        assert!(!stuck.matches(&other, at(899), &policies));
        assert!(stuck.matches(&other, at(900), &policies));
        // --older-than wins over the endpoint's threshold.
        assert!(query(10_000).matches(&record, at(10), &policies));
        // A terminal record is never stuck.
        let mut done = record.clone();
        done.state = State::Completed;
        assert!(!stuck.matches(&done, at(3600), &policies));
    }
}
