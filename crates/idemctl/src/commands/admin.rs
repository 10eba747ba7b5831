//! `idemctl purge` and `idemctl status`.

use idem_client::{Client, ClientError, NodeStatus};

use super::operator;
use crate::cli::PurgeArgs;
use crate::error::CliError;
use crate::output::{millis, Doc, Value};

/// The columns of the node table in table mode.
const NODE_COLUMNS: &[&str] = &[
    "endpoint",
    "node_id",
    "leader_id",
    "term",
    "commit_index",
    "applied_index",
    "region",
    "version",
    "failover",
    "error",
];

/// The columns of the member table in table mode.
const MEMBER_COLUMNS: &[&str] = &["id", "voter", "region", "zone", "api_addr", "raft_addr"];

/// `idemctl purge`.
pub async fn purge(client: &Client, args: PurgeArgs) -> Result<Doc, CliError> {
    let operator = operator(args.operator);
    let scrubbed = client
        .purge_subject(&args.tenant, &args.actor, &args.reason, &operator)
        .await?;
    Ok(Doc::new()
        .with("tenant", args.tenant)
        .with("actor", args.actor)
        .with("records_scrubbed", scrubbed))
}

/// `idemctl status`: every endpoint's view (one attempt each), and the membership seen by
/// the first that answered. Fails only when none answered.
pub async fn status(client: &Client) -> Result<Doc, CliError> {
    let mut rows = Vec::new();
    let mut members = None;
    let mut last_error = None;
    for endpoint in client.endpoints() {
        let shown = endpoint.trim_start_matches("http://").to_owned();
        match client.status_of(&endpoint).await {
            Ok(status) => {
                members.get_or_insert_with(|| member_rows(&status));
                rows.push(node_doc(shown, &status));
            }
            Err(error) => {
                rows.push(
                    Doc::new()
                        .with("endpoint", shown)
                        .with("error", error.to_string()),
                );
                last_error = Some(error);
            }
        }
    }
    let Some(members) = members else {
        return Err(last_error
            .unwrap_or(ClientError::Unavailable {
                message: "no endpoint".into(),
            })
            .into());
    };
    Ok(Doc::new()
        .with(
            "nodes",
            Value::Rows {
                rows,
                columns: NODE_COLUMNS,
            },
        )
        .with(
            "members",
            Value::Rows {
                rows: members,
                columns: MEMBER_COLUMNS,
            },
        ))
}

fn node_doc(endpoint: String, s: &NodeStatus) -> Doc {
    let by_state = s
        .records_by_state
        .iter()
        .fold(Doc::new(), |doc, (state, n)| doc.with(state, *n));
    Doc::new()
        .with("endpoint", endpoint)
        .with("node_id", s.node_id)
        .with("leader_id", s.leader_id)
        .with("term", s.term)
        .with("commit_index", s.commit_index)
        .with("applied_index", s.applied_index)
        .with("last_log_index", s.last_log_index)
        .with("region", s.region.as_str())
        .with("zone", s.zone.as_str())
        .with("version", s.version.as_str())
        .with("failover", s.failover)
        .with("oldest_pending_age_ms", s.oldest_pending_age.map(millis))
        .with("records_by_state", by_state)
        .with("error", Value::Null)
}

fn member_rows(s: &NodeStatus) -> Vec<Doc> {
    s.membership
        .iter()
        .map(|m| {
            Doc::new()
                .with("id", m.id)
                .with("voter", m.voter)
                .with("region", m.region.as_str())
                .with("zone", m.zone.as_str())
                .with("api_addr", m.api_addr.as_str())
                .with("raft_addr", m.raft_addr.as_str())
        })
        .collect()
}
