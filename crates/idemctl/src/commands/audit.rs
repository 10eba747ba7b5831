//! `idemctl audit list`: the audit log, read page by page through `Admin.ListAudit`.
//!
//! Without `--limit` it follows `next_seq` to the end of the log, bounded by
//! [`MAX_ENTRIES`] so a forgotten filter on a long log cannot run forever; with it, it
//! prints one page and where to continue.

use idem_client::audit::{AuditEntry, AuditQuery};
use idem_client::Client;

use crate::cli::AuditListArgs;
use crate::error::CliError;
use crate::output::{Doc, Value};

/// Most entries one `audit list` without `--limit` prints.
const MAX_ENTRIES: usize = 100_000;

/// The columns in table mode (JSON has every field, details included).
const COLUMNS: &[&str] = &["seq", "at", "admin", "kind", "tenant", "reason"];

/// `idemctl audit list`.
pub async fn list(client: &Client, args: AuditListArgs) -> Result<Doc, CliError> {
    let mut query = AuditQuery {
        group: args.group,
        from_seq: args.from_seq,
        limit: args.limit.unwrap_or(0),
        since_ms: args.since,
        until_ms: args.until,
        tenant: args.tenant,
        kinds: args.kinds,
    };
    let mut entries = Vec::new();
    let next_seq = loop {
        let page = client.list_audit(&query).await?;
        entries.extend(page.entries);
        match page.next_seq {
            Some(next) if args.limit.is_none() && entries.len() < MAX_ENTRIES => {
                query.from_seq = next;
            }
            next => break next,
        }
    };
    let rows = entries.iter().map(entry_doc).collect();
    Ok(Doc::new()
        .with(
            "entries",
            Value::Rows {
                rows,
                columns: COLUMNS,
            },
        )
        .with("next_seq", next_seq))
}

fn entry_doc(entry: &AuditEntry) -> Doc {
    let at = u64::try_from(entry.at_ms).unwrap_or_default();
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
    let details = entry.details.iter().fold(Doc::new(), |doc, (key, value)| {
        doc.with(key, value.as_str())
    });
    Doc::new()
        .with("seq", entry.seq)
        .with("at", humantime::format_rfc3339_millis(at).to_string())
        .with("admin", entry.admin.as_str())
        .with("kind", entry.kind.as_str())
        .with("tenant", entry.tenant.clone())
        .with("reason", entry.reason.as_str())
        .with("details", details)
}
