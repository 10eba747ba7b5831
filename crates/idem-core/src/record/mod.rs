//! The record: everything the store knows about one `(scope, key)`.

mod body;
mod key;
mod lease;
mod result;
mod result_codec;
mod stage;
mod state;

pub use body::{StoredBody, MAX_CONTENT_TYPE};
pub use key::RecordKey;
pub use lease::{Holder, Lease, MAX_HOLDER};
pub use result::{
    ErrorSummary, StoredResult, MAX_ERROR_CODE, MAX_ERROR_MESSAGE, MAX_FIELDS, MAX_FIELD_NAME,
    MAX_FIELD_VALUE, MAX_RESOURCE_ID, MAX_RESOURCE_VERSION, RESULT_VERSION_BODY,
    RESULT_VERSION_FIELDS,
};
pub use stage::Stage;
pub use state::State;

use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::operation_id::OperationId;
use crate::policy::Policy;
use crate::time::Timestamp;

/// One idempotency record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The scope and key this record answers for (the unique constraint).
    pub key: RecordKey,
    /// Stable id of the business intent, generated at first claim.
    pub operation_id: OperationId,
    /// The fingerprint stored at first claim.
    pub fingerprint: Fingerprint,
    /// Lifecycle state.
    pub state: State,
    /// External-call ledger.
    pub stage: Stage,
    /// The remote reference confirmed by the downstream (`REMOTE_CONFIRMED`).
    pub remote_ref: Option<String>,
    /// The stage reported to the current holder when it took over.
    pub previous_stage: Option<Stage>,
    /// Incremented on every acquisition (and on reconcile, to revoke the holder).
    pub fence: u64,
    /// The current lease while PENDING or IN_PROGRESS (absent once released).
    pub lease: Option<Lease>,
    /// Number of acquisitions so far.
    pub attempts: u32,
    /// Incremented on every change.
    pub version: u64,
    /// The policy fixed at first claim.
    pub policy: Policy,
    /// The stored result (COMPLETED).
    pub result: Option<StoredResult>,
    /// The stored error (RETRYABLE_FAILURE, TERMINAL_FAILURE).
    pub error: Option<ErrorSummary>,
    /// First claim.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// When it became terminal.
    pub completed_at: Option<Timestamp>,
    /// When a terminal record may be deleted (completed_at + retention).
    pub expires_at: Option<Timestamp>,
}

impl Record {
    /// Marks a change at `now`: the version advances, the update time moves.
    pub(crate) fn touch(&mut self, now: Timestamp) {
        self.version += 1;
        self.updated_at = now;
    }

    /// Moves the record into a terminal state at `now`, starting its retention.
    pub(crate) fn finish(&mut self, state: State, now: Timestamp) {
        debug_assert!(state.is_terminal());
        self.state = state;
        self.lease = None;
        self.completed_at = Some(now);
        self.expires_at = Some(now.plus(self.policy.retention));
        self.touch(now);
    }
}
