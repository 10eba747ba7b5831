//! A generic EDN value.
//!
//! Histories are read from files this project did not necessarily write (Jepsen's own tools,
//! other harnesses), so operations keep their `:value` as a loosely typed tree instead of a
//! fixed struct: the checkers pick out the fields they understand (`:key`, `:fence`, ...) and
//! ignore the rest. Values are totally ordered (floats by `total_cmp`) so that maps and sets can
//! be canonical `BTreeMap`/`BTreeSet`s: two results compare equal whatever their key order.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One EDN value (JSON values map onto a subset of it).
#[derive(Debug, Clone)]
pub enum Value {
    /// `nil` (JSON `null`).
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// An integer too large for 64 bits, kept as its decimal text (without the `N` suffix).
    BigInt(String),
    /// A floating point number (`1.5`, `1e3`, `1.5M`, `##Inf`, `##NaN`).
    Float(f64),
    /// A string.
    Str(String),
    /// A keyword, stored without the leading colon (`:taken-over` is `Keyword("taken-over")`).
    Keyword(String),
    /// A symbol (`foo`, `ns/name`).
    Symbol(String),
    /// A character literal (`\a`, `\newline`).
    Char(char),
    /// A list `( ... )`.
    List(Vec<Value>),
    /// A vector `[ ... ]`.
    Vector(Vec<Value>),
    /// A set `#{ ... }`.
    Set(BTreeSet<Value>),
    /// A map `{ ... }`.
    Map(BTreeMap<Value, Value>),
    /// A tagged element `#tag value` (for example `#uuid "..."` or `#inst "..."`).
    Tagged(String, Box<Value>),
}

impl Value {
    /// A keyword value; `name` is given without the leading colon.
    pub fn kw(name: &str) -> Self {
        Value::Keyword(name.to_string())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Self {
        Value::Str(s.into())
    }

    /// A map with keyword keys, built from `(name, value)` pairs; `Nil` values are kept.
    pub fn map<'a>(pairs: impl IntoIterator<Item = (&'a str, Value)>) -> Self {
        Value::Map(pairs.into_iter().map(|(k, v)| (Value::kw(k), v)).collect())
    }

    /// The value with any `#tag`s removed (`#uuid "x"` becomes `"x"`).
    pub fn untagged(&self) -> &Value {
        match self {
            Value::Tagged(_, inner) => inner.untagged(),
            other => other,
        }
    }

    /// True for `nil` (also through tags).
    pub fn is_nil(&self) -> bool {
        matches!(self.untagged(), Value::Nil)
    }

    /// The value of field `name` when this is a map: looks up the keyword `:name` first and then
    /// the string `"name"` (JSON objects), so both encodings read the same.
    pub fn get(&self, name: &str) -> Option<&Value> {
        let Value::Map(map) = self.untagged() else {
            return None;
        };
        map.get(&Value::kw(name))
            .or_else(|| map.get(&Value::str(name)))
    }

    /// Like [`Value::get`], but a present `nil` counts as absent.
    pub fn get_some(&self, name: &str) -> Option<&Value> {
        self.get(name).filter(|v| !v.is_nil())
    }

    /// The name of an enum-like value: a keyword, string or symbol (through tags).
    /// Histories written as JSON carry keywords as strings; this reads both.
    pub fn as_name(&self) -> Option<&str> {
        match self.untagged() {
            Value::Keyword(s) | Value::Str(s) | Value::Symbol(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an integer: `Int`, or a `Float` with no fractional part.
    pub fn as_i64(&self) -> Option<i64> {
        match self.untagged() {
            Value::Int(i) => Some(*i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(*f as i64),
            _ => None,
        }
    }

    /// The value as a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|i| u64::try_from(i).ok())
    }

    /// The value as a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self.untagged() {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A short textual form used as an identifier (keys, operation ids): strings, keywords and
    /// symbols give their text, anything else its EDN rendering.
    pub fn to_ident(&self) -> String {
        match self.as_name() {
            Some(s) => s.to_string(),
            None => self.to_string(),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Value::Nil => 0,
            Value::Bool(_) => 1,
            Value::Int(_) | Value::BigInt(_) | Value::Float(_) => 2,
            Value::Char(_) => 3,
            Value::Str(_) => 4,
            Value::Keyword(_) => 5,
            Value::Symbol(_) => 6,
            Value::List(_) => 7,
            Value::Vector(_) => 8,
            Value::Set(_) => 9,
            Value::Map(_) => 10,
            Value::Tagged(..) => 11,
        }
    }
}

fn cmp_numbers(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::BigInt(x), Value::BigInt(y)) => (x.len(), x).cmp(&(y.len(), y)),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        // Mixed kinds: order by kind so equality stays exact (1 and 1.0 differ, as in EDN).
        _ => num_kind(a).cmp(&num_kind(b)),
    }
}

fn num_kind(v: &Value) -> u8 {
    match v {
        Value::Int(_) => 0,
        Value::BigInt(_) => 1,
        _ => 2,
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        let by_rank = self.rank().cmp(&other.rank());
        if by_rank != Ordering::Equal {
            return by_rank;
        }
        match (self, other) {
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Char(a), Value::Char(b)) => a.cmp(b),
            (Value::Str(a), Value::Str(b))
            | (Value::Keyword(a), Value::Keyword(b))
            | (Value::Symbol(a), Value::Symbol(b)) => a.cmp(b),
            (Value::List(a), Value::List(b)) | (Value::Vector(a), Value::Vector(b)) => a.cmp(b),
            (Value::Set(a), Value::Set(b)) => a.cmp(b),
            (Value::Map(a), Value::Map(b)) => a.cmp(b),
            (Value::Tagged(ta, a), Value::Tagged(tb, b)) => (ta, a).cmp(&(tb, b)),
            (a, b) if a.rank() == 2 => cmp_numbers(a, b),
            _ => Ordering::Equal,
        }
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<u64> for Value {
    fn from(i: u64) -> Self {
        i64::try_from(i).map_or_else(|_| Value::BigInt(i.to_string()), Value::Int)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Nil, Into::into)
    }
}

impl fmt::Display for Value {
    /// Renders the value as EDN text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::edn::write_value(f, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_compare_regardless_of_insertion_order() {
        let a = Value::map([("a", 1i64.into()), ("b", "x".into())]);
        let b = Value::map([("b", "x".into()), ("a", 1i64.into())]);
        assert_eq!(a, b);
    }

    #[test]
    fn get_reads_keyword_and_string_keys() {
        let edn = Value::map([("key", "k1".into())]);
        let mut json = BTreeMap::new();
        json.insert(Value::str("key"), Value::str("k1"));
        assert_eq!(edn.get("key"), Value::Map(json).get("key"));
    }

    #[test]
    fn names_read_through_tags() {
        let v = Value::Tagged("uuid".into(), Box::new(Value::str("0192")));
        assert_eq!(v.as_name(), Some("0192"));
        assert_eq!(v.to_ident(), "0192");
    }
}
