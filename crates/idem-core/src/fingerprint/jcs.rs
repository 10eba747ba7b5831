//! RFC 8785, the JSON Canonicalization Scheme (JCS): one byte string per JSON value.
//!
//! # Why
//!
//! A fingerprint must depend on what a request *means*, never on how a client happened to
//! serialise it: `{"a":1, "b":2}` and `{"b":2,"a":1}` are the same request, and so are
//! `1.0`, `1E0` and `1`, or `"\u0041"` and `"A"`. So the bytes are parsed and the parsed
//! value is serialised again in the single form RFC 8785 defines, and only that form is
//! hashed. Two clients (or an SDK and the server) agree on a fingerprint as long as they
//! agree on the parsed data.
//!
//! # The canonical form
//!
//! - No whitespace between tokens.
//! - Literals `null`, `true`, `false` as is.
//! - Numbers are IEEE-754 doubles (as in ECMAScript and I-JSON), written the way
//!   ECMAScript's `Number.prototype.toString` writes them: `4.50` becomes `4.5`, `1E30`
//!   becomes `1e+30`, `-0` becomes `0`, and an integer above 2^53 is rounded to the nearest
//!   double (`9007199254740993` becomes `9007199254740992`). A literal too large for a
//!   double (`1e400`) is an error, not an infinity; one too small becomes `0`, as in
//!   ECMAScript.
//! - Strings: `"` and `\` escaped, the controls U+0008, U+0009, U+000A, U+000C, U+000D as
//!   `\b \t \n \f \r`, other controls below U+0020 as `\u00xx` in lower-case hex, and every
//!   other character (including non-ASCII, U+007F, U+2028 and U+2029) as literal UTF-8.
//!   No Unicode normalisation is applied.
//! - Object members are sorted by their names compared as arrays of **UTF-16 code units**,
//!   because that is what RFC 8785 specifies (it is how ECMAScript compares strings, so
//!   JavaScript implementations get it for free). Comparing UTF-8 bytes or code points gives
//!   the same order except between characters U+E000..U+FFFF and characters above U+FFFF:
//!   in UTF-16 a supplementary character starts with a surrogate (0xD800..0xDBFF) and so
//!   sorts *before* U+E000..U+FFFF, while in UTF-8 it sorts after. See [`compare_utf16`].
//!
//! # Strictness
//!
//! The input must be RFC 8259 JSON in UTF-8 and I-JSON (RFC 7493) as RFC 8785 requires:
//! no byte-order mark, no comments, no trailing commas, no duplicate member names (compared
//! after unescaping), no escaped lone surrogates. Non-characters such as U+FFFF are
//! accepted. The input size is checked before parsing and nesting depth is bounded, so
//! hostile input costs bounded memory and stack, and every failure is a
//! [`FingerprintError`], never a panic.

use std::cmp::Ordering;
use std::collections::HashSet;

use super::FingerprintError;

/// Default limit on the size of JSON input, and of any canonical output: 1 MiB.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// Default limit on the nesting depth of arrays and objects.
pub const DEFAULT_MAX_DEPTH: usize = 128;

/// The largest depth limit [`JcsOptions::with_max_depth`] accepts; larger values are
/// lowered to it so that parsing and serialising (which recurse) cannot exhaust a stack.
pub const MAX_DEPTH_CEILING: usize = 1024;

/// Limits applied while parsing and canonicalising.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JcsOptions {
    max_bytes: usize,
    max_depth: usize,
}

impl Default for JcsOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl JcsOptions {
    /// The default limits: [`DEFAULT_MAX_BYTES`] and [`DEFAULT_MAX_DEPTH`].
    pub const fn new() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// Sets the size limit, in bytes. It applies to raw JSON input (checked before parsing)
    /// and to every canonical output, so no canonical form longer than it is ever produced.
    #[must_use]
    pub const fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets the nesting depth limit: the number of arrays and objects that may enclose a
    /// value (`[]` has depth 1, a scalar depth 0). Values above [`MAX_DEPTH_CEILING`] are
    /// lowered to it.
    #[must_use]
    pub const fn with_max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = if max_depth > MAX_DEPTH_CEILING {
            MAX_DEPTH_CEILING
        } else {
            max_depth
        };
        self
    }

    /// The size limit, in bytes.
    pub const fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The nesting depth limit.
    pub const fn max_depth(&self) -> usize {
        self.max_depth
    }
}

/// A parsed JSON value, in the I-JSON data model RFC 8785 works on.
///
/// Numbers are doubles; object members keep the order they were given in (the canonical
/// serialisation sorts them). A value built by hand may hold NaN, infinities or duplicate
/// member names: canonicalising it then fails with [`FingerprintError::NonFiniteNumber`]
/// or [`FingerprintError::DuplicateMember`].
#[derive(Clone, Debug, PartialEq)]
pub enum JsonValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as an IEEE-754 double.
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<JsonValue>),
    /// An object, as its members in any order.
    Object(Vec<(String, JsonValue)>),
}

impl JsonValue {
    /// Converts a `serde_json` value. Its integers become doubles (rounded to nearest, as
    /// when parsing them from text); nesting deeper than `options` allows is rejected.
    pub fn from_serde_json(
        value: &serde_json::Value,
        options: &JcsOptions,
    ) -> Result<Self, FingerprintError> {
        from_serde(value, 0, options.max_depth)
    }
}

impl TryFrom<&serde_json::Value> for JsonValue {
    type Error = FingerprintError;

    /// [`JsonValue::from_serde_json`] with the default limits.
    fn try_from(value: &serde_json::Value) -> Result<Self, Self::Error> {
        Self::from_serde_json(value, &JcsOptions::new())
    }
}

fn from_serde(
    value: &serde_json::Value,
    depth: usize,
    max_depth: usize,
) -> Result<JsonValue, FingerprintError> {
    use serde_json::Value as V;
    Ok(match value {
        V::Null => JsonValue::Null,
        V::Bool(b) => JsonValue::Bool(*b),
        V::Number(n) => {
            // Without serde_json's `arbitrary_precision` every number has an f64 form; with
            // it, a number that does not fit a double is out of range.
            let f = n.as_f64().filter(|f| f.is_finite());
            JsonValue::Number(f.ok_or(FingerprintError::NonFiniteNumber)?)
        }
        V::String(s) => JsonValue::String(s.clone()),
        V::Array(items) => {
            let depth = enter(depth, max_depth)?;
            let items = items.iter().map(|item| from_serde(item, depth, max_depth));
            JsonValue::Array(items.collect::<Result<_, _>>()?)
        }
        V::Object(map) => {
            let depth = enter(depth, max_depth)?;
            let members = map
                .iter()
                .map(|(name, item)| Ok((name.clone(), from_serde(item, depth, max_depth)?)));
            JsonValue::Object(members.collect::<Result<_, FingerprintError>>()?)
        }
    })
}

/// Compares two strings as sequences of UTF-16 code units, the member order of RFC 8785.
///
/// This differs from `str`'s own (UTF-8 byte, i.e. code point) order only when a character
/// in U+E000..=U+FFFF meets one above U+FFFF at the first difference: `"\u{FB33}"` sorts
/// after `"\u{1F600}"` here (0xFB33 > 0xD83D), before it in code point order.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Parses strict JSON (see the module documentation) with the default limits.
pub fn parse(input: &[u8]) -> Result<JsonValue, FingerprintError> {
    parse_with(input, &JcsOptions::new())
}

/// Parses strict JSON (see the module documentation) within `options`' limits. The size
/// limit is checked before anything is parsed.
pub fn parse_with(input: &[u8], options: &JcsOptions) -> Result<JsonValue, FingerprintError> {
    if input.len() > options.max_bytes {
        return Err(FingerprintError::TooLarge {
            limit: options.max_bytes,
            actual: input.len(),
        });
    }
    let text = std::str::from_utf8(input)
        .map_err(|e| not_json(input, e.valid_up_to(), "invalid UTF-8"))?;
    let mut parser = Parser {
        text,
        bytes: input,
        pos: 0,
        max_depth: options.max_depth,
    };
    parser.skip_whitespace();
    let value = parser.value(0)?;
    parser.skip_whitespace();
    if parser.pos != input.len() {
        return Err(parser.error("unexpected data after the JSON value"));
    }
    Ok(value)
}

/// Canonicalises raw JSON bytes with the default limits.
pub fn canonicalize(input: &[u8]) -> Result<Vec<u8>, FingerprintError> {
    canonicalize_with(input, &JcsOptions::new())
}

/// Canonicalises raw JSON bytes: [`parse_with`], then [`canonicalize_value_with`].
pub fn canonicalize_with(input: &[u8], options: &JcsOptions) -> Result<Vec<u8>, FingerprintError> {
    canonicalize_value_with(&parse_with(input, options)?, options)
}

/// Canonicalises an already-parsed value with the default limits.
pub fn canonicalize_value(value: &JsonValue) -> Result<Vec<u8>, FingerprintError> {
    canonicalize_value_with(value, &JcsOptions::new())
}

/// Canonicalises an already-parsed value: the RFC 8785 UTF-8 bytes of `value`.
///
/// Fails on NaN or infinite numbers, duplicate member names, nesting deeper than the depth
/// limit, or an output longer than the size limit.
pub fn canonicalize_value_with(
    value: &JsonValue,
    options: &JcsOptions,
) -> Result<Vec<u8>, FingerprintError> {
    let mut out = Vec::new();
    write_value(value, &mut out, 0, options.max_depth)?;
    check_size(&out, options)?;
    Ok(out)
}

/// Fails if a canonical output is longer than the size limit.
pub(crate) fn check_size(out: &[u8], options: &JcsOptions) -> Result<(), FingerprintError> {
    if out.len() > options.max_bytes {
        return Err(FingerprintError::TooLarge {
            limit: options.max_bytes,
            actual: out.len(),
        });
    }
    Ok(())
}

/// One more level of nesting, or [`FingerprintError::TooDeep`].
fn enter(depth: usize, max_depth: usize) -> Result<usize, FingerprintError> {
    if depth >= max_depth {
        return Err(FingerprintError::TooDeep { limit: max_depth });
    }
    Ok(depth + 1)
}

/// Appends the canonical form of `value`, found at nesting `depth`, to `out`.
pub(crate) fn write_value(
    value: &JsonValue,
    out: &mut Vec<u8>,
    depth: usize,
    max_depth: usize,
) -> Result<(), FingerprintError> {
    match value {
        JsonValue::Null => out.extend_from_slice(b"null"),
        JsonValue::Bool(true) => out.extend_from_slice(b"true"),
        JsonValue::Bool(false) => out.extend_from_slice(b"false"),
        JsonValue::Number(n) => write_number(*n, out)?,
        JsonValue::String(s) => write_string(s, out),
        JsonValue::Array(items) => {
            let depth = enter(depth, max_depth)?;
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out, depth, max_depth)?;
            }
            out.push(b']');
        }
        JsonValue::Object(members) => {
            let depth = enter(depth, max_depth)?;
            let mut sorted: Vec<&(String, JsonValue)> = members.iter().collect();
            sorted.sort_by(|a, b| compare_utf16(&a.0, &b.0));
            if let Some(pair) = sorted.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                return Err(FingerprintError::DuplicateMember {
                    name: pair[0].0.clone(),
                });
            }
            out.push(b'{');
            for (i, (name, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(name, out);
                out.push(b':');
                write_value(item, out, depth, max_depth)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Appends a number as ECMAScript's `Number.prototype.toString` writes it.
fn write_number(n: f64, out: &mut Vec<u8>) -> Result<(), FingerprintError> {
    if !n.is_finite() {
        return Err(FingerprintError::NonFiniteNumber);
    }
    if n == 0.0 {
        // Both zeros: ECMAScript writes -0 as "0".
        out.push(b'0');
    } else {
        out.extend_from_slice(ryu_js::Buffer::new().format_finite(n).as_bytes());
    }
    Ok(())
}

/// Appends a string literal with exactly the escapes RFC 8785 prescribes.
pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0a => b"\\n",
            0x0c => b"\\f",
            0x0d => b"\\r",
            0x00..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ],
            _ => continue,
        };
        out.extend_from_slice(&bytes[run_start..i]);
        out.extend_from_slice(escape);
        run_start = i + 1;
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// A [`FingerprintError::NotJson`] for the byte at `pos`.
fn not_json(input: &[u8], pos: usize, message: &str) -> FingerprintError {
    let (line, column) = line_column(input, pos);
    FingerprintError::NotJson {
        line,
        column,
        message: message.to_owned(),
    }
}

/// 1-based line and byte column of the byte at `pos` (or of the end of input).
fn line_column(input: &[u8], pos: usize) -> (usize, usize) {
    let before = &input[..pos.min(input.len())];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    (line, before.len() - line_start + 1)
}

/// A strict recursive-descent JSON parser over input already checked to be UTF-8.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn error(&self, message: &str) -> FingerprintError {
        not_json(self.bytes, self.pos, message)
    }

    fn error_at(&self, pos: usize, message: &str) -> FingerprintError {
        not_json(self.bytes, pos, message)
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.pos += 1;
        }
        found
    }

    /// Parses the value starting at the current position, which is enclosed by `depth`
    /// arrays and objects.
    fn value(&mut self, depth: usize) -> Result<JsonValue, FingerprintError> {
        match self.peek() {
            None => Err(self.error("unexpected end of input, expected a value")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(JsonValue::String),
            Some(b't') => self.literal("true", JsonValue::Bool(true)),
            Some(b'f') => self.literal("false", JsonValue::Bool(false)),
            Some(b'n') => self.literal("null", JsonValue::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a value")),
        }
    }

    fn literal(&mut self, word: &str, value: JsonValue) -> Result<JsonValue, FingerprintError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a value"))
        }
    }

    fn array(&mut self, depth: usize) -> Result<JsonValue, FingerprintError> {
        let depth = enter(depth, self.max_depth)?;
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.eat(b']') {
            return Ok(JsonValue::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth)?);
            self.skip_whitespace();
            if self.eat(b',') {
                continue;
            }
            if self.eat(b']') {
                return Ok(JsonValue::Array(items));
            }
            return Err(self.error("expected ',' or ']' in array"));
        }
    }

    fn object(&mut self, depth: usize) -> Result<JsonValue, FingerprintError> {
        let depth = enter(depth, self.max_depth)?;
        self.pos += 1; // '{'
        let mut members = Vec::new();
        self.skip_whitespace();
        if !self.eat(b'}') {
            loop {
                self.skip_whitespace();
                if self.peek() != Some(b'"') {
                    return Err(self.error("expected a string as object member name"));
                }
                let name = self.string()?;
                self.skip_whitespace();
                if !self.eat(b':') {
                    return Err(self.error("expected ':' after object member name"));
                }
                self.skip_whitespace();
                let value = self.value(depth)?;
                members.push((name, value));
                self.skip_whitespace();
                if self.eat(b',') {
                    continue;
                }
                if self.eat(b'}') {
                    break;
                }
                return Err(self.error("expected ',' or '}' in object"));
            }
        }
        let mut seen = HashSet::with_capacity(members.len());
        if let Some((name, _)) = members.iter().find(|(name, _)| !seen.insert(name.as_str())) {
            return Err(FingerprintError::DuplicateMember { name: name.clone() });
        }
        Ok(JsonValue::Object(members))
    }

    fn string(&mut self) -> Result<String, FingerprintError> {
        let open = self.pos;
        self.pos += 1; // '"'
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The run ends at an ASCII byte or at the end, so on a character boundary.
            out.push_str(self.text.get(run_start..self.pos).unwrap_or_default());
            match self.peek() {
                None => return Err(self.error_at(open, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => out.push(self.escape()?),
                Some(_) => return Err(self.error("unescaped control character in string")),
            }
        }
    }

    /// Parses the escape sequence at the current position (a backslash).
    fn escape(&mut self) -> Result<char, FingerprintError> {
        let start = self.pos;
        self.pos += 1; // '\'
        let Some(kind) = self.peek() else {
            return Err(self.error("unterminated string"));
        };
        self.pos += 1;
        Ok(match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                let code = match unit {
                    0xd800..=0xdbff => {
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return Err(self.lone_surrogate(start));
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xdc00..=0xdfff).contains(&low) {
                            return Err(self.lone_surrogate(start));
                        }
                        0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00)
                    }
                    0xdc00..=0xdfff => return Err(self.lone_surrogate(start)),
                    _ => unit,
                };
                char::from_u32(code).ok_or_else(|| self.lone_surrogate(start))?
            }
            _ => return Err(self.error_at(start, "invalid escape sequence")),
        })
    }

    fn lone_surrogate(&self, pos: usize) -> FingerprintError {
        let (line, column) = line_column(self.bytes, pos);
        FingerprintError::LoneSurrogate { line, column }
    }

    /// Parses the four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u32, FingerprintError> {
        let mut unit = 0;
        for _ in 0..4 {
            let digit = self.peek().and_then(|b| char::from(b).to_digit(16));
            let Some(digit) = digit else {
                return Err(self.error("expected 4 hex digits in \\u escape"));
            };
            unit = unit * 16 + digit;
            self.pos += 1;
        }
        Ok(unit)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<JsonValue, FingerprintError> {
        let start = self.pos;
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.error("leading zeros are not allowed in numbers"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("expected a digit")),
        }
        if self.eat(b'.') && self.digits() == 0 {
            return Err(self.error("expected a digit after the decimal point"));
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        let literal = self.text.get(start..self.pos).unwrap_or_default();
        // Rust's float parsing is correctly rounded for any length of input, and accepts
        // every literal of the JSON grammar checked above.
        match literal.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(JsonValue::Number(n)),
            Ok(_) => {
                let (line, column) = line_column(self.bytes, start);
                Err(FingerprintError::NumberOutOfRange { line, column })
            }
            Err(_) => Err(self.error_at(start, "invalid number")),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(input: &str) -> String {
        String::from_utf8(canonicalize(input.as_bytes()).unwrap()).unwrap()
    }

    fn canon_err(input: &str) -> FingerprintError {
        canonicalize(input.as_bytes()).unwrap_err()
    }

    fn number(bits: u64) -> String {
        let out = canonicalize_value(&JsonValue::Number(f64::from_bits(bits))).unwrap();
        String::from_utf8(out).unwrap()
    }

    // RFC 8785, section 3.2.2: the sample input and its canonical form.
    #[test]
    fn rfc8785_section_3_2_2_sample() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
        assert_eq!(canon(input), expected);
        // Section 3.2.4 gives the same output as UTF-8 bytes; check the non-ASCII part.
        let bytes = canonicalize(input.as_bytes()).unwrap();
        let at = bytes
            .windows(3)
            .position(|w| w == [0xe2, 0x82, 0xac])
            .unwrap();
        assert_eq!(&bytes[at..at + 10], b"\xe2\x82\xac$\\u000f");
    }

    // RFC 8785, section 3.2.3: member sorting by UTF-16 code units.
    #[test]
    fn rfc8785_section_3_2_3_sorting() {
        let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
        let expected = concat!(
            r#"{"\r":"Carriage Return","1":"One","#,
            "\"\u{80}\":\"Control\",",
            "\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",",
            "\"\u{20ac}\":\"Euro Sign\",",
            "\"\u{1f600}\":\"Emoji: Grinning Face\",",
            "\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        );
        assert_eq!(canon(input), expected);
    }

    #[test]
    fn utf16_order_differs_from_utf8_order() {
        // U+FB33 < U+1F600 as code points and as UTF-8, but 0xFB33 > 0xD83D in UTF-16.
        assert!("\u{fb33}" < "\u{1f600}");
        assert_eq!(compare_utf16("\u{fb33}", "\u{1f600}"), Ordering::Greater);
        assert_eq!(compare_utf16("\u{e000}", "\u{10000}"), Ordering::Greater);
        assert!("\u{e000}" < "\u{10000}");
        assert_eq!(compare_utf16("a", "ab"), Ordering::Less);
        assert_eq!(compare_utf16("", ""), Ordering::Equal);
        let value = JsonValue::Object(vec![
            ("\u{e000}".into(), JsonValue::Null),
            ("\u{10000}".into(), JsonValue::Null),
        ]);
        let out = String::from_utf8(canonicalize_value(&value).unwrap()).unwrap();
        assert_eq!(out, "{\"\u{10000}\":null,\"\u{e000}\":null}");
    }

    // RFC 8785, Appendix B: IEEE-754 bit patterns and their ECMAScript serialisation.
    #[test]
    fn rfc8785_appendix_b_numbers() {
        let table: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, expected) in table {
            assert_eq!(number(bits), expected, "bits {bits:016x}");
            // The same number written as text canonicalises the same way.
            assert_eq!(canon(expected), expected, "text {expected}");
        }
        // The two non-finite patterns of the table cannot be serialised.
        for bits in [
            0x7fffffffffffffff_u64,
            0x7ff0000000000000,
            0xfff0000000000000,
        ] {
            let value = JsonValue::Number(f64::from_bits(bits));
            assert_eq!(
                canonicalize_value(&value),
                Err(FingerprintError::NonFiniteNumber)
            );
        }
    }

    #[test]
    fn number_literals() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0e-5", "0"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("9007199254740992", "9007199254740992"),
            ("9007199254740993", "9007199254740992"),
            ("-9007199254740993", "-9007199254740992"),
            ("295147905179352825856", "295147905179352830000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("333333333.3333333", "333333333.3333333"),
            ("4.50", "4.5"),
            ("1E30", "1e+30"),
            ("2e-3", "0.002"),
            ("1.0", "1"),
            ("100E-2", "1"),
            ("123456789012345678901234567890", "1.2345678901234568e+29"),
            ("1e-400", "0"),
            ("-1.5E+2", "-150"),
        ];
        for (input, expected) in cases {
            assert_eq!(canon(input), expected, "input {input}");
        }
    }

    #[test]
    fn numbers_out_of_range_are_rejected() {
        for input in ["1e400", "-1e400", "1.8e308", "[\n 1, 2e999999999999999999]"] {
            assert!(
                matches!(canon_err(input), FingerprintError::NumberOutOfRange { .. }),
                "{input}"
            );
        }
        assert_eq!(
            canon_err("[\n 1, 2e999]"),
            FingerprintError::NumberOutOfRange { line: 2, column: 5 }
        );
    }

    #[test]
    fn strings_escape_exactly_as_jcs() {
        let input = r#""\u0000\u0001\b\t\n\u000b\f\r\u001f \"\\\/\u007f\u0080\u2028\u2029é😀""#;
        let expected = "\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f \\\"\\\\/\u{7f}\u{80}\u{2028}\u{2029}é😀\"";
        assert_eq!(canon(input), expected);
        // Literal non-ASCII input stays literal.
        assert_eq!(canon("\"héllo wörld €\""), "\"héllo wörld €\"");
        // Escaped and literal forms of one string are one canonical string.
        assert_eq!(canon(r#""\u00e9\u0041""#), canon("\"éA\""));
        // No Unicode normalisation.
        assert_eq!(canon(r#""\u1e0d\u0307""#), "\"\u{1e0d}\u{307}\"");
        assert_ne!(canon(r#""\u1e0d\u0307""#), canon(r#""\u1e0c\u0323""#));
    }

    #[test]
    fn structures_and_whitespace() {
        let input = "{\n  \"1\": {\"f\": {\"f\": \"hi\",\"F\": 5} ,\"\\n\": 56.0},\n  \"10\": { },\n  \"\": \"empty\",\n  \"a\": { },\n  \"111\": [ { } ],\n  \"A\": { }\n}";
        let expected =
            r#"{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}"#;
        assert_eq!(canon(input), expected);
        assert_eq!(
            canon(" \t\r\n[ 1 , [ ] , { } , \"\" ]\n"),
            r#"[1,[],{},""]"#
        );
        assert_eq!(canon("true"), "true");
        assert_eq!(canon(" null "), "null");
        assert_eq!(canon("\"\""), "\"\"");
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = canon(r#"{"b":[1,{"y":2,"x":1}],"a":"z"}"#);
        let b = canon("{ \"a\" : \"z\" ,\n\t\"b\" : [ 1.0 , { \"x\" : 1e0 , \"y\" : 2 } ] }");
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":"z","b":[1,{"x":1,"y":2}]}"#);
        // Array order does matter.
        assert_ne!(canon("[1,2]"), canon("[2,1]"));
    }

    #[test]
    fn duplicate_members_are_rejected() {
        let dup = |name: &str| FingerprintError::DuplicateMember { name: name.into() };
        assert_eq!(canon_err(r#"{"a":1,"a":1}"#), dup("a"));
        assert_eq!(canon_err(r#"{"a":1,"b":2,"\u0061":3}"#), dup("a"));
        assert_eq!(canon_err(r#"[{"x":{"k":1,"k":2}}]"#), dup("k"));
        // Same names in different objects are fine.
        assert_eq!(
            canon(r#"{"a":{"a":1},"b":{"a":2}}"#),
            r#"{"a":{"a":1},"b":{"a":2}}"#
        );
        // A hand-built value with duplicates cannot be canonicalised either.
        let value = JsonValue::Object(vec![
            ("z".into(), JsonValue::Null),
            ("q".into(), JsonValue::Null),
            ("z".into(), JsonValue::Bool(true)),
        ]);
        assert_eq!(canonicalize_value(&value), Err(dup("z")));
    }

    #[test]
    fn size_limit_is_checked_before_parsing() {
        let options = JcsOptions::new().with_max_bytes(10);
        // Not even JSON, but too large: the size is what is reported.
        assert_eq!(
            canonicalize_with(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", &options),
            Err(FingerprintError::TooLarge {
                limit: 10,
                actual: 11
            })
        );
        assert_eq!(
            canonicalize_with(b"[1,2,3,4] ", &options).unwrap(),
            b"[1,2,3,4]"
        );
        // The canonical output is bounded too: 4 bytes of input, 21 of output.
        assert_eq!(
            canonicalize_with(b"1e20", &options),
            Err(FingerprintError::TooLarge {
                limit: 10,
                actual: 21
            })
        );
        // The default is 1 MiB.
        let mut big = vec![b' '; DEFAULT_MAX_BYTES];
        big[0] = b'0';
        assert_eq!(canonicalize(&big).unwrap(), b"0");
        big.push(b' ');
        assert_eq!(
            canonicalize(&big),
            Err(FingerprintError::TooLarge {
                limit: DEFAULT_MAX_BYTES,
                actual: DEFAULT_MAX_BYTES + 1
            })
        );
    }

    #[test]
    fn nesting_depth_is_bounded() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(canon(&nested(DEFAULT_MAX_DEPTH)), nested(DEFAULT_MAX_DEPTH));
        let too_deep = FingerprintError::TooDeep {
            limit: DEFAULT_MAX_DEPTH,
        };
        assert_eq!(canon_err(&nested(DEFAULT_MAX_DEPTH + 1)), too_deep);
        let objects = format!("{}1{}", r#"{"a":"#.repeat(129), "}".repeat(129));
        assert_eq!(canon_err(&objects), too_deep);
        // A hostile input far deeper than any stack: an error, not a crash.
        assert_eq!(canon_err(&"[".repeat(DEFAULT_MAX_BYTES)), too_deep);
        // Depth limits are configurable up to the ceiling.
        let options = JcsOptions::new().with_max_depth(usize::MAX);
        assert_eq!(options.max_depth(), MAX_DEPTH_CEILING);
        let deepest = nested(MAX_DEPTH_CEILING);
        assert_eq!(
            canonicalize_with(deepest.as_bytes(), &options).unwrap(),
            deepest.as_bytes()
        );
        let options = JcsOptions::new().with_max_depth(1);
        assert_eq!(canonicalize_with(b"[1]", &options).unwrap(), b"[1]");
        assert_eq!(
            canonicalize_with(b"[[1]]", &options),
            Err(FingerprintError::TooDeep { limit: 1 })
        );
        // Hand-built values are bounded too.
        let mut value = JsonValue::Null;
        for _ in 0..=DEFAULT_MAX_DEPTH {
            value = JsonValue::Array(vec![value]);
        }
        assert_eq!(canonicalize_value(&value), Err(too_deep));
    }

    #[test]
    fn invalid_json_is_rejected_with_a_position() {
        let cases: &[(&[u8], usize, usize)] = &[
            (b"", 1, 1),
            (b"   ", 1, 4),
            (b"{", 1, 2),
            (b"[1,]", 1, 4),
            (b"{\"a\":1,}", 1, 8),
            (b"{'a':1}", 1, 2),
            (b"{\"a\" 1}", 1, 6),
            (b"{1:1}", 1, 2),
            (b"[1 2]", 1, 4),
            (b"01", 1, 2),
            (b"-", 1, 2),
            (b"1.", 1, 3),
            (b".5", 1, 1),
            (b"1e", 1, 3),
            (b"+1", 1, 1),
            (b"0x10", 1, 2),
            (b"NaN", 1, 1),
            (b"Infinity", 1, 1),
            (b"tru", 1, 1),
            (b"nul", 1, 1),
            (b"True", 1, 1),
            (b"\"abc", 1, 1),
            (b"\"a\tb\"", 1, 3),
            (b"\"\\x\"", 1, 2),
            (b"\"\\u12g4\"", 1, 6),
            (b"\"\\", 1, 3),
            (b"1 2", 1, 3),
            (b"{}\n\n  x", 3, 3),
            (b"[1,\n2,\n\xc3(]", 3, 1),
            (b"\xef\xbb\xbf{}", 1, 1),
            (b"\x00", 1, 1),
            (b"[1]/*c*/", 1, 4),
            (b"\"\xff\"", 1, 2),
            (b"\"\xed\xa0\x80\"", 1, 2), // a surrogate encoded in UTF-8 (CESU)
            (b"\x0c1", 1, 1),            // form feed is not JSON whitespace
        ];
        for &(input, line, column) in cases {
            match canonicalize(input) {
                Err(FingerprintError::NotJson {
                    line: l, column: c, ..
                }) => {
                    assert_eq!(
                        (l, c),
                        (line, column),
                        "{:?}",
                        String::from_utf8_lossy(input)
                    );
                }
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
            }
        }
    }

    #[test]
    fn lone_surrogates_are_rejected() {
        for input in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800x""#,
        ] {
            assert_eq!(
                canon_err(input),
                FingerprintError::LoneSurrogate { line: 1, column: 2 },
                "{input}"
            );
        }
        assert_eq!(canon(r#""\uD83D\uDE00""#), "\"😀\"");
        // Non-characters are accepted.
        assert_eq!(canon(r#""\uffff""#), "\"\u{ffff}\"");
    }

    #[test]
    fn large_integers_become_doubles_in_values_too() {
        let value: serde_json::Value = serde_json::json!({
            "big": 9007199254740993_u64,
            "neg": -9007199254740993_i64,
            "max": u64::MAX,
            "f": 0.1,
        });
        let value = JsonValue::try_from(&value).unwrap();
        let out = String::from_utf8(canonicalize_value(&value).unwrap()).unwrap();
        assert_eq!(
            out,
            r#"{"big":9007199254740992,"f":0.1,"max":18446744073709552000,"neg":-9007199254740992}"#
        );
        // Same as parsing the text directly.
        let text = r#"{"neg":-9007199254740993,"max":18446744073709551615,"f":0.1,"big":9007199254740993}"#;
        assert_eq!(canon(text), out);
    }

    #[test]
    fn serde_json_conversion_is_depth_bounded() {
        let mut value = serde_json::Value::Null;
        for _ in 0..200 {
            value = serde_json::Value::Array(vec![value]);
        }
        assert_eq!(
            JsonValue::try_from(&value),
            Err(FingerprintError::TooDeep {
                limit: DEFAULT_MAX_DEPTH
            })
        );
        let options = JcsOptions::new().with_max_depth(200);
        assert!(JsonValue::from_serde_json(&value, &options).is_ok());
    }

    // ---- Property tests -------------------------------------------------------------

    fn arb_number() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |n| n.is_finite()),
            any::<i64>().prop_map(|n| n as f64),
            (-1000i32..1000).prop_map(f64::from),
            (-1000i32..1000, 0u32..6).prop_map(|(n, p)| f64::from(n) / 10f64.powi(p as i32)),
        ]
    }

    fn arb_string() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[a-c\"\\\\/\u{0}-\u{1f}\u{7f}\u{80}\u{e000}\u{ffff}\u{10000}\u{1f600}]{0,6}",
        ]
    }

    pub(crate) fn arb_value() -> impl Strategy<Value = JsonValue> {
        let leaf = prop_oneof![
            Just(JsonValue::Null),
            any::<bool>().prop_map(JsonValue::Bool),
            arb_number().prop_map(JsonValue::Number),
            arb_string().prop_map(JsonValue::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(JsonValue::Array),
                prop::collection::btree_map(arb_string(), inner, 0..6)
                    .prop_map(|members| JsonValue::Object(members.into_iter().collect())),
            ]
        })
    }

    /// A tiny deterministic generator for shuffling and for choosing spellings.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Writes `value` as valid but non-canonical JSON: members shuffled, random whitespace,
    /// random escapes, numbers in assorted notations.
    pub(crate) fn write_noisy(value: &JsonValue, rng: &mut Rng, out: &mut String) {
        const SPACE: [&str; 5] = ["", " ", "\n", "\t", "\r\n  "];
        let ws = |rng: &mut Rng, out: &mut String| out.push_str(SPACE[rng.below(SPACE.len())]);
        match value {
            JsonValue::Null => out.push_str("null"),
            JsonValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JsonValue::Number(n) => {
                let text = match rng.below(4) {
                    0 => format!("{n}"),
                    1 => format!("{n:e}"),
                    2 => format!("{n:E}"),
                    _ if n.fract() == 0.0 && n.abs() < 1e15 => format!("{n}.000"),
                    _ => format!("{n:?}"),
                };
                out.push_str(&text);
            }
            JsonValue::String(s) => write_noisy_string(s, rng, out),
            JsonValue::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    ws(rng, out);
                    write_noisy(item, rng, out);
                    ws(rng, out);
                }
                out.push(']');
            }
            JsonValue::Object(members) => {
                let mut order: Vec<usize> = (0..members.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.below(i + 1));
                }
                out.push('{');
                for (i, &index) in order.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    ws(rng, out);
                    write_noisy_string(&members[index].0, rng, out);
                    ws(rng, out);
                    out.push(':');
                    ws(rng, out);
                    write_noisy(&members[index].1, rng, out);
                }
                ws(rng, out);
                out.push('}');
            }
        }
    }

    fn write_noisy_string(s: &str, rng: &mut Rng, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let must_escape = c == '"' || c == '\\' || c < ' ';
            if !must_escape && rng.below(3) > 0 {
                out.push(c);
            } else if c == '/' && rng.below(2) == 0 {
                out.push_str("\\/");
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let hex = format!("{unit:04x}");
                    let hex = if rng.below(2) == 0 {
                        hex
                    } else {
                        hex.to_uppercase()
                    };
                    out.push_str("\\u");
                    out.push_str(&hex);
                }
            }
        }
        out.push('"');
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = canonicalize(&input);
        }

        #[test]
        fn json_like_bytes_never_panic_and_canonical_output_is_a_fixed_point(
            input in "[\\[\\]{}\",:0-9eE.+\\-\\\\ubfnrt/ \n\u{e9}\u{1f600}ad-fA-F]{0,64}"
        ) {
            if let Ok(out) = canonicalize(input.as_bytes()) {
                prop_assert_eq!(canonicalize(&out).unwrap(), out);
            }
        }

        #[test]
        fn canonicalisation_is_idempotent(value in arb_value()) {
            let once = canonicalize_value(&value).unwrap();
            let twice = canonicalize(&once).unwrap();
            prop_assert_eq!(&twice, &once);
            // And the canonical text parses back to the same data (up to the sign of 0).
            let reparsed = parse(&once).unwrap();
            prop_assert_eq!(canonicalize_value(&reparsed).unwrap(), once);
        }

        #[test]
        fn spelling_does_not_change_the_canonical_form(value in arb_value(), seed in 1u64..) {
            let expected = canonicalize_value(&value).unwrap();
            let mut noisy = String::new();
            write_noisy(&value, &mut Rng(seed), &mut noisy);
            prop_assert_eq!(canonicalize(noisy.as_bytes()).unwrap(), expected, "{}", noisy);
        }

        #[test]
        fn numbers_round_trip(n in any::<f64>().prop_filter("finite", |n| n.is_finite())) {
            let text = canonicalize_value(&JsonValue::Number(n)).unwrap();
            let back: f64 = std::str::from_utf8(&text).unwrap().parse().unwrap();
            prop_assert!(back == n, "{} -> {:?}", n, String::from_utf8_lossy(&text));
            prop_assert_eq!(canonicalize(&text).unwrap(), text);
        }

        #[test]
        fn utf16_order_matches_a_reference(a in arb_string(), b in arb_string()) {
            // Reference: a character's UTF-16 units, computed by hand, as its sort key.
            let key = |c: char| match u32::from(c) {
                c @ 0x10000.. => (0xd800 + ((c - 0x10000) >> 10), 0xdc00 + (c & 0x3ff)),
                c => (c, 0),
            };
            let expected = a.chars().map(key).cmp(b.chars().map(key));
            prop_assert_eq!(compare_utf16(&a, &b), expected);
        }
    }
}
