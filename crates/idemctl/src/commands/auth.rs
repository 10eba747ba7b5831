//! `idemctl auth token create|revoke|list`: the tokens of a node's credentials file.
//!
//! Authentication reads principals from a credentials file on every node (`[auth]
//! credentials`, re-read when it changes; docs/security.md). These commands edit that file
//! where it is (or a copy that configuration management distributes): `create` makes a
//! random token, stores only its SHA-256 digest, and prints the token once; `revoke` deletes
//! an entry (the nodes stop accepting it within a second of reading the file); `list` shows
//! names, roles and tenants, never a secret. Rewriting the file drops its comments.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::cli::{TokenCommand, TokenCreateArgs};
use crate::error::CliError;
use crate::output::Doc;

/// The roles the server knows.
const ROLES: [&str; 3] = ["worker", "operator", "admin"];

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    token: Vec<Entry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    certificate: Vec<Entry>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    role: String,
    tenants: Vec<String>,
}

/// Runs one `idemctl auth token` command on its credentials file.
pub fn run(command: &TokenCommand) -> Result<Doc, CliError> {
    match command {
        TokenCommand::Create(args) => create(args),
        TokenCommand::Revoke(args) => revoke(&args.credentials, &args.name),
        TokenCommand::List(args) => list(&args.credentials),
    }
}

fn usage(message: impl Into<String>) -> CliError {
    CliError::Usage(message.into())
}

fn load(path: &Path) -> Result<File, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            toml::from_str(&text).map_err(|e| usage(format!("{}: {}", path.display(), e.message())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
        Err(e) => Err(usage(format!("{}: {e}", path.display()))),
    }
}

/// Writes the file whole, through a synced temporary file and a rename (the nodes never read
/// half). The file is readable by its owner only (0600): it names every principal and role.
fn save(path: &Path, file: &File) -> Result<(), CliError> {
    let text = toml::to_string(file).map_err(|e| usage(e.to_string()))?;
    let tmp = path.with_extension("tmp");
    write_private(&tmp, text.as_bytes())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| usage(format!("{}: {e}", path.display())))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // A leftover temporary file keeps its old mode: set it explicitly.
    out.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    out.write_all(bytes)?;
    out.sync_all()
}

fn random_token() -> Result<String, CliError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| usage(format!("/dev/urandom: {e}")))?;
    Ok(format!("idem_{}", hex::encode(bytes)))
}

fn create(args: &TokenCreateArgs) -> Result<Doc, CliError> {
    if !ROLES.contains(&args.role.as_str()) {
        return Err(usage("--role must be worker, operator or admin"));
    }
    if args.tenants.is_empty() {
        return Err(usage(
            "--tenant is required (repeat it, or '*' for every tenant)",
        ));
    }
    let mut file = load(&args.credentials)?;
    if file.token.iter().any(|t| t.name == args.name) {
        return Err(usage(format!(
            "a token named {:?} exists: revoke it first",
            args.name
        )));
    }
    let token = random_token()?;
    file.token.push(Entry {
        name: args.name.clone(),
        sha256: Some(hex::encode(Sha256::digest(token.as_bytes()))),
        role: args.role.clone(),
        tenants: args.tenants.clone(),
    });
    save(&args.credentials, &file)?;
    Ok(Doc::new()
        .with("name", args.name.as_str())
        .with("token", token)
        .with("note", "shown once: only its SHA-256 digest is stored"))
}

fn revoke(path: &Path, name: &str) -> Result<Doc, CliError> {
    let mut file = load(path)?;
    let before = file.token.len();
    file.token.retain(|t| t.name != name);
    if file.token.len() == before {
        return Err(usage(format!(
            "no token named {name:?} in {}",
            path.display()
        )));
    }
    save(path, &file)?;
    Ok(Doc::new().with("revoked", name))
}

fn list(path: &Path) -> Result<Doc, CliError> {
    let file = load(path)?;
    let entries = file.token.iter().map(|t| ("token", t));
    let entries = entries.chain(file.certificate.iter().map(|c| ("certificate", c)));
    Ok(entries.fold(Doc::new(), |doc, (kind, entry)| {
        doc.with(
            &entry.name,
            format!("{kind} {} [{}]", entry.role, entry.tenants.join(",")),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_created_listed_and_revoked_and_only_digests_are_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.toml");
        let args = TokenCreateArgs {
            credentials: path.clone(),
            name: "payments".into(),
            role: "worker".into(),
            tenants: vec!["acme".into()],
        };
        let doc = create(&args).unwrap();
        let Some(crate::output::Value::Str(bare)) = doc.get("token") else {
            panic!("create prints the token: {doc:?}");
        };
        let stored = std::fs::read_to_string(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600,
            "owner only"
        );
        assert!(
            bare.starts_with("idem_") && !stored.contains(bare),
            "{stored}"
        );
        assert!(stored.contains(&hex::encode(Sha256::digest(bare.as_bytes()))));
        assert!(create(&args).is_err(), "names are unique");
        assert!(list(&path).unwrap().get("payments").is_some());
        revoke(&path, "payments").unwrap();
        assert!(list(&path).unwrap().get("payments").is_none());
        assert!(revoke(&path, "payments").is_err());
    }
}
