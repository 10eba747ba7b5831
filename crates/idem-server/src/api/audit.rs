//! `Admin.ListAudit`: a bounded, resumable read of one group's audit log.
//!
//! The log is read through the store's `audit(from, limit)` behind the same read barrier
//! as `ListOperations`, so a change the caller just made is in the answer. Filters (time,
//! tenant, kind) are applied while reading; a page stops at `limit` matches or after
//! [`MAX_AUDIT_SCAN`] entries, and `next_seq` lets the caller continue where it stopped,
//! so a filter matching little never makes one call read the whole log.
//!
//! Visibility follows the principal: an admin sees every entry; an operator only the
//! entries that name one of its tenants (entries naming no tenant, such as mode, region,
//! membership and failover changes or reconciles, are the admins' only).

use std::collections::{BTreeSet, HashMap};

use idem_core::audit::MembershipNote;
use idem_core::placement::GroupId;
use idem_core::scope::validate_tenant;
use idem_core::{AuditAction, AuditEntry};
use idem_proto::v1 as pb;

use crate::auth::{Principal, Role, Tenants};
use crate::backend::{Backend, RequestError};

/// Page size when the request says 0.
pub const DEFAULT_AUDIT_LIMIT: usize = 100;
/// Largest page.
pub const MAX_AUDIT_LIMIT: usize = 1000;
/// Most entries one call examines before returning a partial page.
pub const MAX_AUDIT_SCAN: usize = 10_000;
/// Entries read per store call.
const READ_PAGE: usize = 500;
/// Most `kinds` one request may list.
const MAX_KINDS: usize = 16;

/// A validated `ListAudit` request, with the caller's visibility.
#[derive(Debug)]
pub(crate) struct AuditQuery {
    group: GroupId,
    from: u64,
    limit: usize,
    since: u64,
    until: Option<u64>,
    tenant: Option<String>,
    kinds: BTreeSet<&'static str>,
    /// `None`: every entry (admins); otherwise only entries naming one of these tenants.
    visible: Option<Tenants>,
}

impl AuditQuery {
    /// Authorises `caller` and validates `req`.
    pub(crate) fn parse(
        caller: &Principal,
        req: pb::ListAuditRequest,
    ) -> Result<Self, RequestError> {
        let tenant = (!req.tenant.is_empty()).then_some(req.tenant);
        caller.require(Role::Operator, tenant.as_deref())?;
        if let Some(tenant) = &tenant {
            validate_tenant(tenant)?;
        }
        let visible = (caller.role < Role::Admin).then(|| caller.tenants.clone());
        Ok(AuditQuery {
            group: req.group,
            from: req.from_seq.max(1),
            limit: match req.limit {
                0 => DEFAULT_AUDIT_LIMIT,
                n => usize::try_from(n)
                    .unwrap_or(MAX_AUDIT_LIMIT)
                    .min(MAX_AUDIT_LIMIT),
            },
            since: millis("since_ms", req.since_ms)?,
            until: match millis("until_ms", req.until_ms)? {
                0 => None,
                until if until <= millis("since_ms", req.since_ms)? => {
                    return Err(RequestError::argument("until_ms must be after since_ms"))
                }
                until => Some(until),
            },
            tenant,
            kinds: kinds(&req.kinds)?,
            visible,
        })
    }

    fn matches(&self, entry: &AuditEntry) -> bool {
        let at = entry.at.millis();
        let tenant = entry.action.tenant();
        let visible = match &self.visible {
            None => true,
            Some(tenants) => tenant.is_some_and(|t| tenants.contains(t)),
        };
        visible
            && at >= self.since
            && self.until.is_none_or(|until| at < until)
            && self.tenant.as_deref().is_none_or(|t| tenant == Some(t))
            && (self.kinds.is_empty() || self.kinds.contains(entry.action.kind()))
    }

    /// Runs the query: matching entries and the sequence number to continue from (0 at
    /// the end of the log).
    pub(crate) fn run(&self, backend: &dyn Backend) -> Result<pb::ListAuditResponse, RequestError> {
        let mut found = Vec::new();
        let mut next = self.from;
        let mut scanned = 0;
        while scanned < MAX_AUDIT_SCAN {
            let page = backend.audit(self.group, next, READ_PAGE)?;
            let full = page.len() == READ_PAGE;
            for entry in page {
                scanned += 1;
                next = entry.seq + 1;
                if self.matches(&entry) {
                    found.push(entry_to_proto(&entry));
                    if found.len() == self.limit {
                        return Ok(answer(found, next));
                    }
                }
            }
            if !full {
                return Ok(answer(found, 0));
            }
        }
        Ok(answer(found, next))
    }
}

fn answer(entries: Vec<pb::AuditEntry>, next_seq: u64) -> pb::ListAuditResponse {
    pb::ListAuditResponse { entries, next_seq }
}

fn millis(field: &str, value: i64) -> Result<u64, RequestError> {
    u64::try_from(value)
        .map_err(|_| RequestError::argument(format!("{field}: milliseconds since the epoch, ≥ 0")))
}

fn kinds(requested: &[String]) -> Result<BTreeSet<&'static str>, RequestError> {
    if requested.len() > MAX_KINDS {
        return Err(RequestError::argument(format!(
            "kinds: at most {MAX_KINDS}"
        )));
    }
    requested
        .iter()
        .map(|kind| {
            AuditAction::KINDS
                .iter()
                .find(|known| **known == kind.as_str())
                .copied()
                .ok_or_else(|| {
                    RequestError::argument(format!(
                        "kinds: unknown kind; one of {}",
                        AuditAction::KINDS.join(", ")
                    ))
                })
        })
        .collect()
}

/// The wire form of an entry.
pub(crate) fn entry_to_proto(entry: &AuditEntry) -> pb::AuditEntry {
    pb::AuditEntry {
        seq: entry.seq,
        at_ms: i64::try_from(entry.at.millis()).unwrap_or(i64::MAX),
        admin: entry.admin.clone(),
        reason: entry.reason.clone(),
        kind: entry.action.kind().to_owned(),
        tenant: entry.action.tenant().unwrap_or_default().to_owned(),
        details: details(&entry.action),
    }
}

fn details(action: &AuditAction) -> HashMap<String, String> {
    let pairs: Vec<(&str, String)> = match action {
        // The entry of `Reconcile` before and after it named the record's tenant.
        AuditAction::Reconcile {
            operation_id,
            from,
            to,
            version,
        }
        | AuditAction::ReconcileRecord {
            operation_id,
            from,
            to,
            version,
            ..
        } => vec![
            ("operation_id", operation_id.to_string()),
            ("from", from.name().to_owned()),
            ("to", to.name().to_owned()),
            ("version", version.to_string()),
        ],
        AuditAction::PurgeSubject {
            actor, scrubbed, ..
        } => vec![("actor", actor.clone()), ("scrubbed", scrubbed.to_string())],
        AuditAction::ConfirmHome {
            group_region,
            from,
            to,
            epoch,
        } => vec![
            ("group_region", group_region.clone()),
            ("from", from.clone()),
            ("to", to.clone()),
            ("epoch", epoch.to_string()),
        ],
        AuditAction::SetMode { from, to } => vec![
            ("from", from.name().to_owned()),
            ("to", to.name().to_owned()),
        ],
        AuditAction::AddRegion { name, group } => {
            vec![("region", name.clone()), ("group", group.to_string())]
        }
        AuditAction::BindTenant { from, region, .. } => vec![
            ("from", from.clone().unwrap_or_else(|| "global".to_owned())),
            ("region", region.clone()),
        ],
        AuditAction::UnbindTenant { from, .. } => vec![("from", from.clone())],
        AuditAction::EnterFailover {
            group_region,
            leader_id,
            leader_region,
            epoch,
        } => vec![
            ("group_region", group_region.clone()),
            ("leader_id", leader_id.to_string()),
            ("leader_region", leader_region.clone()),
            ("epoch", epoch.to_string()),
        ],
        AuditAction::EndFailover {
            group_region,
            leader_id,
            epoch,
        } => vec![
            ("group_region", group_region.clone()),
            ("leader_id", leader_id.to_string()),
            ("epoch", epoch.to_string()),
        ],
        AuditAction::Abandon {
            operation_id,
            state,
            idle_ms,
            ..
        } => vec![
            ("operation_id", operation_id.to_string()),
            ("state", state.name().to_owned()),
            ("idle_ms", idle_ms.to_string()),
        ],
        AuditAction::CreateToken {
            name,
            role,
            tenants,
        } => vec![
            ("name", name.clone()),
            ("role", role.name().to_owned()),
            ("tenants", tenants.join(",")),
        ],
        AuditAction::RevokeToken { name } => vec![("name", name.clone())],
        AuditAction::Membership(note) => membership(note),
        AuditAction::MembershipChange { note, index } => {
            let mut pairs = membership(note);
            pairs.push(("log_index", index.to_string()));
            pairs
        }
    };
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

fn membership(note: &MembershipNote) -> Vec<(&'static str, String)> {
    vec![
        ("change", note.kind.name().to_owned()),
        ("member", note.member.to_string()),
        ("voters", ids(&note.voters)),
        ("learners", ids(&note.learners)),
    ]
}

fn ids(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator_of(tenant: &str) -> Principal {
        Principal {
            name: "ops".into(),
            role: Role::Operator,
            tenants: Tenants::Only([tenant.to_owned()].into()),
        }
    }

    #[test]
    fn reconcile_entries_read_the_same_with_or_without_their_tenant() {
        let id = idem_core::OperationId::from_bytes([7; 16]);
        let (from, to) = (
            idem_core::State::NeedsReconciliation,
            idem_core::State::Completed,
        );
        let old = AuditAction::Reconcile {
            operation_id: id,
            from,
            to,
            version: 4,
        };
        let new = AuditAction::ReconcileRecord {
            tenant: "acme".into(),
            operation_id: id,
            from,
            to,
            version: 4,
        };
        let expected = HashMap::from([
            ("operation_id".to_owned(), id.to_string()),
            ("from".to_owned(), from.name().to_owned()),
            ("to".to_owned(), to.name().to_owned()),
            ("version".to_owned(), "4".to_owned()),
        ]);
        assert_eq!(details(&old), expected);
        assert_eq!(details(&new), expected);
        assert_eq!(new.tenant(), Some("acme"));
    }

    #[test]
    fn requests_are_validated_and_bounded() {
        let admin = Principal::unauthenticated();
        let parse = |req| AuditQuery::parse(&admin, req);
        assert_eq!(parse(pb::ListAuditRequest::default()).unwrap().limit, 100);
        let big = pb::ListAuditRequest {
            limit: 5000,
            ..Default::default()
        };
        assert_eq!(parse(big).unwrap().limit, MAX_AUDIT_LIMIT);
        let bad_kind = pb::ListAuditRequest {
            kinds: vec!["drop_table".into()],
            ..Default::default()
        };
        assert_eq!(parse(bad_kind).unwrap_err().reason(), "INVALID_ARGUMENT");
        let backwards = pb::ListAuditRequest {
            since_ms: 10,
            until_ms: 5,
            ..Default::default()
        };
        assert_eq!(parse(backwards).unwrap_err().reason(), "INVALID_ARGUMENT");
        let negative = pb::ListAuditRequest {
            since_ms: -1,
            ..Default::default()
        };
        assert_eq!(parse(negative).unwrap_err().reason(), "INVALID_ARGUMENT");
    }

    #[test]
    fn operators_see_their_tenants_only_and_workers_nothing() {
        let ops = operator_of("acme");
        let other = pb::ListAuditRequest {
            tenant: "globex".into(),
            ..Default::default()
        };
        let denied = AuditQuery::parse(&ops, other).unwrap_err();
        assert_eq!(denied.reason(), "TENANT_FORBIDDEN");
        let query = AuditQuery::parse(&ops, pb::ListAuditRequest::default()).unwrap();
        let entry = |action| AuditEntry {
            seq: 1,
            at: idem_core::Timestamp(1),
            admin: "a".into(),
            reason: "r".into(),
            action,
        };
        let unbind = |tenant: &str| {
            entry(AuditAction::UnbindTenant {
                tenant: tenant.into(),
                from: "r1".into(),
            })
        };
        assert!(query.matches(&unbind("acme")));
        assert!(!query.matches(&unbind("globex")));
        let mode = entry(AuditAction::SetMode {
            from: idem_core::placement::Mode::Global,
            to: idem_core::placement::Mode::RegionAffinity,
        });
        assert!(!query.matches(&mode));
        let worker = Principal {
            role: Role::Worker,
            ..operator_of("acme")
        };
        let denied = AuditQuery::parse(&worker, pb::ListAuditRequest::default()).unwrap_err();
        assert_eq!(denied.reason(), "ROLE_FORBIDDEN");
    }
}
