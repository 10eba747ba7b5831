//! The external-call ledger of a record.
//!
//! A worker records `CALLING` before it calls a downstream (passing the operation id as the
//! downstream's idempotency key) and `REMOTE_CONFIRMED` once the downstream confirmed. The
//! stage is what makes a crashed worker's takeover safe: a taker told "previous stage
//! CALLING" must check the remote first, and for HIGH risk nobody takes over at all.

use serde::{Deserialize, Serialize};

/// How far the external side effect got.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum Stage {
    /// No external call was made.
    #[default]
    NotCalled,
    /// An external call began; its outcome is unknown until confirmed.
    Calling,
    /// The remote side confirmed; the record holds its reference.
    RemoteConfirmed,
    /// The local result was stored (set on completion).
    LocalDone,
}

impl Stage {
    /// True once something irreversible may have happened outside.
    pub fn is_irreversible(self) -> bool {
        !matches!(self, Stage::NotCalled)
    }

    /// The API name, e.g. `REMOTE_CONFIRMED`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::NotCalled => "NOT_CALLED",
            Stage::Calling => "CALLING",
            Stage::RemoteConfirmed => "REMOTE_CONFIRMED",
            Stage::LocalDone => "LOCAL_DONE",
        }
    }
}
