//! The data directory and its identity file.
//!
//! `node.toml` records the node id the directory belongs to; starting it under another id is
//! refused (exit code 2), because a Raft log reused under a different identity would corrupt
//! a cluster.

use std::io;
use std::path::Path;

use super::error::NodeError;

/// Name of the identity file in the data directory.
pub const IDENTITY_FILE: &str = "node.toml";
/// Creates the data directory and checks (or writes) its identity file.
pub(super) fn claim_data_dir(dir: &Path, node_id: u64) -> Result<(), NodeError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NodeError::DataDir { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = dir.join(IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let found = text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("node_id").and_then(toml::Value::as_integer))
                .and_then(|id| u64::try_from(id).ok())
                .ok_or_else(|| NodeError::DataDir {
                    path: path.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, "expected `node_id = <id>`"),
                })?;
            if found != node_id {
                return Err(NodeError::IdentityMismatch {
                    path: dir.to_path_buf(),
                    found,
                    configured: node_id,
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let text = format!(
                "# Written by idemd {} when this data directory was first used.\n# The Raft log here belongs to this node id: never start it under another.\nnode_id = {node_id}\n",
                crate::VERSION
            );
            let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
            write_synced(&tmp, &text).map_err(io_error(&tmp))?;
            std::fs::rename(&tmp, &path).map_err(io_error(&path))?;
            // The rename, and the directory itself on first use, are durable only once the
            // directories holding their entries are synced.
            sync_dir(dir).map_err(io_error(dir))?;
            match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(parent) => sync_dir(parent).map_err(io_error(parent)),
                None => Ok(()),
            }
        }
        Err(e) => Err(NodeError::DataDir { path, source: e }),
    }
}

/// Writes `text` to a new file at `path` and fsyncs it: a power loss right after the
/// identity file is first written must not leave it empty (the node would refuse to start;
/// found by the jepsen power-loss nemesis).
fn write_synced(path: &Path, text: &str) -> io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    io::Write::write_all(&mut file, text.as_bytes())?;
    file.sync_all()
}

/// Makes the entries of directory `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
