//! What is stored to answer a retry: not the whole response.
//!
//! Full responses carry short-lived signed URLs, personal data and presentation fields
//! that change; the store keeps the status code, the resource reference and a few stable
//! fields, bounded in size. One-time secrets never belong here. Routes that cannot
//! re-render a replay may opt in to storing the body verbatim ([`StoredBody`], result
//! version 1); the storage encoding keeps version-0 records readable (`result_codec`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::body::StoredBody;
use crate::error::{check_free_text, check_len, check_text, Field, ValidationError};

/// Longest resource id.
pub const MAX_RESOURCE_ID: usize = 256;
/// Longest resource version.
pub const MAX_RESOURCE_VERSION: usize = 64;
/// Most stable fields in a result.
pub const MAX_FIELDS: usize = 32;
/// Longest field name.
pub const MAX_FIELD_NAME: usize = 64;
/// Longest field value.
pub const MAX_FIELD_VALUE: usize = 1024;
/// Longest error code.
pub const MAX_ERROR_CODE: usize = 64;
/// Longest error message.
pub const MAX_ERROR_MESSAGE: usize = 1024;
/// Result version 0: status, resource reference and fields; a replay is re-rendered.
pub const RESULT_VERSION_FIELDS: u32 = 0;
/// Result version 1: version 0 plus a body (and content type) stored verbatim.
pub const RESULT_VERSION_BODY: u32 = 1;

/// A stored successful result (its storage encoding is in `result_codec`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct StoredResult {
    /// The status code to replay (100..=599).
    pub status_code: u16,
    /// The id of the created or affected resource.
    pub resource_id: String,
    /// The version of that resource at completion.
    pub resource_version: String,
    /// A few stable fields needed to answer the retry (sorted, so encoding is stable).
    pub fields: BTreeMap<String, String>,
    /// True once the subject's derived data was purged: fields are gone, the tombstone stays.
    pub purged: bool,
    /// The first answer's body, kept verbatim for routes that opt in; `None` (version 0)
    /// means the replay is re-rendered from the resource reference.
    pub body: Option<StoredBody>,
}

impl StoredResult {
    /// Checks every field's shape (sizes against the policy are checked at apply).
    pub fn validate(&self) -> Result<(), ValidationError> {
        let code = u64::from(self.status_code);
        if !(100..=599).contains(&code) {
            return Err(ValidationError::Range {
                field: Field::StatusCode,
                value: code,
                min: 100,
                max: 599,
            });
        }
        check_free_text(Field::ResourceId, &self.resource_id, 0, MAX_RESOURCE_ID)?;
        check_free_text(
            Field::ResourceVersion,
            &self.resource_version,
            0,
            MAX_RESOURCE_VERSION,
        )?;
        check_len(Field::ResultFields, self.fields.len(), 0, MAX_FIELDS)?;
        for (name, value) in &self.fields {
            check_text(
                Field::ResultFieldName,
                name,
                1,
                MAX_FIELD_NAME,
                |b| b.is_ascii_alphanumeric() || b"._-".contains(&b),
                "A-Z a-z 0-9 . _ -",
            )?;
            check_free_text(Field::ResultFieldValue, value, 0, MAX_FIELD_VALUE)?;
        }
        self.body.as_ref().map_or(Ok(()), StoredBody::validate)
    }

    /// The result's version: [`RESULT_VERSION_BODY`] with a verbatim body, else
    /// [`RESULT_VERSION_FIELDS`].
    pub fn version(&self) -> u32 {
        if self.body.is_some() {
            RESULT_VERSION_BODY
        } else {
            RESULT_VERSION_FIELDS
        }
    }

    /// Removes derived, possibly personal data (the fields and a verbatim body, the most
    /// personal part of a response), keeping the status and resource reference.
    pub fn scrub(&mut self) {
        self.fields.clear();
        self.body = None;
        self.purged = true;
    }
}

/// A stored failure, replayed for terminal failures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ErrorSummary {
    /// A stable, machine-readable code, e.g. `card_declined`.
    pub code: String,
    /// A short human-readable message.
    pub message: String,
}

impl ErrorSummary {
    /// Checks the code's charset and both sizes.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_text(
            Field::ErrorCode,
            &self.code,
            1,
            MAX_ERROR_CODE,
            |b| b.is_ascii_alphanumeric() || b"._-".contains(&b),
            "A-Z a-z 0-9 . _ -",
        )?;
        check_free_text(Field::ErrorMessage, &self.message, 0, MAX_ERROR_MESSAGE)
    }

    /// Removes the message (it may quote personal data), keeping the code.
    pub fn scrub(&mut self) {
        self.message.clear();
    }
}
