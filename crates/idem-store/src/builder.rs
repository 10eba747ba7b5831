//! The snapshot builder openraft runs (possibly concurrently with apply).
//!
//! Building reads through a RocksDB snapshot, so the dump is a consistent cut even while
//! new batches are applied; the result becomes the current snapshot (see
//! the `snapshot` module).

use std::io;
use std::sync::Arc;

use openraft::RaftSnapshotBuilder;

use crate::db::blocking;
use crate::snapshot::SnapshotStore;
use crate::types::{Snapshot, SnapshotData, TypeConfig};

/// Builds snapshots of the state machine.
pub struct SnapshotBuilder {
    snapshots: Arc<SnapshotStore>,
}

impl SnapshotBuilder {
    /// A builder publishing into `snapshots`.
    pub(crate) fn new(snapshots: Arc<SnapshotStore>) -> Self {
        SnapshotBuilder { snapshots }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let snapshots = self.snapshots.clone();
        let snapshot = blocking(move || snapshots.build()).await?;
        tracing::info!(
            last_log_id = ?snapshot.meta.last_log_id,
            bytes = snapshot.snapshot.len(),
            "built a snapshot"
        );
        Ok(snapshot)
    }
}
