//! `idemctl member …`, `idemctl leader transfer` and `idemctl cluster status`.
//!
//! Membership commands go to any endpoint: the node forwards them to the leader, which
//! answers with its replication view (matched index, lag). `cluster status` instead asks
//! every member itself (one attempt each, in parallel), because during an incident the
//! question is precisely which nodes answer and what each one believes; its group table is
//! one node's `ListGroups` view (leader, leader region, home or not, failover per group).

use idem_client::{Client, ClientError, Member, MemberProgress, Membership, NodeStatus};
use tokio::task::JoinSet;

use super::regions::{group_row, resolve_group, GROUP_COLUMNS};
use crate::cli::{LeaderTransferArgs, MemberAddArgs};
use crate::error::CliError;
use crate::output::{Doc, Value};

/// The columns of the member table in table mode.
const MEMBER_COLUMNS: &[&str] = &[
    "id",
    "voter",
    "region",
    "zone",
    "api_addr",
    "raft_addr",
    "matched_index",
    "lag",
];

/// The columns of the node table in table mode.
const NODE_COLUMNS: &[&str] = &[
    "id",
    "region",
    "role",
    "leader",
    "term",
    "commit",
    "applied",
    "lag",
    "reachable",
];

/// `idemctl member list`.
pub async fn list(client: &Client) -> Result<Doc, CliError> {
    Ok(members_doc(&client.list_members().await?))
}

/// `idemctl member add`.
pub async fn add(client: &Client, args: MemberAddArgs) -> Result<Doc, CliError> {
    let member = Member {
        id: args.id,
        region: args.region,
        zone: args.zone,
        raft_addr: args.raft_addr,
        api_addr: args.api_addr,
        voter: false,
    };
    let membership = client.add_member(member).await?;
    Ok(members_doc(&membership).with("caught_up", membership.caught_up))
}

/// `idemctl member promote`.
pub async fn promote(client: &Client, id: u64) -> Result<Doc, CliError> {
    Ok(members_doc(&client.promote_member(id).await?))
}

/// `idemctl member remove`.
pub async fn remove(client: &Client, id: u64) -> Result<Doc, CliError> {
    Ok(members_doc(&client.remove_member(id).await?))
}

/// `idemctl leader transfer`.
pub async fn transfer(client: &Client, args: LeaderTransferArgs) -> Result<Doc, CliError> {
    let group = resolve_group(client, &args.group).await?;
    let leader = client.transfer_leader_in(group, args.id).await?;
    Ok(Doc::new().with("leader_id", leader).with("group", group))
}

/// `idemctl cluster status`: the membership from any node, then every member's own status,
/// then every group as one node sees it (`groups_error` instead when that node could not
/// tell, e.g. a node without region support).
pub async fn status(client: &Client) -> Result<Doc, CliError> {
    let membership = client.status().await?.membership;
    let groups = {
        let client = client.clone();
        tokio::spawn(async move { client.list_groups().await })
    };
    let mut asks = JoinSet::new();
    for member in membership.clone() {
        let client = client.clone();
        asks.spawn(async move {
            let answer = client.status_of(&member.api_addr).await;
            (member, answer)
        });
    }
    let mut answers: Vec<(Member, Result<NodeStatus, ClientError>)> =
        asks.join_all().await.into_iter().collect();
    answers.sort_by_key(|(m, _)| m.id);
    let leader_commit = leader_commit(&answers);
    let rows = answers
        .iter()
        .map(|(member, answer)| node_row(member, answer, leader_commit))
        .collect();
    let doc = Doc::new().with(
        "nodes",
        Value::Rows {
            rows,
            columns: NODE_COLUMNS,
        },
    );
    let groups = groups.await.unwrap_or_else(|e| {
        Err(ClientError::Unavailable {
            message: format!("ListGroups task: {e}"),
        })
    });
    Ok(match groups {
        Ok(groups) => doc.with("groups_seen_by", groups.node_id).with(
            "groups",
            Value::Rows {
                rows: groups.groups.iter().map(group_row).collect(),
                columns: GROUP_COLUMNS,
            },
        ),
        Err(error) => doc.with("groups_error", error.to_string()),
    })
}

/// The commit index of the node that says it leads, else the highest one seen.
fn leader_commit(answers: &[(Member, Result<NodeStatus, ClientError>)]) -> u64 {
    let reached = answers.iter().filter_map(|(_, a)| a.as_ref().ok());
    let leader = reached
        .clone()
        .find(|s| s.leader_id == Some(s.node_id))
        .map(|s| s.commit_index);
    leader.unwrap_or_else(|| reached.map(|s| s.commit_index).max().unwrap_or(0))
}

fn node_row(member: &Member, answer: &Result<NodeStatus, ClientError>, leader_commit: u64) -> Doc {
    let row = Doc::new()
        .with("id", member.id)
        .with("region", member.region.as_str())
        .with("api_addr", member.api_addr.as_str());
    match answer {
        Ok(s) => {
            let role = if s.leader_id == Some(s.node_id) {
                "leader"
            } else if member.voter {
                "follower"
            } else {
                "learner"
            };
            row.with("role", role)
                .with("leader", s.leader_id)
                .with("term", s.term)
                .with("commit", s.commit_index)
                .with("applied", s.applied_index)
                .with("lag", leader_commit.saturating_sub(s.applied_index))
                .with("reachable", true)
                .with("error", Value::Null)
        }
        Err(error) => row
            .with("role", if member.voter { "voter" } else { "learner" })
            .with("leader", Value::Null)
            .with("term", Value::Null)
            .with("commit", Value::Null)
            .with("applied", Value::Null)
            .with("lag", Value::Null)
            .with("reachable", false)
            .with("error", error.to_string()),
    }
}

fn members_doc(membership: &Membership) -> Doc {
    let rows = membership.members.iter().map(member_row).collect();
    Doc::new().with(
        "members",
        Value::Rows {
            rows,
            columns: MEMBER_COLUMNS,
        },
    )
}

fn member_row(m: &MemberProgress) -> Doc {
    Doc::new()
        .with("id", m.member.id)
        .with("voter", m.member.voter)
        .with("region", m.member.region.as_str())
        .with("zone", m.member.zone.as_str())
        .with("api_addr", m.member.api_addr.as_str())
        .with("raft_addr", m.member.raft_addr.as_str())
        .with("matched_index", m.matched_index)
        .with("lag", m.lag)
}
