//! openraft's own storage test suite against a fresh RocksDB store per case.

use idem_store::{LogStore, StateMachine, StateReader, TypeConfig};
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;
use tempfile::TempDir;

/// Builds stores in a temporary directory; the guard keeps the directory (and a reader)
/// alive for the duration of one case.
struct RocksBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, (StateReader, TempDir)> for RocksBuilder {
    async fn build(
        &self,
    ) -> Result<((StateReader, TempDir), LogStore, StateMachine), StorageError<TypeConfig>> {
        let dir = TempDir::new().map_err(|e| StorageError::read(TypeConfig::err_from_error(&e)))?;
        let (log, sm, reader) = idem_store::open(dir.path())
            .map_err(|e| StorageError::read(TypeConfig::err_from_error(&e)))?;
        Ok(((reader, dir), log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    TypeConfig::run(async {
        Suite::test_all(RocksBuilder).await.unwrap();
    });
}
