//! The `Idempotency-Key` header: an RFC 8941 Structured Field Item whose value is a String.
//!
//! The header is untrusted input read before anything else, so the parser is small, total
//! (every byte sequence gives a value or an error, never a panic) and bounded: the field
//! value may be at most [`MAX_FIELD_BYTES`] long, and the string it carries must then be a
//! valid idem key (1 to 255 bytes of `A-Z a-z 0-9 . _ : ~ -`). Parameters after the string
//! (`"k1";a=1`) are parsed, as RFC 8941 requires, and ignored: the draft defines none.
//!
//! A token (`Idempotency-Key: abc`) is not a String and is refused: accepting it would make
//! `abc` and `"abc"` the same key for us but not for a strict server behind another
//! middleware, and the draft's examples are all quoted.

use idem_core::{IdempotencyKey, ValidationError};

/// The longest field value accepted, in bytes (quotes, escapes and parameters included).
pub const MAX_FIELD_BYTES: usize = 1024;

/// Why an `Idempotency-Key` field value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The field value is longer than [`MAX_FIELD_BYTES`].
    #[error("the field value is longer than {MAX_FIELD_BYTES} bytes")]
    TooLong,
    /// The header appears more than once (a list is not an Item).
    #[error("the header appears more than once")]
    Repeated,
    /// The item is not a String (a token, a number, ... or nothing).
    #[error("the value is not a Structured Field string (quote it: \"...\")")]
    NotAString,
    /// The string has no closing quote.
    #[error("the string has no closing quote")]
    Unterminated,
    /// A backslash not followed by `"` or `\`.
    #[error("invalid escape at byte {0}")]
    BadEscape(usize),
    /// A byte outside `%x20-7E` inside the string.
    #[error("invalid character at byte {0}")]
    BadChar(usize),
    /// A malformed parameter after the string.
    #[error("malformed parameter at byte {0}")]
    BadParameter(usize),
    /// Something follows the item.
    #[error("unexpected data at byte {0}")]
    Trailing(usize),
    /// The string is not a valid idem key.
    #[error("{0}")]
    Invalid(#[from] ValidationError),
}

/// Parses one `Idempotency-Key` field value into a validated key.
pub fn parse_key(value: &[u8]) -> Result<IdempotencyKey, KeyError> {
    let text = parse_item_string(value)?;
    Ok(IdempotencyKey::new(text)?)
}

/// Parses an RFC 8941 Item that must be a String and returns the string's content.
pub fn parse_item_string(value: &[u8]) -> Result<String, KeyError> {
    if value.len() > MAX_FIELD_BYTES {
        return Err(KeyError::TooLong);
    }
    let mut cursor = Cursor {
        input: value,
        at: 0,
    };
    cursor.skip_spaces();
    if cursor.peek() != Some(b'"') {
        return Err(KeyError::NotAString);
    }
    let text = cursor.string()?;
    cursor.parameters()?;
    cursor.skip_spaces();
    if cursor.at < value.len() {
        return Err(KeyError::Trailing(cursor.at));
    }
    Ok(text)
}

/// A position in the field value.
struct Cursor<'a> {
    input: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    /// `sf-string`, the cursor on its opening quote.
    fn string(&mut self) -> Result<String, KeyError> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let at = self.at;
            match self.next() {
                None => return Err(KeyError::Unterminated),
                Some(b'"') => return Ok(out),
                Some(b'\\') => match self.next() {
                    Some(c @ (b'"' | b'\\')) => out.push(char::from(c)),
                    _ => return Err(KeyError::BadEscape(at)),
                },
                Some(c @ 0x20..=0x7e) => out.push(char::from(c)),
                Some(_) => return Err(KeyError::BadChar(at)),
            }
        }
    }

    /// `parameters`: `*( ";" *SP key [ "=" bare-item ] )`.
    fn parameters(&mut self) -> Result<(), KeyError> {
        while self.peek() == Some(b';') {
            self.at += 1;
            self.skip_spaces();
            self.param_key()?;
            if self.peek() == Some(b'=') {
                self.at += 1;
                self.bare_item()?;
            }
        }
        Ok(())
    }

    /// `key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`.
    fn param_key(&mut self) -> Result<(), KeyError> {
        match self.peek() {
            Some(b'a'..=b'z' | b'*') => self.at += 1,
            _ => return Err(KeyError::BadParameter(self.at)),
        }
        self.take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-.*".contains(&c));
        Ok(())
    }

    /// A parameter's value: any bare item (string, token, number, byte sequence, boolean).
    fn bare_item(&mut self) -> Result<(), KeyError> {
        let start = self.at;
        let ok = match self.peek() {
            Some(b'"') => {
                self.string()?;
                true
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'?') => {
                self.at += 1;
                matches!(self.next(), Some(b'0' | b'1'))
            }
            Some(b':') => {
                self.at += 1;
                self.take_while(|c| c.is_ascii_alphanumeric() || b"+/=".contains(&c));
                self.next() == Some(b':')
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'*' => {
                self.take_while(|c| is_tchar(c) || c == b':' || c == b'/');
                true
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(KeyError::BadParameter(start))
        }
    }

    /// `sf-integer` or `sf-decimal`: at most 15 digits, at most 3 after the point.
    fn number(&mut self) -> bool {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let integer = self.take_while(|c| c.is_ascii_digit());
        if self.peek() != Some(b'.') {
            return (1..=15).contains(&integer);
        }
        self.at += 1;
        let fraction = self.take_while(|c| c.is_ascii_digit());
        (1..=12).contains(&integer) && (1..=3).contains(&fraction)
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> usize {
        let start = self.at;
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
        self.at - start
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(value: &str) -> Result<String, KeyError> {
        parse_key(value.as_bytes()).map(|k| k.as_str().to_owned())
    }

    #[test]
    fn accepts_strings_with_spaces_and_parameters() {
        assert_eq!(key(r#""8e03978e-40d5""#).unwrap(), "8e03978e-40d5");
        assert_eq!(key(r#"  "k1"  "#).unwrap(), "k1");
        assert_eq!(
            key(r#""k1";a=1;b;c="x";d=?0;e=:AQ==:;f=tok/1;g=-1.5"#).unwrap(),
            "k1"
        );
        assert_eq!(key(r#""k1"; a=1"#).unwrap(), "k1");
    }

    #[test]
    fn refuses_non_strings_and_malformed_strings() {
        assert_eq!(key("k1"), Err(KeyError::NotAString));
        assert_eq!(key(""), Err(KeyError::NotAString));
        assert_eq!(key("1"), Err(KeyError::NotAString));
        assert_eq!(key(r#""k1"#), Err(KeyError::Unterminated));
        assert_eq!(key(r#""k\1""#), Err(KeyError::BadEscape(2)));
        assert_eq!(key("\"k\u{7f}\""), Err(KeyError::BadChar(2)));
        assert_eq!(key("\"k\t\""), Err(KeyError::BadChar(2)));
        assert_eq!(key(r#""k1" "k2""#), Err(KeyError::Trailing(5)));
        assert_eq!(key(r#""k1", "k2""#), Err(KeyError::Trailing(4)));
        assert_eq!(key(r#""k1";A=1"#), Err(KeyError::BadParameter(5)));
        assert_eq!(key(r#""k1";a=?2"#), Err(KeyError::BadParameter(7)));
        assert_eq!(
            key(r#""k1";a=1234567890123456"#),
            Err(KeyError::BadParameter(7))
        );
        assert_eq!(key(r#""k1";a=1.2345"#), Err(KeyError::BadParameter(7)));
    }

    #[test]
    fn the_string_must_be_a_valid_key() {
        assert!(matches!(key(r#""""#), Err(KeyError::Invalid(_))));
        assert!(matches!(key(r#""a b""#), Err(KeyError::Invalid(_))));
        assert!(matches!(key(r#""a\"b""#), Err(KeyError::Invalid(_))));
        let long = format!("\"{}\"", "a".repeat(256));
        assert!(matches!(key(&long), Err(KeyError::Invalid(_))));
        let too_long = format!("\"{}\"", "a".repeat(MAX_FIELD_BYTES));
        assert_eq!(key(&too_long), Err(KeyError::TooLong));
    }

    proptest! {
        /// Any byte sequence gives a value or an error, never a panic.
        #[test]
        fn total_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_item_string(&bytes);
        }

        /// Serialising any string as an sf-string and parsing it gives it back.
        #[test]
        fn round_trips(text in "[ -~]{0,80}", params in "(;[a-z][a-z0-9]{0,3}(=[0-9]{1,4})?){0,3}") {
            let mut field = String::from("\"");
            for c in text.chars() {
                if c == '"' || c == '\\' {
                    field.push('\\');
                }
                field.push(c);
            }
            field.push('"');
            field.push_str(&params);
            prop_assert_eq!(parse_item_string(field.as_bytes()).unwrap(), text);
        }

        /// Valid keys, quoted, are accepted unchanged.
        #[test]
        fn valid_keys_parse(k in "[A-Za-z0-9._:~-]{1,255}") {
            prop_assert_eq!(key(&format!("\"{k}\"")).unwrap(), k);
        }
    }
}
