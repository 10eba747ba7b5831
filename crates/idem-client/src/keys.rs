//! Idempotency keys for callers that have none.
//!
//! A key must be generated once per business intent, *before* the first attempt, and sent
//! unchanged on every retry of that intent: a key generated inside a retry loop makes every
//! attempt a new operation (docs/troubleshooting.md, "missed hits"). Keys must also be
//! unpredictable, so that another caller cannot guess one (they are scoped by tenant and
//! actor too): both forms here carry at least 74 random bits.

use uuid::Uuid;

/// A new key: a UUIDv7 in its hyphenated form (36 characters). Its first 48 bits are the
/// current time in milliseconds, so keys of one client sort by creation, which keeps a
/// store's inserts local; the remaining 74 bits are random.
pub fn new_key() -> String {
    Uuid::now_v7().hyphenated().to_string()
}

/// A new key: a UUIDv4 (122 random bits, no time component) in its hyphenated form, for
/// callers that do not want the creation time visible in the key.
pub fn new_key_v4() -> String {
    Uuid::new_v4().hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use idem_core::IdempotencyKey;

    use super::*;

    #[test]
    fn keys_are_valid_distinct_uuids_of_their_version() {
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            for (key, version) in [(new_key(), 7), (new_key_v4(), 4)] {
                IdempotencyKey::new(key.as_str()).unwrap();
                assert_eq!(Uuid::parse_str(&key).unwrap().get_version_num(), version);
                assert!(seen.insert(key), "a key repeated");
            }
        }
    }

    #[test]
    fn v7_keys_sort_by_creation_time() {
        let first = new_key();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(new_key() > first);
    }
}
