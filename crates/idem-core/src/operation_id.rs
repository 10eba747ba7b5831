//! Operation ids: the stable identity of one business intent.
//!
//! Generated once, at first claim, by the node that proposes the claim (never inside
//! apply, which must be deterministic) and carried inside the command. UUIDv7 is time
//! ordered, so ids sort by creation time in indexes and logs. Downstream calls use it as
//! their own idempotency key.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Field, ValidationError};

/// A globally unique, time-ordered operation id (UUIDv7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OperationId([u8; 16]);

impl OperationId {
    /// A new UUIDv7 from the local clock and randomness. Call it in the proposer only.
    pub fn generate() -> Self {
        OperationId(*Uuid::now_v7().as_bytes())
    }

    /// Builds an id from its 16 bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        OperationId(bytes)
    }

    /// The 16 bytes, big-endian as in the UUID text form (sorts by time for v7).
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl FromStr for OperationId {
    type Err = ValidationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s)
            .map(|uuid| OperationId(*uuid.as_bytes()))
            .map_err(|_| ValidationError::Rule {
                field: Field::OperationId,
                rule: "must be a UUID in its text form",
            })
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Uuid::from_bytes(self.0).hyphenated().fmt(f)
    }
}

impl fmt::Debug for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperationId({self})")
    }
}
