//! The server's warnings about a claim's key ([`Claim::warnings`](crate::Claim::warnings)).
//!
//! A node with `key_warnings` on (the default) flags keys built from counters, clocks or too
//! few characters: they collide across callers, and a collision answers one caller with
//! another's stored result. The warnings are advisory (the claim was decided exactly as
//! without them); the fix is a generated key ([`crate::new_key`]).

use idem_proto::v1;

/// Why the server thinks a key is weak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyWarning {
    /// Digits, optionally after a word prefix (`12345`, `order-000123`): a counter or row id.
    Sequential,
    /// A Unix time or an ISO-8601 date-time, optionally after a word prefix.
    Timestamp,
    /// Fewer than 16 characters.
    Short,
    /// Repeated characters: little entropy.
    LowEntropy,
    /// A warning this SDK does not know yet (its wire value), from a newer server.
    Other(i32),
}

impl KeyWarning {
    /// The warning of a wire value.
    pub(crate) fn from_proto(value: i32) -> KeyWarning {
        match v1::KeyWarning::try_from(value) {
            Ok(v1::KeyWarning::Sequential) => KeyWarning::Sequential,
            Ok(v1::KeyWarning::Timestamp) => KeyWarning::Timestamp,
            Ok(v1::KeyWarning::Short) => KeyWarning::Short,
            Ok(v1::KeyWarning::LowEntropy) => KeyWarning::LowEntropy,
            Ok(v1::KeyWarning::Unspecified) | Err(_) => KeyWarning::Other(value),
        }
    }

    /// The wire name without its prefix, e.g. `LOW_ENTROPY` (`OTHER` for unknown ones).
    pub fn name(self) -> &'static str {
        match self {
            KeyWarning::Sequential => "SEQUENTIAL",
            KeyWarning::Timestamp => "TIMESTAMP",
            KeyWarning::Short => "SHORT",
            KeyWarning::LowEntropy => "LOW_ENTROPY",
            KeyWarning::Other(_) => "OTHER",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_decode_and_unknown_ones_are_kept() {
        for (wire, warning) in [
            (v1::KeyWarning::Sequential, KeyWarning::Sequential),
            (v1::KeyWarning::Timestamp, KeyWarning::Timestamp),
            (v1::KeyWarning::Short, KeyWarning::Short),
            (v1::KeyWarning::LowEntropy, KeyWarning::LowEntropy),
        ] {
            assert_eq!(KeyWarning::from_proto(wire as i32), warning);
            assert_eq!(
                format!("KEY_WARNING_{}", warning.name()),
                wire.as_str_name()
            );
        }
        assert_eq!(KeyWarning::from_proto(99), KeyWarning::Other(99));
        assert_eq!(KeyWarning::from_proto(0), KeyWarning::Other(0));
    }
}
