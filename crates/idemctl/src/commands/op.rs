//! `idemctl op list` and `idemctl op reconcile`: finding stuck operations and deciding them.
//!
//! `op list --stuck` asks the server for the records its stuck-record scan counts in
//! `idem_stuck_records`: PENDING or IN_PROGRESS, unchanged past their endpoint's
//! `stuck_after` (the server knows the endpoint thresholds; the CLI does not).

use idem_client::{Client, ListQuery, ReconcileTarget, Reconciliation};
use idem_core::State;

use super::{error_summary, operation_id, operator, stored_result};
use crate::cli::{ListArgs, ReconcileArgs, ReconcileTo, StateArg};
use crate::error::CliError;
use crate::output::{record_doc, Doc, Value};

/// The columns of `op list` in table mode (JSON has every field).
const LIST_COLUMNS: &[&str] = &[
    "operation_id",
    "state",
    "stage",
    "version",
    "attempts",
    "tenant",
    "endpoint",
    "updated_at_ms",
];

/// `idemctl op list`: one page; `next_page_token` continues.
pub async fn list(client: &Client, args: ListArgs) -> Result<Doc, CliError> {
    let query = ListQuery {
        states: args.states.iter().map(|s| State::from(*s)).collect(),
        older_than: args.older_than,
        limit: args.limit,
        page_token: args.page_token,
        tenant: args.tenant,
        stuck: args.stuck,
    };
    let page = client.list_operations(&query).await?;
    let rows = page.records.iter().map(record_doc).collect();
    Ok(Doc::new()
        .with(
            "records",
            Value::Rows {
                rows,
                columns: LIST_COLUMNS,
            },
        )
        .with("next_page_token", page.next_page_token))
}

/// `idemctl op reconcile`: prints the record after the change.
pub async fn reconcile(client: &Client, args: ReconcileArgs) -> Result<Doc, CliError> {
    let target = match args.to {
        ReconcileTo::Completed => ReconcileTarget::Completed(stored_result(&args.result)?),
        ReconcileTo::RetryableFailure => {
            ReconcileTarget::RetryableFailure(error_summary(&args.error))
        }
        ReconcileTo::TerminalFailure => {
            ReconcileTarget::TerminalFailure(error_summary(&args.error).ok_or_else(|| {
                CliError::Usage("--to TERMINAL_FAILURE needs --error and/or --code".into())
            })?)
        }
        ReconcileTo::Cancelled => ReconcileTarget::Cancelled,
    };
    let decision = Reconciliation {
        operation_id: operation_id(&args.operation_id)?,
        expected_version: args.expected_version,
        target,
        reason: args.reason,
        operator: operator(args.operator),
    };
    Ok(record_doc(&client.reconcile(&decision).await?))
}

impl From<StateArg> for State {
    fn from(state: StateArg) -> Self {
        match state {
            StateArg::Pending => State::Pending,
            StateArg::InProgress => State::InProgress,
            StateArg::Completed => State::Completed,
            StateArg::RetryableFailure => State::RetryableFailure,
            StateArg::TerminalFailure => State::TerminalFailure,
            StateArg::Cancelled => State::Cancelled,
            StateArg::NeedsReconciliation => State::NeedsReconciliation,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn state_flags_use_the_api_names() {
        for arg in StateArg::value_variants() {
            let name = arg.to_possible_value().unwrap().get_name().to_owned();
            assert_eq!(State::from(*arg).name(), name);
        }
    }
}
