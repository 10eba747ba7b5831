//! The audit log as the SDK reads it (`Admin.ListAudit`): a query and its page.
//!
//! Entries are plain values: who (the authenticated principal, or `node:<id>` for
//! automatic failover changes), why, what kind of change, about which tenant, and the
//! change's details as key/value pairs, so a tool can print or filter them without knowing
//! every kind.

use std::collections::BTreeMap;

use idem_proto::v1 as pb;

/// Which entries to read. The default reads the global group's log from the start, 100
/// entries, unfiltered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// The group whose log is read (0: the global group).
    pub group: u64,
    /// First sequence number (the previous page's `next_seq` to continue).
    pub from_seq: u64,
    /// Page size (0: 100; at most 1000).
    pub limit: u32,
    /// Only entries at or after this time (ms since the Unix epoch).
    pub since_ms: Option<i64>,
    /// Only entries before this time (ms since the Unix epoch).
    pub until_ms: Option<i64>,
    /// Only entries about this tenant.
    pub tenant: Option<String>,
    /// Only entries of these kinds (`set_mode`, `bind_tenant`, `membership`, ...).
    pub kinds: Vec<String>,
}

/// One audit entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    /// Position in the group's log.
    pub seq: u64,
    /// Replicated time of the change (ms since the Unix epoch).
    pub at_ms: i64,
    /// Who.
    pub admin: String,
    /// Why.
    pub reason: String,
    /// What kind of change.
    pub kind: String,
    /// The tenant it is about, if any.
    pub tenant: Option<String>,
    /// What changed.
    pub details: BTreeMap<String, String>,
}

/// A page of entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditPage {
    /// Matching entries, by sequence number.
    pub entries: Vec<AuditEntry>,
    /// Where the next page starts; `None` at the end of the log.
    pub next_seq: Option<u64>,
}

impl AuditQuery {
    /// The wire request.
    pub(crate) fn to_proto(&self) -> pb::ListAuditRequest {
        pb::ListAuditRequest {
            group: self.group,
            from_seq: self.from_seq,
            limit: self.limit,
            since_ms: self.since_ms.unwrap_or(0),
            until_ms: self.until_ms.unwrap_or(0),
            tenant: self.tenant.clone().unwrap_or_default(),
            kinds: self.kinds.clone(),
        }
    }
}

impl AuditPage {
    /// The page of a wire response.
    pub(crate) fn from_proto(response: pb::ListAuditResponse) -> Self {
        AuditPage {
            entries: response
                .entries
                .into_iter()
                .map(|e| AuditEntry {
                    seq: e.seq,
                    at_ms: e.at_ms,
                    admin: e.admin,
                    reason: e.reason,
                    kind: e.kind,
                    tenant: (!e.tenant.is_empty()).then_some(e.tenant),
                    details: e.details.into_iter().collect(),
                })
                .collect(),
            next_seq: (response.next_seq != 0).then_some(response.next_seq),
        }
    }
}
