//! Reads and record administration on the wire: lookups (`Get`, `GetOperation`, `Wait`),
//! pages of `ListOperations` and `Reconcile` decisions.
//!
//! Every record goes through idem-proto's lossless [`record_from_proto`]; a response that
//! must carry a record and does not is `INVALID_RESPONSE` ([`required_record`]).

use idem_core::{ErrorSummary, StoredResult};
use idem_proto::{reason, v1};

use super::{
    claim_kind_from_proto, error_to_proto, millis, record_from_proto, result_to_proto,
    state_to_proto, DecodeError,
};
use crate::claim::Target;
use crate::error::ClientError;
use crate::types::{ListQuery, Lookup, Page, ReconcileTarget, Reconciliation};

/// The record of a response that must carry one.
pub(crate) fn required_record(
    record: Option<v1::Record>,
) -> Result<idem_core::Record, ClientError> {
    let record = record.ok_or_else(|| ClientError::invalid_response("response without record"))?;
    Ok(record_from_proto(record)?)
}

/// The scope and key fields of a request naming `target`.
pub(crate) fn target_to_proto(target: &Target) -> (Option<v1::Scope>, String) {
    (
        Some(super::scope_to_proto(&target.scope)),
        target.key.as_str().to_owned(),
    )
}

/// The typed answer of `Get` and `GetOperation` (terminal is the record's own state).
pub(crate) fn lookup_from_get(response: v1::GetResponse) -> Result<Lookup, ClientError> {
    let record = required_record(response.record)?;
    Ok(Lookup {
        outcome: claim_kind_from_proto(response.outcome)?,
        terminal: record.state.is_terminal(),
        record,
    })
}

/// The typed answer of `Wait` (terminal as the server says).
pub(crate) fn lookup_from_wait(response: v1::WaitResponse) -> Result<Lookup, ClientError> {
    Ok(Lookup {
        record: required_record(response.record)?,
        outcome: claim_kind_from_proto(response.outcome)?,
        terminal: response.terminal,
    })
}

/// The wire request of a `ListOperations` query (absent filters are zero or empty).
pub(crate) fn list_query_to_proto(query: &ListQuery) -> v1::ListOperationsRequest {
    v1::ListOperationsRequest {
        states: query
            .states
            .iter()
            .map(|s| state_to_proto(*s) as i32)
            .collect(),
        older_than_ms: query.older_than.map_or(0, millis),
        limit: query.limit.unwrap_or(0),
        page_token: query.page_token.clone().unwrap_or_default(),
        stuck: query.stuck,
        tenant: query.tenant.clone().unwrap_or_default(),
    }
}

/// One page of `ListOperations`; an empty next-page token means the last page.
pub(crate) fn page_from_proto(response: v1::ListOperationsResponse) -> Result<Page, ClientError> {
    Ok(Page {
        records: response
            .records
            .into_iter()
            .map(record_from_proto)
            .collect::<Result<_, DecodeError>>()?,
        next_page_token: (!response.next_page_token.is_empty()).then_some(response.next_page_token),
    })
}

/// The wire request of a reconciliation; the result or error and the reason are checked
/// first, so a malformed decision fails before anything is sent.
pub(crate) fn reconciliation_to_proto(
    decision: &Reconciliation,
) -> Result<v1::ReconcileRequest, ClientError> {
    if decision.reason.trim().is_empty() {
        return Err(ClientError::invalid(
            reason::INVALID_ARGUMENT,
            "a reconcile needs a reason",
        ));
    }
    let (result, error) = match &decision.target {
        ReconcileTarget::Completed(result) => (Some(result), None),
        ReconcileTarget::RetryableFailure(error) => (None, error.as_ref()),
        ReconcileTarget::TerminalFailure(error) => (None, Some(error)),
        ReconcileTarget::Cancelled => (None, None),
    };
    result.map(StoredResult::validate).transpose()?;
    error.map(ErrorSummary::validate).transpose()?;
    Ok(v1::ReconcileRequest {
        operation_id: decision.operation_id.to_string(),
        expected_version: decision.expected_version,
        target: state_to_proto(decision.target.state()) as i32,
        result: result.map(result_to_proto),
        error: error.map(error_to_proto),
        reason: decision.reason.clone(),
        operator: decision.operator.clone(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use idem_core::testing::sample::completed_record;
    use idem_core::State;

    use super::*;
    use crate::convert::record_to_proto;

    #[test]
    fn invalid_records_are_rejected() {
        let good = record_to_proto(&completed_record());
        assert_eq!(
            required_record(Some(good.clone())).unwrap(),
            completed_record()
        );
        let cases: [fn(&mut v1::Record); 9] = [
            |r| r.state = 0,
            |r| r.state = 99,
            |r| r.stage = 0,
            |r| r.risk = 0,
            |r| r.scope = None,
            |r| r.fingerprint = None,
            |r| r.key = "no spaces".into(),
            |r| r.operation_id = "x".into(),
            |r| r.result.as_mut().unwrap().status_code = 70_000,
        ];
        for (i, mutate) in cases.iter().enumerate() {
            let mut wire = good.clone();
            mutate(&mut wire);
            let err = required_record(Some(wire)).unwrap_err();
            assert_eq!(err.reason(), "INVALID_RESPONSE", "case {i}");
        }
        let err = required_record(None).unwrap_err();
        assert_eq!(err.reason(), "INVALID_RESPONSE");
    }

    #[test]
    fn list_query_to_wire() {
        let query = ListQuery {
            states: vec![State::Pending, State::InProgress],
            older_than: Some(Duration::from_secs(300)),
            limit: Some(10),
            page_token: None,
            tenant: Some("acme".into()),
            stuck: true,
        };
        let wire = list_query_to_proto(&query);
        assert_eq!(
            wire.states,
            [v1::State::Pending as i32, v1::State::InProgress as i32]
        );
        assert_eq!(wire.older_than_ms, 300_000);
        assert_eq!(wire.limit, 10);
        assert_eq!(wire.page_token, "");
        assert_eq!(wire.tenant, "acme");
        assert!(wire.stuck);
        assert_eq!(list_query_to_proto(&ListQuery::default()).limit, 0);
    }

    #[test]
    fn reconciliation_is_checked_before_sending() {
        let mut r = Reconciliation {
            operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap(),
            expected_version: 4,
            target: ReconcileTarget::Completed(StoredResult {
                status_code: 201,
                resource_id: "ch_1".into(),
                ..Default::default()
            }),
            reason: "TICKET-1".into(),
            operator: "ops".into(),
        };
        let wire = reconciliation_to_proto(&r).unwrap();
        assert_eq!(wire.target, v1::State::Completed as i32);
        assert_eq!(wire.result.unwrap().status_code, 201);
        assert_eq!(wire.error, None);

        r.target = ReconcileTarget::TerminalFailure(ErrorSummary {
            code: "declined".into(),
            message: String::new(),
        });
        assert_eq!(
            reconciliation_to_proto(&r).unwrap().target,
            v1::State::TerminalFailure as i32
        );
        r.target = ReconcileTarget::Cancelled;
        let wire = reconciliation_to_proto(&r).unwrap();
        assert_eq!(wire.target, v1::State::Cancelled as i32);
        assert_eq!((wire.result, wire.error), (None, None));

        r.target = ReconcileTarget::Completed(StoredResult {
            status_code: 42,
            ..Default::default()
        });
        assert_eq!(
            reconciliation_to_proto(&r).unwrap_err().reason(),
            "INVALID_RESULT"
        );
        r.target = ReconcileTarget::RetryableFailure(None);
        r.reason = " ".into();
        assert_eq!(
            reconciliation_to_proto(&r).unwrap_err().reason(),
            "INVALID_ARGUMENT"
        );
    }
}
