//! Directories whose existence survives a power loss.
//!
//! `create_dir_all` makes a directory visible, not durable: its entry lives in the parent
//! directory, which is made durable only by an fsync of the parent. RocksDB fsyncs inside
//! its own directory, and the snapshot store fsyncs the snapshot directory after each
//! rename, but neither knows whether its directory itself is on disk. A fresh node that
//! lost power right after its first acknowledged write could come back without `db/` at
//! all (the fault filesystem's strict mode shows it; ext4's journal usually hides it).

use std::fs::File;
use std::io;
use std::path::Path;

/// Creates `path` and any missing parents, then fsyncs each directory it created and the
/// directory that holds it.
pub(crate) fn create_durable(path: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = path.ancestors().take_while(|p| !p.exists()).collect();
    std::fs::create_dir_all(path)?;
    for dir in missing.iter().rev() {
        sync(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync(parent)?;
        }
    }
    Ok(())
}

/// Makes the entries of `dir` durable.
pub(crate) fn sync(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_missing_parents_and_accepts_existing_ones() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        create_durable(&deep).unwrap();
        assert!(deep.is_dir());
        create_durable(&deep).unwrap();
    }
}
