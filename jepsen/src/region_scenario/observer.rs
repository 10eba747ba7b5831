//! The scenario's view of the cluster: groups as a given node sees them, node metrics, and
//! waiting for a state.
//!
//! Group state is read from one named node at a time (`ListGroups` on that node, one
//! attempt): during a partition "the cluster's view" does not exist, and the figures are
//! about what the majority side sees. Configuration changes go through a retrying client,
//! since they are idempotent and the scenario cannot go on without them.

use std::future::Future;
use std::time::{Duration, Instant};

use idem_client::{Client, ClientOptions, GroupStatus, Groups};
use idem_core::placement::GroupId;

use super::error::ScenarioError;
use crate::cluster::health;
use crate::cluster::netns::Topology;
use crate::cluster::security::Access;
use crate::http;

/// How often a waited-for state is probed.
const POLL: Duration = Duration::from_millis(100);

/// Admin access to the cluster.
pub struct Observer {
    topology: Topology,
    probe: Client,
    config: Client,
}

impl Observer {
    /// An observer of `topology`'s nodes.
    pub fn new(topology: &Topology) -> Result<Observer, ScenarioError> {
        let endpoints: Vec<String> = topology.ids().map(|i| topology.api_addr(i)).collect();
        let config = Client::connect(
            endpoints,
            ClientOptions {
                request_timeout: Duration::from_secs(10),
                ..ClientOptions::default()
            },
        )
        .map_err(ScenarioError::admin("admin client"))?;
        Ok(Observer {
            topology: topology.clone(),
            // The scenario's cluster is plaintext (`cluster::manage::spec`).
            probe: health::admin_client(topology, &Access::default())?,
            config,
        })
    }

    /// The retrying client for configuration changes.
    pub fn config(&self) -> &Client {
        &self.config
    }

    /// Every group as node `node` sees it.
    pub async fn groups_of(&self, node: usize) -> Result<Groups, ScenarioError> {
        self.probe
            .list_groups_of(&self.topology.api_addr(node))
            .await
            .map_err(ScenarioError::admin(format!("ListGroups on n{node}")))
    }

    /// Group `group` as node `node` sees it.
    pub async fn group_of(&self, node: usize, group: GroupId) -> Result<GroupStatus, String> {
        let groups = self.groups_of(node).await.map_err(|e| e.to_string())?;
        groups
            .group(group)
            .cloned()
            .ok_or_else(|| format!("n{node} does not know group {group} yet"))
    }

    /// The global group's leader a majority of the nodes agree on.
    pub async fn global_leader(&self) -> Option<usize> {
        let ids: Vec<usize> = self.topology.ids().collect();
        health::leader(&self.probe, &self.topology, &ids).await
    }

    /// The sum of metric `name` over its label sets on node `node` (0 when the node exports
    /// no sample of it yet: counters with labels appear on their first increment).
    pub async fn metric(&self, node: usize, name: &str) -> Result<f64, ScenarioError> {
        let addr = self.topology.http_addr(node);
        match http::request(&addr, "GET", "/metrics", Duration::from_secs(2)).await {
            Ok((200, text)) => Ok(sum_metric(&text, name)),
            Ok((status, _)) => Err(ScenarioError::Observation(format!(
                "GET http://{addr}/metrics answered {status}"
            ))),
            Err(e) => Err(ScenarioError::Observation(format!("{e:#}"))),
        }
    }
}

/// Probes every 100 ms until `probe` answers `Ok`, for at most `within`; returns its value
/// and the time it took. `Err` answers say what the probe saw (kept for the timeout error).
pub async fn wait_for<T, F, Fut>(
    what: &str,
    within: Duration,
    mut probe: F,
) -> Result<(T, Duration), ScenarioError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    loop {
        let last = match probe().await {
            Ok(value) => return Ok((value, started.elapsed())),
            Err(seen) => seen,
        };
        if started.elapsed() >= within {
            return Err(ScenarioError::Timeout {
                what: what.to_owned(),
                within,
                last,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The sum of the samples of metric `name` in a Prometheus text page.
pub fn sum_metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|line| line.strip_prefix(name))
        .filter(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_summed_over_labels_and_not_confused_with_longer_names() {
        let page = "# HELP idem_local_replays_total Claims...\n\
                    # TYPE idem_local_replays_total counter\n\
                    idem_local_replays_total 12\n\
                    idem_local_replays_total_extra 99\n\
                    idem_cross_region_hops_total{kind=\"write\"} 3\n\
                    idem_cross_region_hops_total{kind=\"read\"} 2\n";
        assert_eq!(sum_metric(page, "idem_local_replays_total"), 12.0);
        assert_eq!(sum_metric(page, "idem_cross_region_hops_total"), 5.0);
        assert_eq!(sum_metric(page, "idem_missing"), 0.0);
    }

    #[tokio::test]
    async fn waits_report_what_they_last_saw() {
        let mut n = 0;
        let (value, _) = wait_for("three probes", Duration::from_secs(5), || {
            n += 1;
            let seen = n;
            async move { (seen >= 3).then_some(seen).ok_or(format!("n = {seen}")) }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
        let timeout = wait_for("never", Duration::ZERO, || async {
            Err::<(), _>("nothing".to_owned())
        })
        .await
        .unwrap_err();
        assert!(
            timeout.to_string().contains("last seen: nothing"),
            "{timeout}"
        );
    }
}
