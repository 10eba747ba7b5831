//! Step 3: concurrent first claims of one key from all three regions.
//!
//! One client per region, each pinned to a node of its own region, claims the same fresh
//! key at the same moment; the nodes forward to the key's group leader, wherever it is, and
//! the log orders the three claims: exactly one may be ACQUIRED, the others see the winner's
//! record (IN_PROGRESS). Run for the bound tenant (decided by its region group, two of the
//! three requests cross regions) and for a tenant without a home (decided by the global
//! group), many rounds each; the winner completes its key so that later steps see only
//! terminal records.

use idem_core::{ClaimKind, Risk};
use serde::Serialize;
use tokio::task::JoinSet;

use super::call_error::CallError;
use super::context::Context;
use super::error::ScenarioError;
use super::node_client::{Claimed, NodeClient};
use super::report::Report;
use super::summary::Summary;

/// Violations described in full (all are counted).
const SHOWN: usize = 5;

/// One tenant's rounds.
#[derive(Debug, Clone, Serialize)]
pub struct RaceFigures {
    /// The tenant.
    pub tenant: String,
    /// The nodes claiming, one per region.
    pub nodes: Vec<usize>,
    /// Rounds run (one fresh key each).
    pub rounds: usize,
    /// Rounds with exactly one ACQUIRED and every other claim answered.
    pub one_winner: usize,
    /// Rounds that were not.
    pub violations: usize,
    /// The first of them.
    pub shown: Vec<String>,
    /// Latency of every claim.
    pub claims: Summary,
}

/// Runs step 3 for `tenant`.
pub async fn run(
    ctx: &Context,
    tenant: &str,
    report: &mut Report,
) -> Result<RaceFigures, ScenarioError> {
    let nodes = ctx.roles.race_nodes.clone();
    let clients = nodes
        .iter()
        .map(|&n| ctx.client(n))
        .collect::<Result<Vec<NodeClient>, _>>()?;
    eprintln!("race: {} rounds of {tenant} through {nodes:?}", ctx.samples);
    let mut figures = RaceFigures {
        tenant: tenant.to_owned(),
        nodes,
        rounds: 0,
        one_winner: 0,
        violations: 0,
        shown: Vec::new(),
        claims: Summary::default(),
    };
    let mut latencies = Vec::new();
    for key in ctx.keys(tenant, "race", ctx.samples)? {
        let mut claims = JoinSet::new();
        for client in &clients {
            let (client, key) = (client.clone(), key.clone());
            claims.spawn(async move {
                let (latency, answer) = client.claim(&key, Risk::Normal).await;
                (client, latency, answer)
            });
        }
        let mut answers: Vec<(NodeClient, Result<Claimed, CallError>)> = Vec::new();
        for (client, latency, answer) in claims.join_all().await {
            latencies.push(latency);
            answers.push((client, answer));
        }
        figures.rounds += 1;
        let winners: Vec<&(NodeClient, Result<Claimed, CallError>)> = answers
            .iter()
            .filter(|(_, a)| a.as_ref().is_ok_and(|c| c.kind == ClaimKind::Acquired))
            .collect();
        let all_answered = answers.iter().all(|(_, a)| a.is_ok());
        if winners.len() == 1 && all_answered {
            figures.one_winner += 1;
        } else {
            figures.violations += 1;
            if figures.shown.len() < SHOWN {
                figures.shown.push(describe(key.key.as_str(), &answers));
            }
        }
        for (client, answer) in winners {
            if let Ok(Claimed {
                fence: Some(fence), ..
            }) = answer
            {
                let _ = client.complete(&key, *fence).await;
            }
        }
    }
    figures.claims = Summary::of(&latencies);
    report.check(
        "race",
        format!(
            "concurrent first claims from every region: exactly one ACQUIRED per key ({tenant})"
        ),
        figures.rounds == ctx.samples && figures.violations == 0,
        format!(
            "{} of {} rounds through {:?}{}",
            figures.one_winner,
            figures.rounds,
            figures.nodes,
            figures
                .shown
                .first()
                .map(|s| format!("; first violation: {s}"))
                .unwrap_or_default()
        ),
    );
    Ok(figures)
}

fn describe(key: &str, answers: &[(NodeClient, Result<Claimed, CallError>)]) -> String {
    let parts: Vec<String> = answers
        .iter()
        .map(|(client, answer)| match answer {
            Ok(claim) => format!("n{} {}", client.node(), claim.kind.name()),
            Err(error) => format!("n{} {error}", client.node()),
        })
        .collect();
    format!("{key}: {}", parts.join(", "))
}
