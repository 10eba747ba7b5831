//! Request fingerprints: what makes "the same request" under one idempotency key.
//!
//! A fingerprint is stored with the record at first claim. A later claim with the same
//! scope and key must carry a fingerprint of the same algorithm and schema version; a
//! different digest is a `FINGERPRINT_MISMATCH`, and a missing algorithm is
//! `FINGERPRINT_UNVERIFIABLE` (upgrading the algorithm must never make old keys look new).
//!
//! `jcs-sha256/v1` ([`JCS_SHA256_V1`]) is SHA-256 over the RFC 8785 canonical JSON
//! ([`jcs`]) of the request's identifying parts ([`request::CanonicalRequest`]). The
//! canonical form is computed from *parsed* data, so member order, whitespace, escapes and
//! number spelling never change a fingerprint, while anything that changes the data does.

use std::fmt;

use serde::{Deserialize, Serialize};

mod error;
pub mod jcs;
pub mod request;

pub use error::FingerprintError;
pub use jcs::{JcsOptions, JsonValue};
pub use request::{CanonicalRequest, RequestBody};

/// The longest algorithm identifier [`Fingerprint::new`] accepts, in bytes.
pub const MAX_ALGORITHM_LEN: usize = 64;

/// The shortest digest [`Fingerprint::new`] accepts, in bytes (128 bits).
pub const MIN_DIGEST_LEN: usize = 16;

/// The longest digest [`Fingerprint::new`] accepts, in bytes (512 bits).
pub const MAX_DIGEST_LEN: usize = 64;

/// The identifier of the only algorithm defined so far: SHA-256 over RFC 8785 (JCS)
/// canonical JSON of `{method, route, path_params, query, body}`.
pub const JCS_SHA256_V1: &str = "jcs-sha256/v1";

/// A request fingerprint as stored with a record.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Algorithm identifier, e.g. [`JCS_SHA256_V1`].
    pub algorithm: String,
    /// The caller's request schema version: bumping it marks a change in what the
    /// canonical request contains.
    pub schema_version: u32,
    /// The digest bytes (32 for SHA-256).
    pub digest: Vec<u8>,
}

impl Fingerprint {
    /// A validated fingerprint: `algorithm` must be 1 to [`MAX_ALGORITHM_LEN`] bytes of
    /// `[a-z0-9./_-]`, and `digest` [`MIN_DIGEST_LEN`] to [`MAX_DIGEST_LEN`] bytes.
    ///
    /// Any well-formed algorithm is accepted, not only [`JCS_SHA256_V1`]: a store must keep
    /// fingerprints of algorithms it cannot compute itself.
    pub fn new(
        algorithm: impl Into<String>,
        schema_version: u32,
        digest: impl Into<Vec<u8>>,
    ) -> Result<Self, FingerprintError> {
        let fingerprint = Self {
            algorithm: algorithm.into(),
            schema_version,
            digest: digest.into(),
        };
        fingerprint.validate()?;
        Ok(fingerprint)
    }

    /// Checks the rules of [`Fingerprint::new`], e.g. on a deserialised fingerprint.
    pub fn validate(&self) -> Result<(), FingerprintError> {
        let algorithm_ok = !self.algorithm.is_empty()
            && self.algorithm.len() <= MAX_ALGORITHM_LEN
            && self.algorithm.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'.' | b'/' | b'_' | b'-')
            });
        if !algorithm_ok {
            return Err(FingerprintError::InvalidAlgorithm {
                algorithm: self.algorithm.clone(),
            });
        }
        if !(MIN_DIGEST_LEN..=MAX_DIGEST_LEN).contains(&self.digest.len()) {
            return Err(FingerprintError::InvalidDigestLength {
                length: self.digest.len(),
            });
        }
        Ok(())
    }

    /// The digest in lower-case hex.
    pub fn to_hex(&self) -> String {
        hex::encode(&self.digest)
    }
}

/// Formats as `algorithm:schema_version:hex-digest`, e.g. `jcs-sha256/v1:1:9f86…`
/// (`:` cannot occur in an algorithm identifier).
impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.algorithm,
            self.schema_version,
            self.to_hex()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_validates_algorithm_and_digest() {
        let digest = vec![0xab; 32];
        let fingerprint = Fingerprint::new(JCS_SHA256_V1, 2, digest.clone()).unwrap();
        assert_eq!(fingerprint.algorithm, JCS_SHA256_V1);
        assert_eq!(fingerprint.schema_version, 2);
        assert_eq!(fingerprint.digest, digest);
        for algorithm in ["a", "blake3/v2", "x.y_z-0", &"a".repeat(MAX_ALGORITHM_LEN)] {
            assert!(
                Fingerprint::new(algorithm, 1, digest.clone()).is_ok(),
                "{algorithm}"
            );
        }
        for algorithm in ["", "SHA256", "sha 256", "sha:256", "é", &"a".repeat(65)] {
            assert_eq!(
                Fingerprint::new(algorithm, 1, digest.clone()),
                Err(FingerprintError::InvalidAlgorithm {
                    algorithm: algorithm.into()
                }),
                "{algorithm:?}"
            );
        }
        for length in [MIN_DIGEST_LEN, 20, MAX_DIGEST_LEN] {
            assert!(
                Fingerprint::new("a", 1, vec![0; length]).is_ok(),
                "{length}"
            );
        }
        for length in [0, 1, MIN_DIGEST_LEN - 1, MAX_DIGEST_LEN + 1] {
            assert_eq!(
                Fingerprint::new("a", 1, vec![0; length]),
                Err(FingerprintError::InvalidDigestLength { length })
            );
        }
    }

    #[test]
    fn hex_and_display() {
        let fingerprint =
            Fingerprint::new(JCS_SHA256_V1, 7, (0u8..16).collect::<Vec<_>>()).unwrap();
        assert_eq!(fingerprint.to_hex(), "000102030405060708090a0b0c0d0e0f");
        assert_eq!(
            fingerprint.to_string(),
            "jcs-sha256/v1:7:000102030405060708090a0b0c0d0e0f"
        );
    }

    #[test]
    fn computed_fingerprints_are_valid() {
        let fingerprint = CanonicalRequest::new("GET", "/")
            .unwrap()
            .fingerprint(1)
            .unwrap();
        assert_eq!(fingerprint.validate(), Ok(()));
        assert_eq!(fingerprint.digest.len(), 32);
    }
}
