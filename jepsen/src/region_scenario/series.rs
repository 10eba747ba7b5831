//! A measured series of claim+complete on fresh keys, one at a time, through one node.
//!
//! Sequential on purpose: one request in flight measures the path (hops, replication
//! round trips), not queueing. A few unmeasured warm-up rounds first open the connections
//! (client to node, node to leader) so that no sample pays a TCP or HTTP/2 handshake.

use std::time::Duration;

use idem_core::{ClaimKind, RecordKey, Risk};
use serde::Serialize;

use super::context::Context;
use super::error::ScenarioError;
use super::node_client::NodeClient;
use super::summary::Summary;

/// Unmeasured rounds before a series.
const WARMUP: usize = 5;
/// Failures described in full in the report (all are counted).
const SHOWN_FAILURES: usize = 5;
/// The node metric showing whether forwarded requests left the node's region.
pub const CROSS_REGION_HOPS: &str = "idem_cross_region_hops_total";

/// One series' figures.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// The tenant whose keys were claimed.
    pub tenant: String,
    /// The node every request went to.
    pub node: usize,
    /// Claim latencies.
    pub claim: Summary,
    /// Complete latencies.
    pub complete: Summary,
    /// Claim plus complete, per key.
    pub claim_complete: Summary,
    /// Samples that did not acquire and complete.
    pub failed: usize,
    /// The first failures.
    pub failures: Vec<String>,
    /// How much the node's `idem_cross_region_hops_total` grew during the measured samples.
    pub cross_region_hops: f64,
    /// The keys acquired and completed (retried by the replay step).
    #[serde(skip)]
    pub completed: Vec<RecordKey>,
}

impl Series {
    /// Claims and completes `samples` fresh keys `<prefix>-<i>` of `tenant` through
    /// `client`, after [`WARMUP`] unmeasured rounds.
    pub async fn measure(
        ctx: &Context,
        client: &NodeClient,
        tenant: &str,
        prefix: &str,
        samples: usize,
    ) -> Result<Series, ScenarioError> {
        for key in ctx.keys(tenant, &format!("{prefix}-warmup"), WARMUP)? {
            let _ = claim_and_complete(client, &key).await;
        }
        let hops_before = ctx
            .observer
            .metric(client.node(), CROSS_REGION_HOPS)
            .await?;
        let (mut claims, mut completes, mut totals) = (Vec::new(), Vec::new(), Vec::new());
        let mut series = Series {
            tenant: tenant.to_owned(),
            node: client.node(),
            claim: Summary::default(),
            complete: Summary::default(),
            claim_complete: Summary::default(),
            failed: 0,
            failures: Vec::new(),
            cross_region_hops: 0.0,
            completed: Vec::new(),
        };
        for key in ctx.keys(tenant, prefix, samples)? {
            match claim_and_complete(client, &key).await {
                Ok((claim, complete)) => {
                    claims.push(claim);
                    completes.push(complete);
                    totals.push(claim + complete);
                    series.completed.push(key);
                }
                Err(failure) => {
                    series.failed += 1;
                    if series.failures.len() < SHOWN_FAILURES {
                        series.failures.push(failure);
                    }
                }
            }
        }
        let hops_after = ctx
            .observer
            .metric(client.node(), CROSS_REGION_HOPS)
            .await?;
        series.cross_region_hops = hops_after - hops_before;
        series.claim = Summary::of(&claims);
        series.complete = Summary::of(&completes);
        series.claim_complete = Summary::of(&totals);
        Ok(series)
    }
}

/// Claims `key` (NORMAL risk) and completes it; the two latencies, or what went wrong.
async fn claim_and_complete(
    client: &NodeClient,
    key: &RecordKey,
) -> Result<(Duration, Duration), String> {
    let name = key.key.as_str();
    let (claim_latency, claim) = client.claim(key, Risk::Normal).await;
    let claim = claim.map_err(|e| format!("{name}: claim: {e}"))?;
    let fence = match (claim.kind, claim.fence) {
        (ClaimKind::Acquired, Some(fence)) => fence,
        (kind, _) => return Err(format!("{name}: claim answered {}", kind.name())),
    };
    let (complete_latency, complete) = client.complete(key, fence).await;
    complete.map_err(|e| format!("{name}: complete: {e}"))?;
    Ok((claim_latency, complete_latency))
}
