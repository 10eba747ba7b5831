//! The placement a reader sees is published by the state machine (not read from RocksDB
//! per call): it must follow every apply that changes it, be visible no later than the
//! index that changed it, and survive a restart.

mod common;

use common::{apply, entries, membership, NODE};
use idem_core::placement::{ClusterChange, Mode};
use idem_core::{Command, Timestamp};
use idem_store::Request;
use tempfile::TempDir;

fn change(change: ClusterChange, stamp: u64) -> Request {
    Request {
        stamp: Timestamp(stamp),
        command: Command::Cluster(change),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn applied_placement_is_published_before_the_index_and_survives_restart() {
    let dir = TempDir::new().unwrap();
    {
        let (_log, mut sm, reader) = idem_store::open(dir.path()).unwrap();
        assert_eq!(reader.placement().cluster.mode, Mode::Global);
        let mut applied = reader.subscribe();
        let requests = [
            change(ClusterChange::SetMode(Mode::RegionAffinity), 1_000),
            change(ClusterChange::AddRegion { name: "eu".into() }, 2_000),
        ];
        let mut all = vec![membership(1, 1, &[NODE])];
        all.extend(entries(1, 2, &requests));
        apply(&mut sm, all).await;
        // Whoever sees the new index sees the placement that index produced.
        assert_eq!(*applied.borrow_and_update(), 3);
        let placement = reader.placement();
        assert_eq!(placement.cluster.mode, Mode::RegionAffinity);
        assert!(placement.cluster.regions.contains_key("eu"));

        // An entry that does not touch placement leaves the published value alone.
        let other = change(ClusterChange::SetMode(Mode::RegionAffinity), 3_000);
        apply(&mut sm, entries(1, 4, &[other])).await;
        assert!(reader.placement().cluster.regions.contains_key("eu"));
    }
    let (_log, _sm, reader) = idem_store::open(dir.path()).unwrap();
    let placement = reader.placement();
    assert_eq!(placement.cluster.mode, Mode::RegionAffinity);
    assert!(placement.cluster.regions.contains_key("eu"));
}
