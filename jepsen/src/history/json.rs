//! JSON encoding of histories and ledgers.
//!
//! JSON has no keywords, symbols or sets, so the mapping is lossy in one direction: keywords and
//! symbols become strings, sets and lists become arrays, tags are dropped. Object keys read back
//! as keywords, which is what every map key in this project's histories is. Every reader of an
//! enum-like field uses [`Value::as_name`], which accepts a keyword or a string, so a history
//! reads the same from either encoding.

use std::collections::BTreeMap;

use super::error::HistoryError;
use super::value::Value;

/// Converts a JSON document into a [`Value`] (object keys become keywords).
pub fn from_json(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => number(n),
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(items) => Value::Vector(items.iter().map(from_json).collect()),
        serde_json::Value::Object(map) => Value::Map(
            map.iter()
                .map(|(k, v)| (Value::kw(k), from_json(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
    }
}

fn number(n: &serde_json::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Int(i)
    } else if let Some(u) = n.as_u64() {
        Value::from(u)
    } else {
        Value::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Converts a [`Value`] into JSON (keywords, symbols and characters become strings).
pub fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Nil => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::BigInt(s) => s
            .parse::<u64>()
            .map_or_else(|_| J::String(s.clone()), J::from),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Str(s) | Value::Keyword(s) | Value::Symbol(s) => J::String(s.clone()),
        Value::Char(c) => J::String(c.to_string()),
        Value::List(items) | Value::Vector(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Set(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(map) => J::Object(
            map.iter()
                .map(|(k, v)| (k.to_ident(), to_json(v)))
                .collect(),
        ),
        Value::Tagged(_, inner) => to_json(inner),
    }
}

/// Parses JSON lines (one document per line, blank lines skipped) or a single JSON array of
/// documents into values.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, HistoryError> {
    if text.trim_start().starts_with('[') {
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|source| HistoryError::Json { line: 1, source })?;
        return Ok(match doc {
            serde_json::Value::Array(items) => items.iter().map(from_json).collect(),
            other => vec![from_json(&other)],
        });
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let doc: serde_json::Value =
            serde_json::from_str(line).map_err(|source| HistoryError::Json {
                line: i + 1,
                source,
            })?;
        out.push(from_json(&doc));
    }
    Ok(out)
}

/// True when `text` looks like JSON (an object whose first key is quoted, or an array of them)
/// rather than EDN (whose map keys are keywords).
pub fn looks_like_json(text: &str) -> bool {
    let mut chars = text.chars().filter(|c| !c.is_whitespace());
    matches!(
        (chars.next(), chars.next(), chars.next()),
        (Some('{'), Some('"' | '}'), _)
            | (Some('['), Some('{'), Some('"' | '}'))
            | (Some('['), Some(']'), _)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::edn::parse_one;

    #[test]
    fn json_and_edn_read_alike_for_names() {
        let edn = parse_one(r#"{:type :ok :value {:outcome :acquired :fence 2}}"#).unwrap();
        let json = parse_documents(r#"{"type":"ok","value":{"outcome":"acquired","fence":2}}"#)
            .unwrap()
            .remove(0);
        for v in [&edn, &json] {
            assert_eq!(v.get("type").and_then(Value::as_name), Some("ok"));
            let value = v.get("value").unwrap();
            assert_eq!(
                value.get("outcome").and_then(Value::as_name),
                Some("acquired")
            );
            assert_eq!(value.get("fence").and_then(Value::as_u64), Some(2));
        }
    }

    #[test]
    fn detects_json() {
        assert!(looks_like_json("{\"a\":1}\n"));
        assert!(looks_like_json(" [ {\"a\":1} ]"));
        assert!(!looks_like_json("{:a 1}"));
        assert!(!looks_like_json("; comment\n{:a 1}"));
    }

    #[test]
    fn reads_arrays_and_reports_bad_lines() {
        assert_eq!(parse_documents("[{\"a\":1},{\"a\":2}]").unwrap().len(), 2);
        let err = parse_documents("{\"a\":1}\n{oops}\n").unwrap_err();
        assert!(matches!(err, HistoryError::Json { line: 2, .. }));
    }

    #[test]
    fn converts_edn_only_values_to_strings() {
        let v = parse_one(r#"{:k :kw :s #{1} :t #uuid "u"}"#).unwrap();
        assert_eq!(
            to_json(&v),
            serde_json::json!({"k": "kw", "s": [1], "t": "u"})
        );
    }
}
