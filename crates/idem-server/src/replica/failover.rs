//! Failover, as the leader of a region group acts on it: the one place that proposes
//! `EnterFailover` and `EndFailover`.
//!
//! A region group's leader belongs in its home region. When an election moves leadership
//! elsewhere (the home region was lost or cut off), the group is *in failover*: the leader
//! logs `EnterFailover`, and from that entry on `apply` (idem-core, `apply/claim.rs`) refuses
//! HIGH-risk claims and takeovers, because the lost region's worker may still be running.
//! The decision is taken from the log, so every replica refuses the same claims.
//!
//! Two callers need the entry logged, and both come here:
//!
//! - a claim proposed to a leader away from home ([`Replica::guard`]), so the very first
//!   claim after an election is already judged in failover;
//! - the node's steward ([`crate::groups::Steward`]), which also logs `EndFailover` once
//!   leadership is home again (a new epoch).
//!
//! An operator ends a failover for good by confirming a new home (`ConfirmHome`, audited;
//! `groups::configure`).
//!
//! Both changes are automatic, so they are audited as the leader that logged them,
//! `node:<id>`, in the same write set as the change.

use idem_core::command::Audited;
use idem_core::placement::{GroupChange, GLOBAL_GROUP};
use idem_core::{Command, Outcome, Rejection};
use tokio::time::Instant;

use super::Replica;
use crate::backend::RequestError;

impl Replica {
    /// Before a record command in a region group: refuses while the group's `Init` is not
    /// applied (until then apply cannot tell it from the global group), and before a claim
    /// makes sure a leader outside the home region has logged the failover.
    pub(super) async fn guard(
        &self,
        command: &Command,
        deadline: Instant,
    ) -> Result<(), RequestError> {
        if self.group == GLOBAL_GROUP {
            return Ok(());
        }
        if self.reader.placement().group.is_none() {
            return Err(RequestError::Rejected(Rejection::WrongGroup));
        }
        if !matches!(command, Command::Claim(_)) {
            return Ok(());
        }
        self.enter_failover_if_away(deadline).await.map(drop)
    }

    /// Brings the logged failover state in line with where this leader is (the steward's
    /// call): enters failover away from home, ends it at home. Bounded by the write timeout.
    pub async fn settle_failover(&self) -> Result<(), RequestError> {
        let deadline = Instant::now() + self.write_timeout;
        self.enter_failover_if_away(deadline).await?;
        self.end_failover_if_home(deadline).await?;
        Ok(())
    }

    /// Logs `EnterFailover` when this node leads the region group from outside its home and
    /// no failover is logged yet; true when it logged one.
    async fn enter_failover_if_away(&self, deadline: Instant) -> Result<bool, RequestError> {
        let placement = self.reader.placement();
        let Some(group) = &placement.group else {
            return Ok(false);
        };
        if group.home == self.region || group.failover.is_some() {
            return Ok(false);
        }
        let enter = GroupChange::EnterFailover {
            leader_id: self.node_id,
            leader_region: self.region.clone(),
        };
        let why = format!(
            "leader in region {} while the home region is {}",
            self.region, group.home
        );
        self.log_change(enter, why, deadline).await?;
        tracing::warn!(group = self.group, home = %group.home, region = %self.region, "leading outside the home region: failover recorded; HIGH-risk claims are refused");
        Ok(true)
    }

    /// Logs `EndFailover` (a new epoch) when this node leads the region group from its home
    /// and a failover is still logged; true when it logged one.
    async fn end_failover_if_home(&self, deadline: Instant) -> Result<bool, RequestError> {
        let placement = self.reader.placement();
        let Some(group) = &placement.group else {
            return Ok(false);
        };
        if group.home != self.region || group.failover.is_none() {
            return Ok(false);
        }
        let end = GroupChange::EndFailover {
            leader_id: self.node_id,
        };
        let why = format!("leadership is back in the home region {}", group.home);
        self.log_change(end, why, deadline).await?;
        tracing::info!(group = self.group, home = %group.home, "leadership is home again: failover ended");
        Ok(true)
    }

    /// Proposes a group change on this node, which leads, audited as `node:<id>`.
    async fn log_change(
        &self,
        change: GroupChange,
        reason: String,
        deadline: Instant,
    ) -> Result<(), RequestError> {
        let audited = Audited::new(change, format!("node:{}", self.node_id), reason);
        let command = Command::AuditedGroup(audited);
        match Box::pin(self.propose_local(&command, deadline)).await? {
            Outcome::Placement(_) => Ok(()),
            Outcome::Rejected(rejection) => Err(RequestError::Rejected(rejection)),
            other => Err(RequestError::Internal(format!(
                "failover change: unexpected outcome {other:?}"
            ))),
        }
    }
}
