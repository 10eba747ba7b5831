//! Error values of the core crate.
//!
//! Validation errors name the field and the rule that was broken, so that the server can
//! turn them into a gRPC status with a machine-readable reason (`reason()`) and a message a
//! person can act on. Storage errors are opaque to the semantics: apply never interprets
//! them, it only propagates them (the node stops rather than diverge).

use std::fmt;

/// A field of a request or command that failed validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Field {
    /// `scope.tenant`
    Tenant,
    /// `scope.environment`
    Environment,
    /// `scope.actor`
    Actor,
    /// `scope.endpoint`
    Endpoint,
    /// The idempotency key.
    Key,
    /// The operation id.
    OperationId,
    /// The list of fingerprints carried by a claim.
    Fingerprints,
    /// The lease holder identity.
    Holder,
    /// `policy.lease`
    Lease,
    /// `policy.retention`
    Retention,
    /// `policy.max_result_bytes`
    MaxResultBytes,
    /// `result.status_code`
    StatusCode,
    /// `result.resource_id`
    ResourceId,
    /// `result.resource_version`
    ResourceVersion,
    /// A key of `result.fields`.
    ResultFieldName,
    /// A value of `result.fields`.
    ResultFieldValue,
    /// `result.fields` as a whole.
    ResultFields,
    /// `error.code`
    ErrorCode,
    /// `error.message`
    ErrorMessage,
    /// The remote reference of a confirmed external call.
    RemoteRef,
    /// The reason given for an admin command.
    Reason,
    /// The identity of the administrator.
    Admin,
    /// A batch limit (expire, purge).
    Limit,
    /// A region name.
    Region,
    /// `result.body` (stored verbatim).
    ResultBody,
    /// `result.content_type` (of a body stored verbatim).
    ResultContentType,
    /// `result.result_version`.
    ResultVersion,
    /// An endpoint's `abandon_after` (carried by the sweep's `Abandon` command).
    AbandonAfter,
    /// A replicated token's name.
    TokenName,
    /// A replicated token's tenants.
    TokenTenants,
}

impl Field {
    /// The dotted name of the field as it appears in the API.
    pub fn name(self) -> &'static str {
        match self {
            Field::Tenant => "scope.tenant",
            Field::Environment => "scope.environment",
            Field::Actor => "scope.actor",
            Field::Endpoint => "scope.endpoint",
            Field::Key => "key",
            Field::OperationId => "operation_id",
            Field::Fingerprints => "fingerprints",
            Field::Holder => "holder",
            Field::Lease => "policy.lease",
            Field::Retention => "policy.retention",
            Field::MaxResultBytes => "policy.max_result_bytes",
            Field::StatusCode => "result.status_code",
            Field::ResourceId => "result.resource_id",
            Field::ResourceVersion => "result.resource_version",
            Field::ResultFieldName => "result.fields.name",
            Field::ResultFieldValue => "result.fields.value",
            Field::ResultFields => "result.fields",
            Field::ErrorCode => "error.code",
            Field::ErrorMessage => "error.message",
            Field::RemoteRef => "remote_ref",
            Field::Reason => "reason",
            Field::Admin => "admin",
            Field::Limit => "limit",
            Field::Region => "region",
            Field::ResultBody => "result.body",
            Field::ResultContentType => "result.content_type",
            Field::ResultVersion => "result.result_version",
            Field::AbandonAfter => "policy.abandon_after",
            Field::TokenName => "name",
            Field::TokenTenants => "tenants",
        }
    }

    /// The machine-readable reason a violation of this field maps to.
    pub fn reason(self) -> &'static str {
        match self {
            Field::Tenant | Field::Environment | Field::Actor | Field::Endpoint => "INVALID_SCOPE",
            Field::Key => "INVALID_KEY",
            Field::Fingerprints => "INVALID_FINGERPRINT",
            Field::Lease | Field::Retention | Field::MaxResultBytes | Field::AbandonAfter => {
                "INVALID_POLICY"
            }
            Field::StatusCode
            | Field::ResourceId
            | Field::ResourceVersion
            | Field::ResultFieldName
            | Field::ResultFieldValue
            | Field::ResultFields
            | Field::ResultBody
            | Field::ResultContentType
            | Field::ResultVersion
            | Field::ErrorCode
            | Field::ErrorMessage => "INVALID_RESULT",
            Field::OperationId
            | Field::Holder
            | Field::RemoteRef
            | Field::Reason
            | Field::Admin
            | Field::Limit
            | Field::Region
            | Field::TokenName
            | Field::TokenTenants => "INVALID_ARGUMENT",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A violated input rule. Every constructor of a validated type returns one of these.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// The value is shorter or longer than allowed (in bytes, or entries for collections).
    #[error("{field}: length must be {min}..={max}, got {actual}")]
    Length {
        /// The offending field.
        field: Field,
        /// Smallest allowed length.
        min: usize,
        /// Largest allowed length.
        max: usize,
        /// The length received.
        actual: usize,
    },
    /// A byte outside the allowed character set.
    #[error("{field}: byte {position} is not allowed; allowed: {allowed}")]
    Charset {
        /// The offending field.
        field: Field,
        /// Zero-based byte offset of the first bad byte.
        position: usize,
        /// A description of the allowed characters.
        allowed: &'static str,
    },
    /// A number outside its range.
    #[error("{field}: {value} is outside {min}..={max}")]
    Range {
        /// The offending field.
        field: Field,
        /// The value received.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// Any other rule, described in words.
    #[error("{field}: {rule}")]
    Rule {
        /// The offending field.
        field: Field,
        /// The rule that was broken.
        rule: &'static str,
    },
}

impl ValidationError {
    /// The field that failed validation.
    pub fn field(&self) -> Field {
        match self {
            ValidationError::Length { field, .. }
            | ValidationError::Charset { field, .. }
            | ValidationError::Range { field, .. }
            | ValidationError::Rule { field, .. } => *field,
        }
    }

    /// The machine-readable reason (e.g. `INVALID_KEY`).
    pub fn reason(&self) -> &'static str {
        self.field().reason()
    }
}

/// A failure of the storage behind a [`crate::store::StateStore`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (I/O, corruption, closed database).
    #[error("storage backend: {0}")]
    Backend(String),
    /// Stored bytes could not be decoded.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// Checks `value` against a length range and a byte predicate.
pub(crate) fn check_text(
    field: Field,
    value: &str,
    min: usize,
    max: usize,
    allowed: fn(u8) -> bool,
    allowed_desc: &'static str,
) -> Result<(), ValidationError> {
    check_len(field, value.len(), min, max)?;
    match value.bytes().position(|b| !allowed(b)) {
        Some(position) => Err(ValidationError::Charset {
            field,
            position,
            allowed: allowed_desc,
        }),
        None => Ok(()),
    }
}

/// Checks a length against an inclusive range.
pub(crate) fn check_len(
    field: Field,
    actual: usize,
    min: usize,
    max: usize,
) -> Result<(), ValidationError> {
    if actual < min || actual > max {
        return Err(ValidationError::Length {
            field,
            min,
            max,
            actual,
        });
    }
    Ok(())
}

/// Checks free text (messages, reasons): bounded UTF-8 without control characters.
pub(crate) fn check_free_text(
    field: Field,
    value: &str,
    min: usize,
    max: usize,
) -> Result<(), ValidationError> {
    check_len(field, value.len(), min, max)?;
    match value.char_indices().find(|(_, c)| c.is_control()) {
        Some((position, _)) => Err(ValidationError::Charset {
            field,
            position,
            allowed: "UTF-8 text without control characters",
        }),
        None => Ok(()),
    }
}

/// Printable ASCII without space (0x21..=0x7e).
pub(crate) fn is_visible_ascii(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}
