//! The audit log of administrative changes.
//!
//! Every admin command writes its entry in the same atomic write set as its change: no
//! audit, no change. Entries carry operation ids, never raw keys.
//!
//! Membership changes are openraft membership log entries, which carry no principal. The
//! node that makes one first commits a [`MembershipIntent`] (who, why, which change) to
//! the global group; applying the membership entry that fulfils it then writes the
//! [`AuditAction::MembershipChange`] entry (who, why, resulting voters and learners, log
//! index) in the same write batch as the applied membership (see `apply::membership` and
//! docs/security.md, "Audit log"). [`MembershipNote`] entries, written after the change by
//! earlier releases, are still read.
//!
//! Entries are stored with bincode, which is positional: new actions are appended at the
//! end of [`AuditAction`] so entries written before still decode.

use serde::{Deserialize, Serialize};

use crate::operation_id::OperationId;
use crate::placement::{Mode, TokenRole};
use crate::record::State;
use crate::time::Timestamp;

/// One audit entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Position in the audit log (dense, from 1).
    pub seq: u64,
    /// Replicated time of the change.
    pub at: Timestamp,
    /// Who asked for it.
    pub admin: String,
    /// Why.
    pub reason: String,
    /// What happened.
    pub action: AuditAction,
}

/// The administrative change recorded by an [`AuditEntry`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuditAction {
    /// A record was repaired by hand.
    Reconcile {
        /// The record's operation id.
        operation_id: OperationId,
        /// State before.
        from: State,
        /// State after.
        to: State,
        /// Record version after the change.
        version: u64,
    },
    /// A subject's derived data was scrubbed.
    PurgeSubject {
        /// The tenant.
        tenant: String,
        /// The actor.
        actor: String,
        /// How many records were scrubbed by this command.
        scrubbed: u64,
    },
    /// An operator confirmed a new home for a region group in failover.
    ConfirmHome {
        /// The region the group was created for.
        group_region: String,
        /// The home before.
        from: String,
        /// The new home.
        to: String,
        /// The group's epoch after the change.
        epoch: u64,
    },
    /// The placement mode changed.
    SetMode {
        /// The mode before.
        from: Mode,
        /// The mode after.
        to: Mode,
    },
    /// A region was defined.
    AddRegion {
        /// The region.
        name: String,
        /// The id of its group.
        group: u64,
    },
    /// A tenant got a home region.
    BindTenant {
        /// The tenant.
        tenant: String,
        /// Its home before (`None`: the global group).
        from: Option<String>,
        /// Its new home region.
        region: String,
    },
    /// A tenant was given back to the global group.
    UnbindTenant {
        /// The tenant.
        tenant: String,
        /// Its home before.
        from: String,
    },
    /// A region group's leader found itself outside the home region (automatic).
    EnterFailover {
        /// The region the group was created for.
        group_region: String,
        /// The leader that logged it.
        leader_id: u64,
        /// The leader's region.
        leader_region: String,
        /// The group's epoch after the change.
        epoch: u64,
    },
    /// Leadership of a region group is back in its home region (automatic).
    EndFailover {
        /// The region the group was created for.
        group_region: String,
        /// The leader that logged it.
        leader_id: u64,
        /// The group's epoch after the change.
        epoch: u64,
    },
    /// The membership changed (logged after the membership entry was committed, by
    /// releases before [`AuditAction::MembershipChange`]).
    Membership(MembershipNote),
    /// The sweep deleted an abandoned claim (`abandon_after`): nothing irreversible had
    /// begun (stage NOT_CALLED) and no lease was live.
    Abandon {
        /// The deleted record's operation id.
        operation_id: OperationId,
        /// Its tenant.
        tenant: String,
        /// Its state when deleted (PENDING or IN_PROGRESS).
        state: State,
        /// How long it had been unchanged, in ms.
        idle_ms: u64,
    },
    /// A replicated API token was created (its digest is not audited).
    CreateToken {
        /// The token's name.
        name: String,
        /// Its role.
        role: TokenRole,
        /// Its tenants (`*`: every tenant).
        tenants: Vec<String>,
    },
    /// A replicated API token was revoked.
    RevokeToken {
        /// The token's name.
        name: String,
    },
    /// A record was repaired by hand (what `Reconcile` writes since the entry names the
    /// record's tenant; older entries are [`AuditAction::Reconcile`]).
    ReconcileRecord {
        /// The record's tenant.
        tenant: String,
        /// The record's operation id.
        operation_id: OperationId,
        /// State before.
        from: State,
        /// State after.
        to: State,
        /// Record version after the change.
        version: u64,
    },
    /// The membership changed: written when the membership log entry was applied, in the
    /// same write batch.
    MembershipChange {
        /// The change and the membership it resulted in.
        note: MembershipNote,
        /// The index of the membership log entry.
        index: u64,
    },
}

impl AuditAction {
    /// Every [`AuditAction::kind`] name, for filters.
    pub const KINDS: [&'static str; 13] = [
        "reconcile",
        "purge_subject",
        "confirm_home",
        "set_mode",
        "add_region",
        "bind_tenant",
        "unbind_tenant",
        "enter_failover",
        "end_failover",
        "membership",
        "abandon",
        "create_token",
        "revoke_token",
    ];

    /// The action's kind, as listed and filtered by `Admin.ListAudit`.
    pub fn kind(&self) -> &'static str {
        match self {
            AuditAction::Reconcile { .. } => "reconcile",
            AuditAction::PurgeSubject { .. } => "purge_subject",
            AuditAction::ConfirmHome { .. } => "confirm_home",
            AuditAction::SetMode { .. } => "set_mode",
            AuditAction::AddRegion { .. } => "add_region",
            AuditAction::BindTenant { .. } => "bind_tenant",
            AuditAction::UnbindTenant { .. } => "unbind_tenant",
            AuditAction::EnterFailover { .. } => "enter_failover",
            AuditAction::EndFailover { .. } => "end_failover",
            AuditAction::Membership(_) | AuditAction::MembershipChange { .. } => "membership",
            AuditAction::Abandon { .. } => "abandon",
            AuditAction::CreateToken { .. } => "create_token",
            AuditAction::RevokeToken { .. } => "revoke_token",
            AuditAction::ReconcileRecord { .. } => "reconcile",
        }
    }

    /// The tenant the action is about, for the actions that name one. A reconcile written
    /// before entries named the record's tenant ([`AuditAction::Reconcile`]) has none, and
    /// a token may span tenants: such entries are visible to admins only.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            AuditAction::PurgeSubject { tenant, .. }
            | AuditAction::BindTenant { tenant, .. }
            | AuditAction::UnbindTenant { tenant, .. }
            | AuditAction::Abandon { tenant, .. }
            | AuditAction::ReconcileRecord { tenant, .. } => Some(tenant),
            _ => None,
        }
    }
}

/// Which membership change a [`MembershipNote`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipKind {
    /// A learner was added.
    Add,
    /// A learner became a voter.
    Promote,
    /// A member was removed.
    Remove,
}

impl MembershipKind {
    /// The name shown by `ListAudit`.
    pub fn name(self) -> &'static str {
        match self {
            MembershipKind::Add => "add",
            MembershipKind::Promote => "promote",
            MembershipKind::Remove => "remove",
        }
    }
}

/// A committed membership change and the membership it resulted in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipNote {
    /// What changed.
    pub kind: MembershipKind,
    /// The member added, promoted or removed.
    pub member: u64,
    /// The voters after the change.
    pub voters: Vec<u64>,
    /// The learners after the change.
    pub learners: Vec<u64>,
}

/// Most members a [`MembershipNote`] may list.
pub const MAX_NOTE_MEMBERS: usize = 64;

/// A membership change an admin is about to make: committed before the membership entry,
/// and audited, with its principal and reason, when that entry is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipIntent {
    /// What will change.
    pub kind: MembershipKind,
    /// The member to add, promote or remove.
    pub member: u64,
}

impl MembershipIntent {
    /// Whether a membership of `voters` and `learners` is what this change results in.
    pub fn fulfilled_by(&self, voters: &[u64], learners: &[u64]) -> bool {
        match self.kind {
            MembershipKind::Add => learners.contains(&self.member),
            MembershipKind::Promote => voters.contains(&self.member),
            MembershipKind::Remove => {
                !voters.contains(&self.member) && !learners.contains(&self.member)
            }
        }
    }
}
