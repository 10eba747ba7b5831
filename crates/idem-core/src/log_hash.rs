//! Keyed hashes of idempotency keys, the only form in which a key may appear in a log line.
//!
//! Keys are often business identifiers (order ids, invoice numbers). A plain hash of one can
//! be reversed by hashing every likely id, so the hash is an HMAC-SHA256 under a secret: set
//! once per process with [`set_secret`] (idemd reads it from `log_key_file`, the same file on
//! every node, so one key has one hash across the cluster). A process that sets none gets a
//! random secret: its hashes still cannot be reversed, but do not match other processes'.
//!
//! Every request's span carries its key's hash, so this runs once per call: the HMAC's key
//! schedule (two of its four SHA-256 blocks for a short key) is computed once per process
//! and copied for each hash.

use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

static SECRET: OnceLock<Vec<u8>> = OnceLock::new();

/// The secret was already set (or already used) in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the log hash secret is already set in this process")]
pub struct AlreadySet;

/// Sets the process's secret; fails once a secret is in use.
pub fn set_secret(secret: &[u8]) -> Result<(), AlreadySet> {
    SECRET.set(secret.to_vec()).map_err(|_| AlreadySet)
}

fn secret() -> &'static [u8] {
    SECRET.get_or_init(|| {
        let mut random = uuid::Uuid::now_v7().as_bytes().to_vec();
        random.extend_from_slice(uuid::Uuid::now_v7().as_bytes());
        random
    })
}

/// The HMAC keyed with the secret, before any message: fixes the secret on first use.
fn keyed() -> &'static Hmac<Sha256> {
    static KEYED: OnceLock<Hmac<Sha256>> = OnceLock::new();
    KEYED.get_or_init(|| Hmac::new_from_slice(secret()).expect("HMAC takes any key length"))
}

/// The first 8 bytes of HMAC-SHA256(secret, `bytes`), hex.
pub fn of(bytes: &[u8]) -> String {
    let mut mac = keyed().clone();
    mac.update(bytes);
    hex::encode(&mac.finalize().into_bytes()[..8])
}

#[cfg(test)]
mod tests {
    use sha2::Digest;

    use super::*;

    #[test]
    fn hashes_are_stable_keyed_and_short() {
        let first = of(b"order-1");
        assert_eq!(first, of(b"order-1"));
        assert_ne!(first, of(b"order-2"));
        assert_eq!(first.len(), 16);
        // Not the unkeyed hash a dictionary attack would compute.
        let plain = hex::encode(&Sha256::digest(b"order-1")[..8]);
        assert_ne!(first, plain);
        // The copied key schedule gives what a fresh HMAC under the same secret gives.
        let mut fresh = Hmac::<Sha256>::new_from_slice(secret()).unwrap();
        fresh.update(b"order-1");
        assert_eq!(first, hex::encode(&fresh.finalize().into_bytes()[..8]));
        assert_eq!(set_secret(b"too late"), Err(AlreadySet));
    }
}
