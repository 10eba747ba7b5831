//! The single error type of the fingerprint module.
//!
//! Every variant names the input (or field) at fault and the rule it broke, so a caller can
//! map it to a precise client-facing message. Untrusted text carried by a variant (a member
//! name, a method) is kept verbatim in the field but shortened in the `Display` output, so
//! logging an error never copies megabytes of request data.

use std::fmt::Write as _;

/// How many characters of untrusted text an error's `Display` output shows.
const PREVIEW_CHARS: usize = 64;

/// Why a fingerprint, or the canonical form it is computed from, could not be produced.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FingerprintError {
    /// The JSON input (checked before parsing) or a canonical output is larger than allowed.
    #[error("JSON is {actual} bytes, larger than the limit of {limit} bytes")]
    TooLarge {
        /// The configured limit, in bytes.
        limit: usize,
        /// The size found, in bytes.
        actual: usize,
    },

    /// The input is not strict JSON (RFC 8259) in UTF-8.
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    NotJson {
        /// 1-based line of the offending byte.
        line: usize,
        /// 1-based column of the offending byte, counted in bytes.
        column: usize,
        /// What was wrong.
        message: String,
    },

    /// A `\uXXXX` escape encodes a UTF-16 surrogate that is not part of a valid pair
    /// (forbidden by I-JSON, RFC 7493, and therefore by RFC 8785).
    #[error("lone UTF-16 surrogate escape at line {line}, column {column}")]
    LoneSurrogate {
        /// 1-based line of the escape.
        line: usize,
        /// 1-based column of the escape's backslash, counted in bytes.
        column: usize,
    },

    /// An object has two members with the same name (after unescaping), which RFC 8785
    /// (through I-JSON) forbids: which of the two a consumer sees would be ambiguous.
    #[error("duplicate object member name {}", preview(name))]
    DuplicateMember {
        /// The repeated member name.
        name: String,
    },

    /// A JSON number literal is too large in magnitude for an IEEE-754 double (e.g. `1e400`).
    #[error("number at line {line}, column {column} is out of the IEEE-754 double range")]
    NumberOutOfRange {
        /// 1-based line of the number.
        line: usize,
        /// 1-based column of the number's first byte, counted in bytes.
        column: usize,
    },

    /// An already-parsed value holds NaN or an infinity, which JSON cannot represent.
    #[error("number is NaN or infinite, which JSON cannot represent")]
    NonFiniteNumber,

    /// Arrays and objects are nested deeper than allowed.
    #[error("JSON nesting is deeper than the limit of {limit} levels")]
    TooDeep {
        /// The configured depth limit.
        limit: usize,
    },

    /// The HTTP method is not an upper-case token of 1 to 16 letters `A-Z`.
    #[error("method {} must be 1 to 16 upper-case letters A-Z", preview(method))]
    InvalidMethod {
        /// The rejected method.
        method: String,
    },

    /// The route is empty or longer than allowed.
    #[error("route must be 1 to {max} bytes, got {actual}")]
    InvalidRoute {
        /// The maximum route length in bytes.
        max: usize,
        /// The route's length in bytes.
        actual: usize,
    },

    /// The algorithm identifier is not 1 to 64 bytes of `[a-z0-9./_-]`.
    #[error(
        "algorithm {} must be 1 to 64 bytes of [a-z0-9./_-]",
        preview(algorithm)
    )]
    InvalidAlgorithm {
        /// The rejected algorithm identifier.
        algorithm: String,
    },

    /// The digest is not between 16 and 64 bytes long.
    #[error("digest must be 16 to 64 bytes, got {length}")]
    InvalidDigestLength {
        /// The rejected digest's length in bytes.
        length: usize,
    },
}

/// A short, escaped rendering of untrusted text for error messages.
fn preview(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(PREVIEW_CHARS).collect();
    let _ = write!(out, "{head:?}");
    if chars.next().is_some() {
        let _ = write!(out, "... ({} bytes)", text.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_shortens_untrusted_text() {
        let err = FingerprintError::DuplicateMember {
            name: "x".repeat(10_000),
        };
        let shown = err.to_string();
        assert!(shown.len() < 200, "{shown}");
        assert!(shown.contains("(10000 bytes)"), "{shown}");

        let err = FingerprintError::InvalidMethod {
            method: "get\n".into(),
        };
        assert_eq!(
            err.to_string(),
            r#"method "get\n" must be 1 to 16 upper-case letters A-Z"#
        );
    }
}
