//! What every step works with: the cluster, the parts, the observer, clients pinned to nodes.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use idem_core::RecordKey;

use super::error::ScenarioError;
use super::node_client::{self, NodeClient};
use super::observer::Observer;
use super::roles::Roles;
use crate::cluster::regions::Regions;
use crate::cluster::Cluster;
use crate::history::{Recorder, Value};

/// Longest wait for one call: above the nodes' write bound (3 s), so that a node answers
/// `UNAVAILABLE_OUTCOME_UNKNOWN` itself before the client gives up.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The shared state of a scenario run.
pub struct Context {
    /// The emulated cluster.
    pub cluster: Arc<Cluster>,
    /// Groups, metrics, configuration changes.
    pub observer: Observer,
    /// Who plays which part.
    pub roles: Roles,
    /// Samples per measured series (and rounds of concurrent claims per tenant).
    pub samples: usize,
    recorder: Arc<Recorder>,
    processes: Arc<AtomicU64>,
}

impl Context {
    /// The context of a run over `cluster` whose global group is led by `global_leader`.
    pub fn new(
        cluster: Arc<Cluster>,
        recorder: Arc<Recorder>,
        samples: usize,
        global_leader: usize,
    ) -> Result<Context, ScenarioError> {
        let observer = Observer::new(&cluster.topology)?;
        let roles = Roles::choose(&cluster.regions, global_leader);
        Ok(Context {
            cluster,
            observer,
            roles,
            samples,
            recorder,
            processes: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The region placement.
    pub fn regions(&self) -> &Regions {
        &self.cluster.regions
    }

    /// The RTT between regions `a` and `b` (0-based), in ms.
    pub fn rtt_ms(&self, a: usize, b: usize) -> f64 {
        self.regions().rtt(a, b).as_secs_f64() * 1e3
    }

    /// A client pinned to node `node`.
    pub fn client(&self, node: usize) -> Result<NodeClient, ScenarioError> {
        NodeClient::new(
            node,
            &self.cluster.topology.api_addr(node),
            CALL_TIMEOUT,
            Arc::clone(&self.recorder),
            Arc::clone(&self.processes),
        )
    }

    /// `count` keys of `tenant` named `<prefix>-<i>`.
    pub fn keys(
        &self,
        tenant: &str,
        prefix: &str,
        count: usize,
    ) -> Result<Vec<RecordKey>, ScenarioError> {
        (0..count)
            .map(|i| node_client::key(tenant, &format!("{prefix}-{i}")))
            .collect()
    }

    /// Records a nemesis entry (`start-partition`, `stop-partition`) in the history, so the
    /// checkers and plots know the fault window.
    pub fn nemesis(&self, f: &str, description: &str) {
        eprintln!("nemesis: {f} {description}");
        self.recorder.nemesis(f, Value::str(description));
    }
}
