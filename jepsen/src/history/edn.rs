//! EDN reading and writing.
//!
//! Jepsen stores histories as EDN, one operation map per line. The checkers must also accept
//! histories written by other tools, so the reader handles the whole of EDN that appears in
//! practice rather than the subset this project writes: maps, vectors, lists, sets, keywords,
//! symbols, strings with escapes, characters, integers (with `N`), floats (with `M`, `##Inf`,
//! `##NaN`), ratios (read as floats), `nil`, booleans, tagged elements (`#inst`, `#uuid`, record
//! tags such as `#jepsen.history.Op{...}`, kept as [`Value::Tagged`]), `#_` discards, `;` comments
//! and commas as whitespace. Nesting is bounded so hostile input cannot overflow the stack.

use std::fmt;

use super::error::EdnError;
use super::value::Value;

/// Deepest nesting of collections the reader accepts.
const MAX_DEPTH: usize = 256;

/// Parses every top-level form of `text`.
pub fn parse_all(text: &str) -> Result<Vec<Value>, EdnError> {
    let mut reader = Reader::new(text);
    let mut forms = Vec::new();
    while let Some(v) = reader.next_form(0)? {
        forms.push(v);
    }
    Ok(forms)
}

/// Parses exactly one form (surrounding whitespace and comments allowed).
pub fn parse_one(text: &str) -> Result<Value, EdnError> {
    let mut reader = Reader::new(text);
    let value = reader
        .next_form(0)?
        .ok_or_else(|| reader.error("expected a value, found end of input"))?;
    if reader.next_form(0)?.is_some() {
        return Err(reader.error("unexpected text after the value"));
    }
    Ok(value)
}

/// A cursor over EDN text that tracks line and column for error messages.
struct Reader<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    line_start: usize,
}

/// What the reader found at the current position.
enum Item {
    Value(Value),
    /// A closing delimiter (`)`, `]` or `}`).
    Close(char),
    /// A `#_` discarded form: read and ignored.
    Discarded,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader {
            text,
            pos: 0,
            line: 1,
            line_start: 0,
        }
    }

    fn error(&self, message: impl Into<String>) -> EdnError {
        EdnError {
            line: self.line,
            column: self.text[self.line_start..self.pos].chars().count() + 1,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        self.text[self.pos..].chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.line_start = self.pos;
        }
        Some(c)
    }

    fn skip_blank(&mut self) {
        while let Some(c) = self.peek() {
            if c == ';' {
                while !matches!(self.peek(), None | Some('\n')) {
                    self.bump();
                }
            } else if c.is_whitespace() || c == ',' {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// The next value, or `None` at end of input. A stray closing delimiter is an error.
    fn next_form(&mut self, depth: usize) -> Result<Option<Value>, EdnError> {
        loop {
            match self.next_item(depth)? {
                None => return Ok(None),
                Some(Item::Value(v)) => return Ok(Some(v)),
                Some(Item::Discarded) => continue,
                Some(Item::Close(c)) => return Err(self.error(format!("unmatched '{c}'"))),
            }
        }
    }

    fn next_item(&mut self, depth: usize) -> Result<Option<Item>, EdnError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.skip_blank();
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        let item = match c {
            ')' | ']' | '}' => {
                self.bump();
                Item::Close(c)
            }
            '(' => Item::Value(Value::List(self.read_seq(')', depth)?)),
            '[' => Item::Value(Value::Vector(self.read_seq(']', depth)?)),
            '{' => Item::Value(self.read_map(depth)?),
            '"' => Item::Value(Value::Str(self.read_string()?)),
            '\\' => Item::Value(Value::Char(self.read_char()?)),
            '#' => self.read_dispatch(depth)?,
            ':' => {
                self.bump();
                let token = self.read_token();
                if token.is_empty() {
                    return Err(self.error("empty keyword"));
                }
                Item::Value(Value::Keyword(token.to_string()))
            }
            _ => Item::Value(self.read_atom()?),
        };
        Ok(Some(item))
    }

    fn read_seq(&mut self, close: char, depth: usize) -> Result<Vec<Value>, EdnError> {
        self.bump();
        let mut items = Vec::new();
        loop {
            match self.next_item(depth + 1)? {
                None => return Err(self.error(format!("missing '{close}' before end of input"))),
                Some(Item::Close(c)) if c == close => return Ok(items),
                Some(Item::Close(c)) => {
                    return Err(self.error(format!("expected '{close}', found '{c}'")))
                }
                Some(Item::Value(v)) => items.push(v),
                Some(Item::Discarded) => {}
            }
        }
    }

    fn read_map(&mut self, depth: usize) -> Result<Value, EdnError> {
        let items = self.read_seq('}', depth)?;
        if items.len() % 2 != 0 {
            return Err(self.error("map literal has an odd number of forms"));
        }
        let mut it = items.into_iter();
        let mut map = std::collections::BTreeMap::new();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            map.insert(k, v);
        }
        Ok(Value::Map(map))
    }

    fn read_dispatch(&mut self, depth: usize) -> Result<Item, EdnError> {
        self.bump();
        match self.peek() {
            Some('{') => {
                let items = self.read_seq('}', depth)?;
                Ok(Item::Value(Value::Set(items.into_iter().collect())))
            }
            Some('_') => {
                self.bump();
                self.next_form(depth + 1)?
                    .ok_or_else(|| self.error("nothing to discard after #_"))?;
                Ok(Item::Discarded)
            }
            Some('#') => {
                self.bump();
                self.read_symbolic_float().map(Item::Value)
            }
            Some(':') => {
                // Namespaced map `#:ns{...}`: the namespace only qualifies keys; keep the map.
                self.bump();
                self.read_token();
                self.skip_blank();
                match self.peek() {
                    Some('{') => self.read_map(depth).map(Item::Value),
                    _ => Err(self.error("expected a map after #:ns")),
                }
            }
            _ => self.read_tagged(depth),
        }
    }

    fn read_symbolic_float(&mut self) -> Result<Value, EdnError> {
        match self.read_token() {
            "Inf" => Ok(Value::Float(f64::INFINITY)),
            "-Inf" => Ok(Value::Float(f64::NEG_INFINITY)),
            "NaN" => Ok(Value::Float(f64::NAN)),
            other => Err(self.error(format!("unknown symbolic value ##{other}"))),
        }
    }

    fn read_tagged(&mut self, depth: usize) -> Result<Item, EdnError> {
        let tag = self.read_token().to_string();
        if tag.is_empty() {
            return Err(self.error("expected a tag after '#'"));
        }
        let inner = self
            .next_form(depth + 1)?
            .ok_or_else(|| self.error(format!("missing value after tag #{tag}")))?;
        Ok(Item::Value(Value::Tagged(tag, Box::new(inner))))
    }

    fn read_token(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || matches!(c, ',' | '(' | ')' | '[' | ']' | '{' | '}' | '"' | ';')
            {
                break;
            }
            self.bump();
        }
        &self.text[start..self.pos]
    }

    fn read_atom(&mut self) -> Result<Value, EdnError> {
        let first = self.peek();
        let second = self.peek2();
        let token = self.read_token();
        let numeric = match (first, second) {
            (Some(c), _) if c.is_ascii_digit() => true,
            (Some('+' | '-'), Some(d)) => d.is_ascii_digit(),
            _ => false,
        };
        if numeric {
            return parse_number(token).ok_or_else(|| self.error(format!("bad number {token}")));
        }
        Ok(match token {
            "nil" => Value::Nil,
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "" => return Err(self.error("unexpected character")),
            other => Value::Symbol(other.to_string()),
        })
    }

    fn read_string(&mut self) -> Result<String, EdnError> {
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err(self.error("unterminated string")),
                Some('"') => return Ok(out),
                Some('\\') => out.push(self.read_string_escape()?),
                Some(c) => out.push(c),
            }
        }
    }

    fn read_string_escape(&mut self) -> Result<char, EdnError> {
        let c = self
            .bump()
            .ok_or_else(|| self.error("unterminated escape"))?;
        Ok(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            '0' => '\0',
            '"' | '\\' | '\'' | '/' => c,
            'u' => self.read_unicode_escape()?,
            other => return Err(self.error(format!("unknown string escape \\{other}"))),
        })
    }

    fn read_hex4(&mut self) -> Result<u32, EdnError> {
        let start = self.pos;
        for _ in 0..4 {
            self.bump();
        }
        let digits = self.text.get(start..self.pos).unwrap_or("");
        u32::from_str_radix(digits, 16).map_err(|_| self.error("bad \\u escape"))
    }

    /// A `\uXXXX` escape, combining a UTF-16 surrogate pair when one follows.
    fn read_unicode_escape(&mut self) -> Result<char, EdnError> {
        let high = self.read_hex4()?;
        if (0xD800..0xDC00).contains(&high) && self.text[self.pos..].starts_with("\\u") {
            self.bump();
            self.bump();
            let low = self.read_hex4()?;
            let code = 0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
            return char::from_u32(code).ok_or_else(|| self.error("bad surrogate pair"));
        }
        Ok(char::from_u32(high).unwrap_or('\u{FFFD}'))
    }

    fn read_char(&mut self) -> Result<char, EdnError> {
        self.bump();
        let first = self
            .bump()
            .ok_or_else(|| self.error("missing character after '\\'"))?;
        // A one-character literal such as `\(` or `\a`, unless a name follows (`\newline`).
        let rest = self.read_token();
        if rest.is_empty() {
            return Ok(first);
        }
        let name = format!("{first}{rest}");
        match name.as_str() {
            "newline" => Ok('\n'),
            "space" => Ok(' '),
            "tab" => Ok('\t'),
            "return" => Ok('\r'),
            "backspace" => Ok('\u{8}'),
            "formfeed" => Ok('\u{c}'),
            n if n.starts_with('u') && n.len() == 5 => u32::from_str_radix(&n[1..], 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| self.error(format!("bad character \\{n}"))),
            n => Err(self.error(format!("unknown character \\{n}"))),
        }
    }
}

/// Parses an EDN number token: integers (`N` suffix, overflow kept as [`Value::BigInt`]),
/// floats (`M` suffix), ratios (`1/3`, read as a float) and `0x` hex integers.
fn parse_number(token: &str) -> Option<Value> {
    if let Some(int) = token.strip_suffix('N') {
        return parse_int(int);
    }
    if let Some(dec) = token.strip_suffix('M') {
        return dec.parse::<f64>().ok().map(Value::Float);
    }
    if let Some((n, d)) = token.split_once('/') {
        let (n, d) = (n.parse::<f64>().ok()?, d.parse::<f64>().ok()?);
        return Some(Value::Float(n / d));
    }
    if token.contains(['.', 'e', 'E']) && !token.contains(['x', 'X']) {
        return token.parse::<f64>().ok().map(Value::Float);
    }
    parse_int(token)
}

fn parse_int(token: &str) -> Option<Value> {
    let (negative, digits) = match token.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, token.strip_prefix('+').unwrap_or(token)),
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let v = i64::from_str_radix(hex, 16).ok()?;
        return Some(Value::Int(if negative { -v } else { v }));
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let signed = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    Some(
        signed
            .parse::<i64>()
            .map_or(Value::BigInt(signed), Value::Int),
    )
}

/// Writes `value` as EDN text (maps and sets in their canonical order).
pub fn write_value(out: &mut impl fmt::Write, value: &Value) -> fmt::Result {
    match value {
        Value::Nil => out.write_str("nil"),
        Value::Bool(b) => write!(out, "{b}"),
        Value::Int(i) => write!(out, "{i}"),
        Value::BigInt(s) => write!(out, "{s}N"),
        Value::Float(f) => write_float(out, *f),
        Value::Str(s) => write_string(out, s),
        Value::Keyword(k) => write!(out, ":{k}"),
        Value::Symbol(s) => out.write_str(s),
        Value::Char(c) => write_char(out, *c),
        Value::List(items) => write_seq(out, "(", items.iter(), ")"),
        Value::Vector(items) => write_seq(out, "[", items.iter(), "]"),
        Value::Set(items) => write_seq(out, "#{", items.iter(), "}"),
        Value::Map(map) => write_map(out, map.iter()),
        Value::Tagged(tag, inner) => {
            write!(out, "#{tag} ")?;
            write_value(out, inner)
        }
    }
}

/// Writes `{k v, k v}` from key/value pairs in the given order.
pub fn write_map<'v>(
    out: &mut impl fmt::Write,
    pairs: impl Iterator<Item = (&'v Value, &'v Value)>,
) -> fmt::Result {
    out.write_char('{')?;
    for (i, (k, v)) in pairs.enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write_value(out, k)?;
        out.write_char(' ')?;
        write_value(out, v)?;
    }
    out.write_char('}')
}

fn write_seq<'v>(
    out: &mut impl fmt::Write,
    open: &str,
    items: impl Iterator<Item = &'v Value>,
    close: &str,
) -> fmt::Result {
    out.write_str(open)?;
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.write_char(' ')?;
        }
        write_value(out, item)?;
    }
    out.write_str(close)
}

fn write_float(out: &mut impl fmt::Write, f: f64) -> fmt::Result {
    if f.is_nan() {
        out.write_str("##NaN")
    } else if f.is_infinite() {
        out.write_str(if f > 0.0 { "##Inf" } else { "##-Inf" })
    } else {
        // Debug always keeps a '.' or an exponent, so the value reads back as a float.
        write!(out, "{f:?}")
    }
}

/// Writes `s` as an EDN string literal with escapes.
pub fn write_string(out: &mut impl fmt::Write, s: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\t' => out.write_str("\\t")?,
            '\r' => out.write_str("\\r")?,
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

fn write_char(out: &mut impl fmt::Write, c: char) -> fmt::Result {
    match c {
        '\n' => out.write_str("\\newline"),
        ' ' => out.write_str("\\space"),
        '\t' => out.write_str("\\tab"),
        '\r' => out.write_str("\\return"),
        c if c.is_control() => write!(out, "\\u{:04x}", c as u32),
        c => write!(out, "\\{c}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Value {
        parse_one(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn reads_scalars() {
        assert_eq!(one("nil"), Value::Nil);
        assert_eq!(one("true"), Value::Bool(true));
        assert_eq!(one("-42"), Value::Int(-42));
        assert_eq!(one("+7"), Value::Int(7));
        assert_eq!(one("42N"), Value::Int(42));
        assert_eq!(
            one("99999999999999999999"),
            Value::BigInt("99999999999999999999".into())
        );
        assert_eq!(one("1.5"), Value::Float(1.5));
        assert_eq!(one("1e3"), Value::Float(1000.0));
        assert_eq!(one("2.5M"), Value::Float(2.5));
        assert_eq!(one("1/2"), Value::Float(0.5));
        assert_eq!(one("##-Inf"), Value::Float(f64::NEG_INFINITY));
        assert_eq!(one(":taken-over"), Value::kw("taken-over"));
        assert_eq!(one(":a/b"), Value::kw("a/b"));
        assert_eq!(one("foo.bar/baz"), Value::Symbol("foo.bar/baz".into()));
        assert_eq!(one("-"), Value::Symbol("-".into()));
        assert_eq!(one("\\a"), Value::Char('a'));
        assert_eq!(one("\\newline"), Value::Char('\n'));
        assert_eq!(one("\\u0041"), Value::Char('A'));
    }

    #[test]
    fn reads_string_escapes() {
        assert_eq!(
            one(r#""a\"b\\c\nd\te\u00e9\ud83d\ude00""#),
            Value::str("a\"b\\c\nd\te\u{e9}\u{1F600}")
        );
    }

    #[test]
    fn reads_collections_comments_commas_and_discards() {
        let v = one("{:a [1, 2 (3)] ; comment\n :b #{:x :y} #_ :ignored :c #_(1 2) nil}");
        assert_eq!(v.get("a"), Some(&one("[1 2 (3)]")));
        assert_eq!(v.get("b"), Some(&one("#{:y :x}")));
        assert_eq!(v.get("c"), Some(&Value::Nil));
    }

    #[test]
    fn keeps_tagged_values() {
        let v = one(r#"#jepsen.history.Op{:index 0 :id #uuid "abc" :at #inst "2024-01-01"}"#);
        let Value::Tagged(tag, _) = &v else {
            panic!("not tagged: {v}")
        };
        assert_eq!(tag, "jepsen.history.Op");
        assert_eq!(v.get("id").and_then(Value::as_name), Some("abc"));
    }

    #[test]
    fn reads_namespaced_maps_as_maps() {
        assert_eq!(one("#:foo{:a 1}").get("a"), Some(&Value::Int(1)));
    }

    #[test]
    fn reports_positions_of_errors() {
        let err = parse_all("{:a 1}\n{:b \"oops}").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(parse_one("{:a}").is_err());
        assert!(parse_one("[1 2").is_err());
        assert!(parse_one("]").is_err());
        assert!(parse_one("(1 2]").is_err());
    }

    #[test]
    fn rejects_excessive_nesting() {
        let deep = "[".repeat(10_000);
        assert!(parse_one(&deep).is_err());
    }

    #[test]
    fn random_input_never_panics() {
        // A tiny deterministic fuzzer over EDN's significant characters.
        let alphabet: Vec<char> = "{}[]()#_:;,\\\" \n\tanilNM0123456789.-+e/^ux\u{e9}\u{1F600}"
            .chars()
            .collect();
        let mut state = 1u64;
        for _ in 0..20_000 {
            let len = (state % 24) as usize;
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            if let Ok(forms) = parse_all(&text) {
                for v in forms {
                    assert_eq!(parse_one(&v.to_string()).ok(), Some(v.clone()), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn round_trips_through_text() {
        let text =
            r#"{:a [1 -2.5 "s\"q" :k sym \c nil true], :b #{1 2}, :c (1), :d #inst "x", :e ##NaN}"#;
        let v = one(text);
        assert_eq!(one(&v.to_string()), v);
    }
}
