//! The client's idempotency key: untrusted input, validated strictly.
//!
//! 1..=255 bytes of `[A-Za-z0-9._:~-]`: enough for UUIDs, ULIDs and prefixed random ids,
//! nothing that needs escaping in logs, URLs or storage keys. Logs never print a key: they
//! print [`IdempotencyKey::log_hash`].

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{check_text, Field, ValidationError};

/// Maximum key length in bytes.
pub const MAX_KEY: usize = 255;

/// A validated idempotency key.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Validates and wraps a key.
    pub fn new(key: impl Into<String>) -> Result<Self, ValidationError> {
        let key = key.into();
        check_text(
            Field::Key,
            &key,
            1,
            MAX_KEY,
            |b| b.is_ascii_alphanumeric() || b"._:~-".contains(&b),
            "A-Z a-z 0-9 . _ : ~ -",
        )?;
        Ok(IdempotencyKey(key))
    }

    /// The key itself. Never log it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A short keyed hash of the key for logs ([`crate::log_hash`]): the same key gives the
    /// same hash on every node that shares the log secret, and a dictionary of likely keys
    /// (order ids) cannot be hashed to find it without that secret.
    pub fn log_hash(&self) -> String {
        crate::log_hash::of(self.0.as_bytes())
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = ValidationError;

    fn try_from(key: String) -> Result<Self, Self::Error> {
        IdempotencyKey::new(key)
    }
}

impl From<IdempotencyKey> for String {
    fn from(key: IdempotencyKey) -> Self {
        key.0
    }
}

/// Debug output shows the hash, never the key, so a stray `{:?}` cannot leak it.
impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey(#{})", self.log_hash())
    }
}
