//! The data directory and its identity file.
//!
//! `node.toml` records the node id the directory belongs to and the on-disk format
//! version of its data ([`DATA_FORMAT_VERSION`]). Starting it under another id is refused
//! (exit code 2), because a Raft log reused under a different identity would corrupt a
//! cluster; so is starting it with a release older than its format (exit code 2), because
//! an older release would misread it. A file without `data_format` was written before the
//! marker existed, by a release of format 1.

use std::io;
use std::path::Path;

use idem_store::DATA_FORMAT_VERSION;

use super::error::NodeError;

/// Name of the identity file in the data directory.
pub const IDENTITY_FILE: &str = "node.toml";
/// The key of the on-disk format version in [`IDENTITY_FILE`].
pub const DATA_FORMAT_KEY: &str = "data_format";
/// The format of a directory whose identity file has no [`DATA_FORMAT_KEY`].
const UNMARKED_FORMAT: u32 = 1;

/// Creates the data directory and checks (or writes) its identity file.
pub(super) fn claim_data_dir(dir: &Path, node_id: u64) -> Result<(), NodeError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NodeError::DataDir { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = dir.join(IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => check_identity(dir, &path, &text, node_id),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let text = format!(
                "# Written by idemd {} when this data directory was first used.\n# The Raft log here belongs to this node id: never start it under another.\nnode_id = {node_id}\n# The on-disk format of the data: releases older than this format refuse it.\n{DATA_FORMAT_KEY} = {DATA_FORMAT_VERSION}\n",
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

/// Checks an existing identity file: the node id, then the data format.
fn check_identity(dir: &Path, path: &Path, text: &str, node_id: u64) -> Result<(), NodeError> {
    let invalid = |what: &str| NodeError::DataDir {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, format!("expected {what}")),
    };
    let table = text
        .parse::<toml::Table>()
        .map_err(|_| invalid("`node_id = <id>`"))?;
    let found = table
        .get("node_id")
        .and_then(toml::Value::as_integer)
        .and_then(|id| u64::try_from(id).ok())
        .ok_or_else(|| invalid("`node_id = <id>`"))?;
    if found != node_id {
        return Err(NodeError::IdentityMismatch {
            path: dir.to_path_buf(),
            found,
            configured: node_id,
        });
    }
    let format = match table.get(DATA_FORMAT_KEY) {
        None => UNMARKED_FORMAT,
        Some(value) => value
            .as_integer()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v >= 1)
            .ok_or_else(|| invalid("`data_format = <version>`, a positive integer"))?,
    };
    if format > DATA_FORMAT_VERSION {
        return Err(NodeError::NewerDataFormat {
            path: path.to_path_buf(),
            found: format,
            supported: DATA_FORMAT_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(dir: &Path) -> toml::Table {
        std::fs::read_to_string(dir.join(IDENTITY_FILE))
            .unwrap()
            .parse()
            .unwrap()
    }

    fn write_identity(dir: &Path, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(IDENTITY_FILE), text).unwrap();
    }

    #[test]
    fn a_new_directory_records_the_node_and_the_current_format() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        claim_data_dir(&data, 3).unwrap();
        let table = identity(&data);
        assert_eq!(table["node_id"].as_integer(), Some(3));
        assert_eq!(
            table[DATA_FORMAT_KEY].as_integer(),
            Some(i64::from(DATA_FORMAT_VERSION))
        );
        // It starts again under the same id.
        claim_data_dir(&data, 3).unwrap();
    }

    #[test]
    fn a_directory_without_a_format_marker_is_format_1_and_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let text =
            "# Written by idemd 0.1.0 when this data directory was first used.\nnode_id = 2\n";
        write_identity(dir.path(), text);
        claim_data_dir(dir.path(), 2).unwrap();
        let after = std::fs::read_to_string(dir.path().join(IDENTITY_FILE)).unwrap();
        assert_eq!(after, text);
    }

    #[test]
    fn a_directory_of_a_newer_format_is_refused_naming_the_file_and_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let newer = DATA_FORMAT_VERSION + 1;
        write_identity(dir.path(), &format!("node_id = 1\ndata_format = {newer}\n"));
        let error = claim_data_dir(dir.path(), 1).unwrap_err();
        assert!(
            matches!(error, NodeError::NewerDataFormat { found, supported, .. }
                if found == newer && supported == DATA_FORMAT_VERSION),
            "{error:?}"
        );
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        let file = dir.path().join(IDENTITY_FILE);
        assert!(message.contains(&file.display().to_string()), "{message}");
        assert!(message.contains(&format!("format {newer}")), "{message}");
        assert!(
            message.contains(&format!("reads up to {DATA_FORMAT_VERSION}")),
            "{message}"
        );
    }

    #[test]
    fn an_unreadable_format_marker_is_refused() {
        for bad in ["0", "-1", "\"2\"", "1.5"] {
            let dir = tempfile::tempdir().unwrap();
            write_identity(dir.path(), &format!("node_id = 1\ndata_format = {bad}\n"));
            let error = claim_data_dir(dir.path(), 1).unwrap_err();
            assert!(
                matches!(error, NodeError::DataDir { .. }),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains("data_format"), "{error}");
        }
    }

    #[test]
    fn the_identity_is_checked_before_the_format() {
        let dir = tempfile::tempdir().unwrap();
        write_identity(dir.path(), "node_id = 1\ndata_format = 99\n");
        let error = claim_data_dir(dir.path(), 2).unwrap_err();
        assert!(
            matches!(error, NodeError::IdentityMismatch { .. }),
            "{error:?}"
        );
    }
}
