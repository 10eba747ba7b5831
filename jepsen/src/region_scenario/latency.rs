//! Step 1: claim latency in global mode against region-affinity mode, same client, same
//! node.
//!
//! Global mode first (a new cluster is in it): a client in a region without the global
//! leader claims and completes fresh keys of a tenant without a home through a node of its
//! own region; that node forwards each request across regions to the global leader, which
//! replicates it to a majority. Then the regions are defined (`r1`, `r2`, `r3` in that
//! order, so group `i` is homed in `ri`), the mode is switched to region-affinity, a tenant
//! is bound to the client's region, and — once every region group is led from its home —
//! the same client measures the same through the same node for that tenant. The group's
//! leader is now in the client's region: the forwarding hop across regions disappears, while
//! replication still crosses regions (a majority of 5 nodes spans two regions). The design
//! expects about one inter-region RTT (client's region to the global leader's) saved per
//! round trip, so two per claim+complete; `idem_cross_region_hops_total` on the node shows
//! the hop going away.

use std::time::Duration;

use idem_core::placement::{GroupId, Mode};
use serde::Serialize;

use super::context::Context;
use super::error::ScenarioError;
use super::observer::wait_for;
use super::report::Report;
use super::series::Series;
use super::summary::{round, Saving};
use crate::cluster::regions::Regions;

/// How long region groups may take to be led from home after the binding.
const SETTLE: Duration = Duration::from_secs(60);

/// The figures of step 1.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyFigures {
    /// The client's node.
    pub node: usize,
    /// The client's region.
    pub region: String,
    /// The global group's leader during the global series.
    pub global_leader: usize,
    /// Its region.
    pub global_leader_region: String,
    /// RTT between the client's region and the global leader's, in ms.
    pub rtt_to_global_leader_ms: f64,
    /// Global mode, a tenant without a home.
    pub global: Series,
    /// The bound tenant's group.
    pub group: GroupId,
    /// Its leader during the affinity series.
    pub group_leader: usize,
    /// From the binding until every region group was led from home, as the client's node
    /// saw it, in ms.
    pub groups_home_after_ms: f64,
    /// Region-affinity mode, the bound tenant.
    pub affinity: Series,
    /// What affinity saves on claim+complete.
    pub saving: Saving,
    /// What affinity saves on the claim alone.
    pub claim_saving: Saving,
    /// Median saving on claim+complete per round trip (two round trips), in ms.
    pub saving_per_round_trip_ms: f64,
}

/// Runs step 1 and adds its checks to `report`.
pub async fn run(ctx: &Context, report: &mut Report) -> Result<LatencyFigures, ScenarioError> {
    let roles = &ctx.roles;
    let client = ctx.client(roles.client_node)?;
    eprintln!(
        "latency: global mode, {} through n{} ({}), global leader n{}",
        roles.global_tenant, roles.client_node, roles.home_region, roles.global_leader
    );
    let global = Series::measure(ctx, &client, &roles.global_tenant, "global", ctx.samples).await?;
    let global_leader = ctx
        .observer
        .global_leader()
        .await
        .unwrap_or(roles.global_leader);

    let group = configure_affinity(ctx).await?;
    let (group_leader, home_after) = wait_for(
        "every region group led from its home region",
        SETTLE,
        || groups_at_home(ctx, group),
    )
    .await?;
    eprintln!(
        "latency: affinity mode, {} homed in {} (group {group}, leader n{group_leader})",
        roles.bound_tenant, roles.home_region
    );
    let affinity =
        Series::measure(ctx, &client, &roles.bound_tenant, "affinity", ctx.samples).await?;

    let leader_region = ctx.regions().region_of(global_leader);
    let rtt = ctx.rtt_ms(roles.home, leader_region);
    let saving = affinity
        .claim_complete
        .saving_against(&global.claim_complete);
    let figures = LatencyFigures {
        node: roles.client_node,
        region: roles.home_region.clone(),
        global_leader,
        global_leader_region: Regions::name(leader_region),
        rtt_to_global_leader_ms: rtt,
        claim_saving: affinity.claim.saving_against(&global.claim),
        saving,
        saving_per_round_trip_ms: round(saving.median_ms / 2.0),
        group,
        group_leader,
        groups_home_after_ms: round(home_after.as_secs_f64() * 1e3),
        global,
        affinity,
    };
    add_checks(&figures, ctx.samples, report);
    Ok(figures)
}

/// `region add` for every region, mode region-affinity, the bound tenant bound to the
/// client's region; returns the tenant's group.
async fn configure_affinity(ctx: &Context) -> Result<GroupId, ScenarioError> {
    let admin = ctx.observer.config();
    for region in 0..ctx.regions().count() {
        let name = Regions::name(region);
        admin
            .add_region(&name)
            .await
            .map_err(ScenarioError::admin(format!("region add {name}")))?;
    }
    admin
        .set_mode(Mode::RegionAffinity)
        .await
        .map_err(ScenarioError::admin("cluster mode region-affinity"))?;
    let roles = &ctx.roles;
    let config = admin
        .bind_tenant(&roles.bound_tenant, &roles.home_region)
        .await
        .map_err(ScenarioError::admin(format!(
            "tenant bind {} --home {}",
            roles.bound_tenant, roles.home_region
        )))?;
    Ok(config.group_of(&roles.bound_tenant))
}

/// `Ok(leader of group)` once the client's node knows the binding and sees every region
/// group led from its home region.
async fn groups_at_home(ctx: &Context, group: GroupId) -> Result<usize, String> {
    let groups = ctx
        .observer
        .groups_of(ctx.roles.client_node)
        .await
        .map_err(|e| e.to_string())?;
    if groups.config.group_of(&ctx.roles.bound_tenant) != group {
        return Err(format!(
            "n{} has not applied the binding yet",
            groups.node_id
        ));
    }
    let regional: Vec<_> = groups.groups.iter().filter(|g| !g.is_global()).collect();
    let away: Vec<String> = regional
        .iter()
        .filter(|g| g.leader_id.is_none() || !g.leader_home)
        .map(|g| {
            format!(
                "group {} leader {:?} in {:?}",
                g.group, g.leader_id, g.leader_region
            )
        })
        .collect();
    if regional.len() < ctx.regions().count() || !away.is_empty() {
        return Err(format!(
            "{} of {} region groups known; not at home: {}",
            regional.len(),
            ctx.regions().count(),
            away.join(", ")
        ));
    }
    groups
        .group(group)
        .and_then(|g| g.leader_id)
        .map(|id| id as usize)
        .ok_or_else(|| format!("group {group} has no leader"))
}

fn add_checks(f: &LatencyFigures, samples: usize, report: &mut Report) {
    for (mode, series) in [("global", &f.global), ("affinity", &f.affinity)] {
        report.check(
            "latency",
            format!("every {mode}-mode claim acquired and completed"),
            series.failed == 0 && series.claim_complete.samples == samples,
            format!(
                "{} of {samples} through n{} ({} tenant {}){}",
                series.claim_complete.samples,
                series.node,
                mode,
                series.tenant,
                first_failure(series)
            ),
        );
    }
    report.check(
        "latency",
        "affinity saves at least half an inter-region RTT per round trip (medians)",
        f.saving_per_round_trip_ms >= f.rtt_to_global_leader_ms / 2.0,
        format!(
            "claim+complete median {} ms global, {} ms affinity: {} ms saved, {} ms per round trip (RTT {} to {} = {} ms)",
            f.global.claim_complete.median_ms,
            f.affinity.claim_complete.median_ms,
            f.saving.median_ms,
            f.saving_per_round_trip_ms,
            f.region,
            f.global_leader_region,
            f.rtt_to_global_leader_ms
        ),
    );
    report.check(
        "latency",
        "global mode crosses regions, affinity mode does not (idem_cross_region_hops_total)",
        f.global.cross_region_hops >= samples as f64 && f.affinity.cross_region_hops == 0.0,
        format!(
            "on n{}: +{} during the global series, +{} during the affinity series (group {} led by n{})",
            f.node, f.global.cross_region_hops, f.affinity.cross_region_hops, f.group, f.group_leader
        ),
    );
}

fn first_failure(series: &Series) -> String {
    series
        .failures
        .first()
        .map(|f| format!("; first failure: {f}"))
        .unwrap_or_default()
}
