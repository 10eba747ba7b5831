//! A response body stored verbatim, for the routes that opt in.
//!
//! The default stored result is a reference the service re-renders a replay from, so that
//! nothing sensitive sits in the store. Some services cannot re-render (the answer came
//! from a downstream that will not repeat it) and accept that trade-off: they store the
//! first answer's bytes and content type, bounded by the record's `max_result_bytes`
//! together with the rest of the result, and a replay sends them back unchanged.

use serde::{Deserialize, Serialize};

use crate::error::{check_len, check_text, Field, ValidationError};
use crate::policy::MAX_RESULT_BYTES;

/// Longest content type.
pub const MAX_CONTENT_TYPE: usize = 255;

/// A body stored verbatim with its content type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoredBody {
    /// The `Content-Type` of the first answer; empty when it had none.
    pub content_type: String,
    /// The body's bytes (possibly empty).
    pub bytes: Vec<u8>,
}

impl StoredBody {
    /// Checks the content type's shape (visible ASCII and spaces, at most 255 bytes) and
    /// that the body fits the largest record limit (the record's own limit is checked at
    /// apply, with the rest of the result).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_text(
            Field::ResultContentType,
            &self.content_type,
            0,
            MAX_CONTENT_TYPE,
            |b| (0x20..=0x7e).contains(&b),
            "visible ASCII and spaces",
        )?;
        let max = usize::try_from(MAX_RESULT_BYTES).unwrap_or(usize::MAX);
        check_len(Field::ResultBody, self.bytes.len(), 0, max)
    }
}
