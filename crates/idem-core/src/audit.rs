//! The audit log of administrative changes.
//!
//! Every admin command writes its entry in the same atomic write set as its change: no
//! audit, no change. Entries carry operation ids, never raw keys.

use serde::{Deserialize, Serialize};

use crate::operation_id::OperationId;
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
}
