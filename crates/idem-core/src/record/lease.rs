//! Leases: time-bounded ownership of a key by one worker attempt.
//!
//! A lease alone is not safety: a paused worker may wake up after its lease expired. Safety
//! comes from the fence that accompanies each acquisition; the lease only decides *when*
//! another claimant may take over.

use serde::{Deserialize, Serialize};

use crate::error::{check_text, is_visible_ascii, Field, ValidationError};
use crate::time::Timestamp;

/// Longest holder identity.
pub const MAX_HOLDER: usize = 128;

/// The identity of one worker attempt, unique per attempt (the SDK generates one). A claim
/// re-sent by the same holder while its lease is live gets its ownership back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Holder(String);

impl Holder {
    /// Validates a holder: 1..=128 bytes of printable ASCII without spaces.
    pub fn new(holder: impl Into<String>) -> Result<Self, ValidationError> {
        let holder = holder.into();
        check_text(
            Field::Holder,
            &holder,
            1,
            MAX_HOLDER,
            is_visible_ascii,
            "printable ASCII without spaces",
        )?;
        Ok(Holder(holder))
    }

    /// The holder identity.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Holder {
    type Error = ValidationError;

    fn try_from(holder: String) -> Result<Self, Self::Error> {
        Holder::new(holder)
    }
}

impl From<Holder> for String {
    fn from(holder: Holder) -> Self {
        holder.0
    }
}

/// A live or expired lease on a record.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it.
    pub holder: Holder,
    /// When it stops protecting the holder (replicated time).
    pub expires_at: Timestamp,
}

impl Lease {
    /// True while the lease protects its holder at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}
