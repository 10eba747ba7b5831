//! Rendering: every command produces one [`Doc`], printed as JSON or as a table.
//!
//! Commands never print. They build a `Doc` (an ordered list of named values) and this module
//! renders it, so both formats show the same fields in the same order, `-w json` always prints
//! exactly one object, and errors share the same path ([`error_doc`]).
//!
//! Table mode is for people: nested objects are flattened to dotted names (`result.status_code`),
//! instants (`*_at_ms`) are shown as RFC 3339 and durations (`*_ms`) in human form, absent
//! values as `-`, and lists of records as aligned columns.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use idem_client::Lookup;
use idem_core::{ErrorSummary, Record, Stage, StoredResult};

use crate::cli::Format;
use crate::error::CliError;

/// A value in a [`Doc`].
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Absent (JSON `null`, table `-`).
    Null,
    /// A boolean.
    Bool(bool),
    /// An unsigned number.
    Num(u64),
    /// Text.
    Str(String),
    /// A nested object.
    Obj(Doc),
    /// A list of objects; a table shows only `columns` of them, JSON shows everything.
    Rows {
        /// The rows.
        rows: Vec<Doc>,
        /// The fields shown as table columns.
        columns: &'static [&'static str],
    },
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Num(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Num(v.into())
    }
}

impl From<u16> for Value {
    fn from(v: u16) -> Self {
        Value::Num(v.into())
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}

impl From<Doc> for Value {
    fn from(v: Doc) -> Self {
        Value::Obj(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// An ordered set of named values: the output of one command.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Doc(Vec<(String, Value)>);

impl Doc {
    /// An empty document.
    pub fn new() -> Self {
        Doc::default()
    }

    /// Adds a field.
    #[must_use]
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.0.push((name.to_owned(), value.into()));
        self
    }

    /// Adds a field unless the value is absent.
    #[must_use]
    pub fn with_some<T: Into<Value>>(self, name: &str, value: Option<T>) -> Self {
        match value {
            Some(value) => self.with(name, value),
            None => self,
        }
    }

    /// Appends every field of `other`.
    #[must_use]
    pub fn extend(mut self, other: Doc) -> Self {
        self.0.extend(other.0);
        self
    }

    /// The value of a field.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl Serialize for Doc {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_none(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Num(n) => serializer.serialize_u64(*n),
            Value::Str(s) => serializer.serialize_str(s),
            Value::Obj(doc) => doc.serialize(serializer),
            Value::Rows { rows, .. } => {
                let mut seq = serializer.serialize_seq(Some(rows.len()))?;
                for row in rows {
                    seq.serialize_element(row)?;
                }
                seq.end()
            }
        }
    }
}

/// The JSON form: one object on one line.
pub fn to_json(doc: &Doc) -> String {
    // A Doc only holds strings, numbers, booleans and nulls: serialisation cannot fail.
    serde_json::to_string(doc)
        .unwrap_or_else(|e| format!("{{\"error\":\"INTERNAL\",\"message\":\"{e}\"}}"))
}

/// The table form: aligned `name  value` lines, then one column table per list.
pub fn to_table(doc: &Doc) -> String {
    let mut pairs = Vec::new();
    let mut tables = Vec::new();
    flatten("", doc, &mut pairs, &mut tables);
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, value) in &pairs {
        let _ = writeln!(out, "{name:<width$}  {value}");
    }
    for (name, rows, columns) in tables {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&columns_table(&name, rows, columns));
    }
    out
}

type TableRef<'a> = (String, &'a [Doc], &'static [&'static str]);

fn flatten<'a>(
    prefix: &str,
    doc: &'a Doc,
    pairs: &mut Vec<(String, String)>,
    tables: &mut Vec<TableRef<'a>>,
) {
    for (name, value) in &doc.0 {
        let full = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        match value {
            Value::Obj(inner) => flatten(&full, inner, pairs, tables),
            Value::Rows { rows, columns } => tables.push((full, rows, columns)),
            scalar => pairs.push((full.clone(), display(&full, scalar))),
        }
    }
}

/// A table of `rows` with the given columns, headed by the list's name and the row count.
fn columns_table(name: &str, rows: &[Doc], columns: &[&str]) -> String {
    let mut grid: Vec<Vec<String>> = vec![columns.iter().map(|c| c.to_uppercase()).collect()];
    for row in rows {
        grid.push(
            columns
                .iter()
                .map(|c| row.get(c).map_or_else(|| "-".to_owned(), |v| display(c, v)))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| grid.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("{name} ({})\n", rows.len());
    for line in grid {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A scalar for people: instants as RFC 3339, durations in human form.
fn display(name: &str, value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Num(0) if name.ends_with("_at_ms") => "-".to_owned(),
        Value::Num(n) if name.ends_with("_at_ms") => {
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(*n)).to_string()
        }
        Value::Num(n) if name.ends_with("_ms") => {
            humantime::format_duration(Duration::from_millis(*n)).to_string()
        }
        Value::Num(n) => n.to_string(),
        Value::Str(s) if s.is_empty() => "-".to_owned(),
        Value::Str(s) => s.clone(),
        Value::Obj(_) | Value::Rows { .. } => to_json_value(value),
    }
}

fn to_json_value(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Milliseconds of a duration, saturating.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A stored result: status code, resource, fields (sorted), purged flag, version, and of a
/// verbatim body its content type and size (never its bytes: they may be personal data).
pub fn result_doc(result: &StoredResult) -> Doc {
    let fields = result.fields.iter().fold(Doc::new(), |doc, (name, value)| {
        doc.with(name, value.as_str())
    });
    let body = result.body.as_ref().map(|body| {
        Doc::new()
            .with("content_type", body.content_type.as_str())
            .with("bytes", u64::try_from(body.bytes.len()).unwrap_or(u64::MAX))
    });
    Doc::new()
        .with("status_code", result.status_code)
        .with("resource_id", result.resource_id.as_str())
        .with("resource_version", result.resource_version.as_str())
        .with("fields", fields)
        .with("purged", result.purged)
        .with("result_version", result.version())
        .with_some("body", body)
}

/// A stored error summary.
pub fn error_summary_doc(error: &ErrorSummary) -> Doc {
    Doc::new()
        .with("code", error.code.as_str())
        .with("message", error.message.as_str())
}

/// Every field of a record, identity and state first, timestamps last.
pub fn record_doc(record: &Record) -> Doc {
    let scope = &record.key.scope;
    let lease = record.lease.as_ref();
    Doc::new()
        .with("operation_id", record.operation_id.to_string())
        .with("state", record.state.name())
        .with("stage", record.stage.name())
        .with("fence", record.fence)
        .with("version", record.version)
        .with("attempts", record.attempts)
        .with("tenant", scope.tenant())
        .with("environment", scope.environment())
        .with("actor", scope.actor())
        .with("endpoint", scope.endpoint())
        .with("key", record.key.key.as_str())
        .with("risk", record.policy.risk.name())
        .with("holder", lease.map(|l| l.holder.as_str()))
        .with("lease_expires_at_ms", lease.map(|l| l.expires_at.millis()))
        .with("remote_ref", record.remote_ref.clone())
        .with("previous_stage", record.previous_stage.map(Stage::name))
        .with("result", record.result.as_ref().map(result_doc))
        .with("error", record.error.as_ref().map(error_summary_doc))
        .with("fingerprint", record.fingerprint.to_string())
        .with("lease_ms", millis(record.policy.lease))
        .with("retention_ms", millis(record.policy.retention))
        .with("max_result_bytes", record.policy.max_result_bytes)
        .with("created_at_ms", record.created_at.millis())
        .with("updated_at_ms", record.updated_at.millis())
        .with("completed_at_ms", record.completed_at.map(|t| t.millis()))
        .with("expires_at_ms", record.expires_at.map(|t| t.millis()))
}

/// A record with what a matching claim would get now (`get`, `wait`, `op show`).
pub fn lookup_doc(lookup: &Lookup) -> Doc {
    Doc::new()
        .with("outcome", lookup.outcome.name())
        .with("terminal", lookup.terminal)
        .extend(record_doc(&lookup.record))
}

/// The document of an error: `{"error": REASON, "message": ..., "retry_after_ms"?}`.
pub fn error_doc(error: &CliError) -> Doc {
    let retry_after = error
        .retry_after()
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Doc::new()
        .with("error", error.reason())
        .with("message", error.message())
        .with_some("retry_after_ms", retry_after)
}

/// The table-mode error line: `Error: REASON: message [(retry after 1s 500ms)]`.
pub fn error_line(error: &CliError) -> String {
    let mut line = format!("Error: {}: {}", error.reason(), error.message());
    if let Some(after) = error.retry_after() {
        let _ = write!(line, " (retry after {})", humantime::format_duration(after));
    }
    line
}

/// Prints a command's result (stdout) or error (stdout in JSON mode, stderr in table mode)
/// and answers the process exit code.
pub fn emit(format: Format, result: &Result<Doc, CliError>) -> u8 {
    match (result, format) {
        (Ok(doc), Format::Json) => println!("{}", to_json(doc)),
        (Ok(doc), Format::Table) => print!("{}", to_table(doc)),
        (Err(e), Format::Json) => println!("{}", to_json(&error_doc(e))),
        (Err(e), Format::Table) => eprintln!("{}", error_line(e)),
    }
    result.as_ref().map_or_else(CliError::exit_code, |_| 0)
}

#[cfg(test)]
mod tests {
    use idem_client::ClientError;

    use super::*;

    fn sample() -> Doc {
        Doc::new()
            .with("outcome", "COMPLETED")
            .with("fence", Option::<u64>::None)
            .with("version", 3u64)
            .with("terminal", true)
            .with("lease_ms", 30_000u64)
            .with("created_at_ms", 1_700_000_000_123u64)
            .with("completed_at_ms", 0u64)
            .with(
                "result",
                Doc::new()
                    .with("status_code", 201u16)
                    .with("resource_id", "ch_1"),
            )
    }

    #[test]
    fn json_keeps_field_order_and_types() {
        assert_eq!(
            to_json(&sample()),
            r#"{"outcome":"COMPLETED","fence":null,"version":3,"terminal":true,"lease_ms":30000,"created_at_ms":1700000000123,"completed_at_ms":0,"result":{"status_code":201,"resource_id":"ch_1"}}"#
        );
    }

    #[test]
    fn table_aligns_and_humanizes() {
        let table = to_table(&sample());
        let expected = "\
outcome             COMPLETED
fence               -
version             3
terminal            true
lease_ms            30s
created_at_ms       2023-11-14T22:13:20.123Z
completed_at_ms     -
result.status_code  201
result.resource_id  ch_1
";
        assert_eq!(table, expected);
    }

    #[test]
    fn rows_are_columns_in_tables_and_full_objects_in_json() {
        let row = |id: &str, state: &str| {
            Doc::new()
                .with("operation_id", id)
                .with("state", state)
                .with("hidden", 1u64)
        };
        let doc = Doc::new()
            .with(
                "records",
                Value::Rows {
                    rows: vec![row("a", "PENDING"), row("bb", "IN_PROGRESS")],
                    columns: &["operation_id", "state"],
                },
            )
            .with("next_page_token", Option::<String>::None);
        assert_eq!(
            to_table(&doc),
            "next_page_token  -\n\nrecords (2)\nOPERATION_ID  STATE\na             PENDING\nbb            IN_PROGRESS\n"
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&doc)).unwrap();
        assert_eq!(json["records"][1]["hidden"], 1);
        assert_eq!(json["records"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn error_json_shape() {
        let error = CliError::from(ClientError::Rejected {
            reason: "REGION_FAILOVER".into(),
            code: idem_client::Code::Unavailable,
            message: "home region lost".into(),
            retry_after: Some(Duration::from_millis(1500)),
        });
        let json: serde_json::Value = serde_json::from_str(&to_json(&error_doc(&error))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "error": "REGION_FAILOVER",
                "message": "home region lost",
                "retry_after_ms": 1500
            })
        );
        assert_eq!(
            error_line(&error),
            "Error: REGION_FAILOVER: home region lost (retry after 1s 500ms)"
        );
        let error = CliError::from(ClientError::NotFound {
            message: "no such record".into(),
        });
        let json: serde_json::Value = serde_json::from_str(&to_json(&error_doc(&error))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"error": "NOT_FOUND", "message": "no such record"})
        );
    }
}
