//! The error of decoding a wire message into idem-core types.

use idem_core::fingerprint::FingerprintError;
use idem_core::ValidationError;

use crate::reason;

/// Why a wire message could not be turned into an idem-core value.
///
/// Every variant has the API's machine-readable [`DecodeError::reason`], so the server can
/// answer with it; the `Display` text names the field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A field broke an idem-core rule; the reason is [`ValidationError::reason`].
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A fingerprint is malformed (`INVALID_FINGERPRINT`).
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    /// A required field is absent (or an enum is `UNSPECIFIED` where a value is required).
    #[error("{message}")]
    Missing {
        /// The machine-readable reason, e.g. `INVALID_SCOPE`.
        reason: &'static str,
        /// What is missing, e.g. `stage is required`.
        message: &'static str,
    },
    /// An enum field holds a value this version does not know.
    #[error("{field}: unknown value {value}")]
    UnknownValue {
        /// The field, e.g. `risk`.
        field: &'static str,
        /// The value received.
        value: i32,
        /// The machine-readable reason, e.g. `INVALID_POLICY`.
        reason: &'static str,
    },
}

impl DecodeError {
    /// The machine-readable reason (one of [`crate::reason`]), e.g. `INVALID_SCOPE`.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Invalid(error) => error.reason(),
            DecodeError::Fingerprint(_) => reason::INVALID_FINGERPRINT,
            DecodeError::Missing { reason, .. } | DecodeError::UnknownValue { reason, .. } => {
                reason
            }
        }
    }
}
