//! First start or restart: initialize the global group, wait to be replicated to, or recover
//! from the log (the rule is [`crate::config::cluster`]'s).

use std::time::Duration;

use openraft::error::{InitializeError, RaftError};

use super::error::NodeError;
use super::node_info;
use crate::config::cluster::Bootstrap;
use crate::config::Config;
use crate::replica::Raft;

/// How long a restarted node may take to re-apply its committed log before serving.
pub(super) const RECOVERY_TIMEOUT: Duration = Duration::from_secs(300);
/// Recovers on restarts; on a first start initializes the group or waits, by the
/// [`Bootstrap`] rule of the `[cluster]` section.
pub(super) async fn run(raft: &Raft, config: &Config) -> Result<(), NodeError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    if initialized {
        tracing::info!("existing raft state found; recovering from the log");
        raft.wait_for_recovery(Some(RECOVERY_TIMEOUT))
            .await
            .map_err(|e| NodeError::Raft(format!("recovering the state machine: {e}")))?;
        return Ok(());
    }
    let members = match config.cluster.bootstrap(config.node_id, node_info(config)) {
        Bootstrap::Wait => {
            tracing::info!(
                node_id = config.node_id,
                join = config.cluster.join,
                "no raft state; waiting to be replicated to by the leader"
            );
            return Ok(());
        }
        Bootstrap::Initialize(members) => members,
    };
    let ids: Vec<u64> = members.keys().copied().collect();
    tracing::info!(node_id = config.node_id, members = ?ids, "no raft state; initializing the group");
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        // Someone initialized it in the meantime: the goal is reached.
        Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(NodeError::Raft(format!("bootstrapping: {e}"))),
    }
}
