//! Which idempotency keys look guessable or colliding: the low-entropy check of claims.
//!
//! A key is the caller's promise that two requests are "the same operation". Keys built
//! from a counter, a row id or a clock collide across callers (two services numbering
//! their orders from 1, two requests in the same millisecond) and a collision answers one
//! caller with another's stored result. The server cannot know a caller's intent, so this
//! check only *flags* such keys (a warning in the claim response and a metric by tenant);
//! it never refuses a claim: a numeric key may be a perfectly unique database id.
//!
//! The classes, each checked on the key alone (no state, one pass over at most
//! [`idem_core::key::MAX_KEY`] bytes):
//!
//! - [`KeyWarning::Sequential`]: digits, optionally after a word prefix (`12345`,
//!   `order-000123`): a counter or a row id;
//! - [`KeyWarning::Timestamp`]: the same shape where the number is a plausible Unix time in
//!   seconds, milliseconds, microseconds or nanoseconds (years 2000–2100), or an ISO-8601
//!   date-time (`2026-12-03T18:40:07Z`);
//! - [`KeyWarning::Short`]: fewer than [`MIN_LEN`] characters: too few to be random;
//! - [`KeyWarning::LowEntropy`]: repeated characters, so that the key's empirical entropy
//!   (its length times the Shannon entropy of its character frequencies) is below
//!   [`MIN_BITS`] (`aaaaaaaaaaaaaaaaaaaa`, `abababababababab`); not reported when the key is
//!   already sequential, a timestamp or short, which says more.
//!
//! UUIDs (v4 and v7), ULIDs and 128-bit random base64url keys pass: v7 and ULIDs begin with
//! a time but continue with 74–80 random bits, and they are not all digits.

/// Fewer characters than this is [`KeyWarning::Short`]: 16 characters of a 64-symbol
/// alphabet hold 96 bits, of hex 64; below that a key is rarely random.
pub const MIN_LEN: usize = 16;

/// Below this many bits of empirical entropy a key is [`KeyWarning::LowEntropy`]. The
/// estimate undercounts short random keys (16 random hex characters measure about 50
/// bits), so the bar is well below the 64 bits a random key should have.
pub const MIN_BITS: f64 = 40.0;

/// The characters a word prefix of a numbered key may have (`order-`, `inv_`, `tx:`).
const PREFIX_SEPARATORS: &[u8] = b"-_:.~";

/// The separators of an ISO-8601 date-time, besides its digits.
const DATE_TIME_SEPARATORS: &[u8] = b"-:.TZ";

/// Unix times of years 2000 and 2100, in seconds.
const PLAUSIBLE_SECONDS: std::ops::Range<u64> = 946_684_800..4_102_444_800;

/// Why a key looks weak. The wire names are `KEY_WARNING_*` of `idem.v1.KeyWarning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyWarning {
    /// Digits, optionally after a word prefix: a counter or a row id.
    Sequential,
    /// A Unix time or an ISO-8601 date-time.
    Timestamp,
    /// Fewer than [`MIN_LEN`] characters.
    Short,
    /// Repeated characters: less than [`MIN_BITS`] of empirical entropy.
    LowEntropy,
}

impl KeyWarning {
    /// Every warning, in the order [`classify`] reports them.
    pub const ALL: [KeyWarning; 4] = [
        KeyWarning::Sequential,
        KeyWarning::Timestamp,
        KeyWarning::Short,
        KeyWarning::LowEntropy,
    ];

    /// The metric label, e.g. `low_entropy`.
    pub fn label(self) -> &'static str {
        match self {
            KeyWarning::Sequential => "sequential",
            KeyWarning::Timestamp => "timestamp",
            KeyWarning::Short => "short",
            KeyWarning::LowEntropy => "low_entropy",
        }
    }
}

/// The warnings of `key` (a validated idempotency key), in [`KeyWarning::ALL`] order; empty
/// for a key that looks random.
pub fn classify(key: &str) -> Vec<KeyWarning> {
    let bytes = key.as_bytes();
    let mut warnings = Vec::new();
    let shaped = if is_timestamp(bytes) {
        Some(KeyWarning::Timestamp)
    } else {
        numbered(bytes).map(|_| KeyWarning::Sequential)
    };
    warnings.extend(shaped);
    let short = bytes.len() < MIN_LEN;
    if short {
        warnings.push(KeyWarning::Short);
    }
    if shaped.is_none() && !short && entropy_bits(bytes) < MIN_BITS {
        warnings.push(KeyWarning::LowEntropy);
    }
    warnings
}

/// The digits of a numbered key: all of `key` after an optional prefix of letters and
/// separators; `None` when `key` is not that shape.
fn numbered(key: &[u8]) -> Option<&[u8]> {
    let start = key
        .iter()
        .position(u8::is_ascii_digit)
        .filter(|&i| key[..i].iter().all(|b| is_prefix_byte(*b)))?;
    let digits = &key[start..];
    digits.iter().all(u8::is_ascii_digit).then_some(digits)
}

fn is_prefix_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || PREFIX_SEPARATORS.contains(&b)
}

/// A numbered key whose number is a plausible Unix time, or an ISO-8601 date-time
/// (after an optional word prefix).
fn is_timestamp(key: &[u8]) -> bool {
    if let Some(digits) = numbered(key) {
        return is_unix_time(digits);
    }
    let start = key.iter().position(u8::is_ascii_digit).unwrap_or(key.len());
    let rest = &key[start..];
    let digits: Vec<u8> = rest.iter().copied().filter(u8::is_ascii_digit).collect();
    let shaped = rest
        .iter()
        .all(|b| b.is_ascii_digit() || DATE_TIME_SEPARATORS.contains(b));
    let dated = rest.len() >= 10 && rest[4] == b'-' && rest[7] == b'-';
    shaped && dated && (digits.starts_with(b"19") || digits.starts_with(b"20"))
}

/// Seconds, milliseconds, microseconds or nanoseconds since 1970 in years 2000–2100.
fn is_unix_time(digits: &[u8]) -> bool {
    let divisor = match digits.len() {
        10 => 1,
        13 => 1_000,
        16 => 1_000_000,
        19 => 1_000_000_000,
        _ => return false,
    };
    let value = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    PLAUSIBLE_SECONDS.contains(&(value / divisor))
}

/// The key's length times the Shannon entropy of its byte frequencies, in bits.
fn entropy_bits(key: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in key {
        counts[usize::from(b)] += 1;
    }
    let len = key.len() as f64;
    let per_byte: f64 = counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum();
    per_byte * len
}

#[cfg(test)]
mod tests {
    use super::KeyWarning::{LowEntropy, Sequential, Short, Timestamp};
    use super::*;

    #[test]
    fn counters_and_row_ids_are_sequential() {
        assert_eq!(classify("12345"), [Sequential, Short]);
        assert_eq!(classify("order-000123"), [Sequential, Short]);
        assert_eq!(classify("invoice_00000000000000042"), [Sequential]);
        assert_eq!(classify("42424242424242424242"), [Sequential]);
    }

    #[test]
    fn clocks_are_timestamps() {
        assert_eq!(classify("1764787207"), [Timestamp, Short]);
        assert_eq!(classify("1764787207123"), [Timestamp, Short]);
        assert_eq!(classify("charge-1764787207123456"), [Timestamp]);
        assert_eq!(classify("1764787207123456789"), [Timestamp]);
        assert_eq!(classify("2026-12-03T18:40:07.123Z"), [Timestamp]);
        assert_eq!(classify("order-2026-12-03T18:40:07Z"), [Timestamp]);
        // Ten digits outside 2000–2100 are a number, not a time.
        assert_eq!(classify("9999999999"), [Sequential, Short]);
    }

    #[test]
    fn short_and_repetitive_keys_are_flagged() {
        assert_eq!(classify("retry-me"), [Short]);
        assert_eq!(classify("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), [LowEntropy]);
        assert_eq!(classify("abababababababababab"), [LowEntropy]);
        assert_eq!(classify("a"), [Short]);
    }

    #[test]
    fn random_keys_pass() {
        for key in [
            // UUIDv4 and UUIDv7.
            "9b2f6c1e-4d7a-4e3b-8f21-5a6c7d8e9f01",
            "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d",
            // ULID.
            "01JE5M3Z8Q4V7N2K6X9R1T0W3Y",
            // 128 random bits in base64url.
            "q2Xv_9Lk0Z-3mN8pQ4rT1w",
            // 64 random bits in hex.
            "3f9a2c7e1b8d4f60",
            // A meaningful key with a random part.
            "charge-9b2f6c1e4d7a4e3b",
        ] {
            assert!(classify(key).is_empty(), "{key}");
        }
    }

    #[test]
    fn generated_keys_pass() {
        for _ in 0..1000 {
            let (v4, v7) = (idem_client::new_key_v4(), idem_client::new_key());
            assert!(classify(&v4).is_empty(), "{v4}");
            assert!(classify(&v7).is_empty(), "{v7}");
        }
    }

    proptest::proptest! {
        /// Any valid key is classified without panicking, in `ALL` order, each warning once;
        /// a timestamp is never also sequential.
        #[test]
        fn any_key_is_classified(key in "[A-Za-z0-9._:~-]{1,255}") {
            let warnings = classify(&key);
            let order: Vec<_> = KeyWarning::ALL.iter().filter(|w| warnings.contains(w)).collect();
            proptest::prop_assert_eq!(warnings.iter().collect::<Vec<_>>(), order);
            let both = [KeyWarning::Sequential, KeyWarning::Timestamp];
            proptest::prop_assert!(!both.iter().all(|w| warnings.contains(w)));
        }
    }

    #[test]
    fn labels_are_distinct() {
        let labels: std::collections::BTreeSet<_> =
            KeyWarning::ALL.iter().map(|w| w.label()).collect();
        assert_eq!(labels.len(), KeyWarning::ALL.len());
    }
}
