//! Conversions between the wire types of `idem.v1` and the SDK's types, in one place.
//!
//! The SDK speaks idem-core's validated types ([`Scope`](idem_core::Scope),
//! [`Fingerprint`](idem_core::fingerprint::Fingerprint), [`Record`](idem_core::Record), ...)
//! so that a caller cannot send a malformed key or misread an enum. Records are returned as
//! idem-core's own [`Record`](idem_core::Record) rather than an SDK copy: the conversion is
//! lossless in both directions (see [`record_from_proto`]), and one type for the server, the
//! store, the SDK and the test checkers means one set of meanings.
//!
//! The conversions of idem-core's types are shared with the server: they live in
//! [`idem_proto::convert`] and are re-exported here. The SDK's own types (claims, lookups,
//! members, groups, node status) are converted by the crate-private free functions of this
//! module's submodules, in the same `x_from_proto` / `x_to_proto` style, so that every
//! translation between the wire and the SDK is found here and nowhere else. An answer that
//! breaks the wire conventions fails with a [`DecodeError`], which the SDK reports as
//! [`ClientError::InvalidResponse`](crate::ClientError::InvalidResponse).

pub(crate) mod claim;
pub(crate) mod membership;
pub(crate) mod placement;
pub(crate) mod records;
pub(crate) mod status;

pub use idem_proto::convert::{
    canonical_request_to_proto, claim_kind_from_proto, claim_kind_to_proto,
    duration_to_ms as millis, error_from_proto, error_to_proto, fingerprint_from_proto,
    fingerprint_to_proto, optional_stage_from_proto, record_from_proto, record_to_proto,
    result_from_proto, result_to_proto, risk_from_proto, risk_to_proto, scope_from_proto,
    scope_to_proto, stage_from_proto, stage_to_proto, state_from_proto, state_to_proto,
    DecodeError,
};
