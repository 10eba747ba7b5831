//! One Raft group on this node: its store, its Raft instance, its backend.

use std::path::PathBuf;
use std::sync::Arc;

use idem_core::placement::GroupId;
use idem_core::Placement;

use crate::failpoint::Failpoints;
use crate::node::error::NodeError;
use crate::replica::{GroupPlace, Raft, Replica, Shared};

/// What every group of a node is built from.
#[derive(Clone)]
pub struct GroupKit {
    /// This node's id.
    pub node_id: u64,
    /// This node's region.
    pub region: String,
    /// The node's data directory.
    pub data_dir: PathBuf,
    /// Raft timings, the same for every group.
    pub raft_config: Arc<openraft::Config>,
    /// The node's Raft network; each group uses a view of it, so connections are shared.
    pub network: idem_raft::Network,
    /// Bounds, metrics and connections shared by the backends.
    pub shared: Shared,
    /// Crash failpoints (tests only).
    pub failpoints: Failpoints,
}

impl GroupKit {
    /// Where a group keeps its RocksDB and snapshots: the data directory itself for the
    /// global group (the single-group layout), `groups/<id>` below it for region groups.
    pub fn dir_of(&self, group: GroupId) -> PathBuf {
        idem_store::group_dir(&self.data_dir, group)
    }
}

/// A Raft group this node is a replica of.
pub struct Group {
    id: GroupId,
    backend: Arc<Replica>,
}

impl Group {
    /// Opens the group's store and starts its Raft instance (not yet initialized when new).
    pub async fn open(kit: &GroupKit, id: GroupId) -> Result<Group, NodeError> {
        let dir = kit.dir_of(id);
        let (log, state_machine, reader) =
            tokio::task::spawn_blocking(move || idem_store::open(&dir))
                .await
                .map_err(|e| NodeError::Raft(format!("opening the store of group {id}: {e}")))??;
        let raft = Raft::new(
            kit.node_id,
            Arc::clone(&kit.raft_config),
            kit.network.for_group(id),
            log,
            state_machine,
        )
        .await
        .map_err(|e| NodeError::Raft(format!("starting group {id}: {e}")))?;
        let place = GroupPlace {
            group: id,
            node_id: kit.node_id,
            region: kit.region.clone(),
        };
        let backend = Replica::new(raft, reader, place, kit.shared.clone())
            .with_failpoints(kit.failpoints.clone());
        Ok(Group {
            id,
            backend: Arc::new(backend),
        })
    }

    /// The group id.
    pub fn id(&self) -> GroupId {
        self.id
    }

    /// The backend proposing to and reading from this group.
    pub fn backend(&self) -> &Arc<Replica> {
        &self.backend
    }

    /// The Raft handle.
    pub fn raft(&self) -> &Raft {
        self.backend.raft()
    }

    /// The placement state this node has applied.
    pub fn placement(&self) -> Arc<Placement> {
        self.backend.reader().placement()
    }
}
