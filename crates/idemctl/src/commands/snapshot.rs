//! `idemctl snapshot save|restore`: online backups and the disaster-recovery restore.
//!
//! `save` streams `Backup.SaveSnapshot` from a live node into a file next to FILE, checks the
//! file's SHA-256 (and that it is the length and digest the node announced), makes it
//! durable and renames it into place: FILE is either the previous file or a complete,
//! checked backup, never half of one. `restore` checks a file the same way and seeds a new
//! data directory with it (`idem_store::restore`), so `idemd` started there is a cluster of
//! one with every record, result and fence of the backup (docs/operations.md, "Disaster
//! recovery"). A backup of a cluster with region groups holds each group at its own applied
//! index; both commands print every group's.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use idem_client::Client;
use idem_proto::v1::save_snapshot_response::Part;
use idem_proto::v1::{BackupHeader, BackupTrailer};
use idem_store::{BackupError, BackupFile, NodeInfo};

use crate::cli::SnapshotRestoreArgs;
use crate::error::CliError;
use crate::output::Doc;

/// The identity file idemd keeps in its data directory (it refuses another node id there).
const IDENTITY_FILE: &str = "node.toml";

/// `idemctl snapshot save FILE`.
pub async fn save(client: &Client, file: &Path) -> Result<Doc, CliError> {
    let partial = partial_path(file)?;
    let result = download(client, &partial)
        .await
        .and_then(|(header, trailer)| {
            let backup = check_download(&partial, &header, &trailer)?;
            std::fs::rename(&partial, file).map_err(|e| io_error(file, &e))?;
            sync_parent(file)?;
            Ok(saved_doc(file, &header, &backup))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// Streams the backup into `partial`; returns the header and trailer messages.
async fn download(
    client: &Client,
    partial: &Path,
) -> Result<(BackupHeader, BackupTrailer), CliError> {
    let mut stream = client.save_snapshot().await?;
    let header = match stream.next().await? {
        Some(message) => match message.part {
            Some(Part::Header(header)) => header,
            _ => return Err(incomplete("the stream did not start with a header")),
        },
        None => return Err(incomplete("the stream ended before its header")),
    };
    let out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(partial)
        .map_err(|e| io_error(partial, &e))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let trailer = loop {
        match stream.next().await?.and_then(|m| m.part) {
            Some(Part::Chunk(bytes)) => out.write_all(&bytes).map_err(|e| io_error(partial, &e))?,
            Some(Part::Trailer(trailer)) => break trailer,
            Some(Part::Header(_)) => return Err(incomplete("a second header in the stream")),
            None => return Err(incomplete("the stream ended before its trailer")),
        }
    };
    let out = out.into_inner().map_err(|e| io_error(partial, e.error()))?;
    out.sync_all().map_err(|e| io_error(partial, &e))?;
    Ok((header, trailer))
}

/// Checks the downloaded file whole: its own digest, then that it is what the node sent.
fn check_download(
    partial: &Path,
    header: &BackupHeader,
    trailer: &BackupTrailer,
) -> Result<BackupFile, CliError> {
    let backup = BackupFile::open(partial)?;
    if backup.len() != trailer.length || backup.digest_hex() != trailer.sha256 {
        return Err(BackupError::Digest {
            recorded: trailer.sha256.clone(),
            computed: backup.digest_hex(),
        }
        .into());
    }
    let stored: Vec<(u64, u64, u64)> = backup
        .headers()
        .iter()
        .map(|h| (h.group, h.index(), h.term()))
        .collect();
    let streamed: Vec<(u64, u64, u64)> = header
        .groups
        .iter()
        .map(|g| (g.group, g.applied_index, g.applied_term))
        .collect();
    let global = (stored[0].1, stored[0].2);
    // A node of an earlier release announces the global group alone, without `groups`.
    let announced = streamed.is_empty() || streamed == stored;
    if global != (header.applied_index, header.applied_term) || !announced {
        return Err(incomplete(
            "the file's header differs from the streamed one",
        ));
    }
    Ok(backup)
}

fn saved_doc(file: &Path, header: &BackupHeader, backup: &BackupFile) -> Doc {
    let members: Vec<String> = header
        .members
        .iter()
        .map(|m| format!("{}{}", m.id, if m.voter { "" } else { " (learner)" }))
        .collect();
    Doc::new()
        .with("file", file.display().to_string())
        .with("applied_index", header.applied_index)
        .with("applied_term", header.applied_term)
        .with("node_id", header.node_id)
        .with("members", members.join(","))
        .with(
            "taken_at_ms",
            u64::try_from(header.taken_at_ms).unwrap_or(0),
        )
        .with("groups", groups_of(backup))
        .with("bytes", backup.len())
        .with("sha256", backup.digest_hex())
}

/// Every group of `backup` as `group@index` (in file order, the global group 0 first).
fn groups_of(backup: &BackupFile) -> String {
    let groups: Vec<String> = backup
        .headers()
        .iter()
        .map(|h| format!("{}@{}", h.group, h.index()))
        .collect();
    groups.join(",")
}

/// `idemctl snapshot restore FILE --data-dir DIR`.
pub fn restore(args: &SnapshotRestoreArgs) -> Result<Doc, CliError> {
    let backup = BackupFile::open(&args.file)?;
    let node = NodeInfo {
        region: args.region.clone(),
        zone: args.zone.clone(),
        raft_addr: args.raft_addr.to_string(),
        api_addr: args.api_addr.to_string(),
    };
    idem_store::restore(&backup, &args.data_dir, args.node_id, node)?;
    write_identity(&args.data_dir, args.node_id)?;
    let header = backup.header();
    Ok(Doc::new()
        .with("data_dir", args.data_dir.display().to_string())
        .with("node_id", args.node_id)
        .with("applied_index", header.index())
        .with("applied_term", header.term())
        .with("groups", groups_of(&backup))
        .with("backup_node_id", header.node_id)
        .with(
            "taken_at_ms",
            u64::try_from(header.taken_at_ms).unwrap_or(0),
        )
        .with("sha256", backup.digest_hex())
        .with(
            "next",
            format!(
                "start idemd --node-id {} --data-dir {} --raft-addr {} --api-addr {}; \
                 add other nodes with `idemctl member add` (they join every group)",
                args.node_id,
                args.data_dir.display(),
                args.raft_addr,
                args.api_addr
            ),
        ))
}

/// Claims the data directory for `node_id`, as idemd does at its first start.
fn write_identity(dir: &Path, node_id: u64) -> Result<(), CliError> {
    let path = dir.join(IDENTITY_FILE);
    let text = format!(
        "# Written by idemctl snapshot restore.\n# The Raft state here belongs to this node id: \
         never start it under another.\nnode_id = {node_id}\n# The on-disk format of the data: \
         releases older than this format refuse it.\ndata_format = {}\n",
        idem_store::DATA_FORMAT_VERSION
    );
    let mut file = File::create(&path).map_err(|e| io_error(&path, &e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error(&path, &e))?;
    sync_parent(&path)
}

/// `.<name>.partial` next to `file`.
fn partial_path(file: &Path) -> Result<PathBuf, CliError> {
    let name = file
        .file_name()
        .ok_or_else(|| CliError::Usage(format!("{}: not a file name", file.display())))?;
    Ok(file.with_file_name(format!(".{}.partial", name.to_string_lossy())))
}

/// Makes a rename or creation in `path`'s directory durable.
fn sync_parent(path: &Path) -> Result<(), CliError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, &e))
}

fn io_error(path: &Path, error: &std::io::Error) -> CliError {
    CliError::Usage(format!("{}: {error}", path.display()))
}

fn incomplete(message: &str) -> CliError {
    BackupError::Format(message.to_owned()).into()
}
