//! The [`Backend`] the API runs on in a node: the [`Router`]'s answers to each call.
//!
//! Writes and tenant reads go to the tenant's group; reads by operation id and scans visit
//! every group; placement and membership calls are orchestrated by [`configure`].

use std::sync::Arc;

use futures::future::{join_all, BoxFuture};
use idem_core::placement::{ClusterConfig, GroupId, Placement};
use idem_core::{AuditEntry, Command, OperationId, Outcome, Record, RecordKey, Timestamp};
use tokio::sync::watch;

use super::router::Router;
use super::{configure, view};
use crate::backend::{
    Backend, GroupView, MembershipChange, MembershipView, PlacementAnswer, PlacementCall,
    RaftStatus, RequestError,
};

impl Backend for Router {
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Outcome, RequestError>> {
        Box::pin(self.propose_routed(command))
    }

    fn read_barrier(&self) -> BoxFuture<'_, Result<(), RequestError>> {
        Box::pin(async {
            let groups = self.all_groups();
            let barriers = groups.iter().map(|g| g.backend().read_barrier());
            join_all(barriers).await.into_iter().collect()
        })
    }

    fn read_barrier_for<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, Result<(), RequestError>> {
        Box::pin(async move { self.barrier_tenant(tenant).await.map(drop) })
    }

    fn record(&self, key: &RecordKey) -> Result<Option<Record>, RequestError> {
        self.tenant_group(key.scope.tenant()).backend().record(key)
    }

    fn operation(&self, id: &OperationId) -> Result<Option<Record>, RequestError> {
        for group in self.all_groups() {
            if let Some(record) = group.backend().operation(id)? {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>, RequestError> {
        let mut merged = Vec::new();
        for group in self.all_groups() {
            merged.extend(group.backend().scan(prefix, after, limit)?);
        }
        merged.sort_by_cached_key(|r| r.key.encode());
        merged.truncate(limit);
        Ok(merged)
    }

    fn audit(
        &self,
        group: GroupId,
        from: u64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, RequestError> {
        let group_ref = self
            .group_set()
            .get(group)
            .ok_or_else(|| crate::backend::no_such_group(group))?;
        group_ref.backend().audit(group, from, limit)
    }

    fn due(&self, now: Timestamp, limit: usize) -> Result<usize, RequestError> {
        self.global().due(now, limit)
    }

    fn now(&self) -> Timestamp {
        self.global().now()
    }

    fn applied(&self) -> watch::Receiver<u64> {
        self.global().applied()
    }

    fn applied_for(&self, tenant: &str) -> watch::Receiver<u64> {
        self.tenant_group(tenant).backend().applied()
    }

    fn leads_for(&self, tenant: &str) -> bool {
        self.tenant_group(tenant)
            .backend()
            .raft_status()
            .is_leader()
    }

    fn raft_status(&self) -> RaftStatus {
        self.global().raft_status()
    }

    fn groups(&self) -> Vec<GroupView> {
        self.all_groups().iter().map(|g| view::of(g)).collect()
    }

    fn cluster_config(&self) -> ClusterConfig {
        self.config()
    }

    fn global_placement(&self) -> Arc<Placement> {
        self.global().reader().placement()
    }

    fn placement(
        &self,
        call: PlacementCall,
    ) -> BoxFuture<'_, Result<PlacementAnswer, RequestError>> {
        Box::pin(configure::run(self, call))
    }

    fn membership(
        &self,
        change: MembershipChange,
    ) -> BoxFuture<'_, Result<MembershipView, RequestError>> {
        Box::pin(configure::membership(self, change))
    }
}
