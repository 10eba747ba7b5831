//! `idemctl auth token create|revoke|list`: bearer tokens, in the cluster or in a
//! credentials file.
//!
//! A node accepts the tokens of its credentials file (`[auth] credentials`, re-read when it
//! changes) and those of the cluster's replicated configuration (docs/security.md). By
//! default these commands manage the replicated ones through `Admin.CreateToken`,
//! `RevokeToken` and `ListTokens` (an admin of every tenant; the node draws the secret, the
//! cluster keeps its digest and audits the change). With `--file PATH` they edit a
//! credentials file instead, where it is (or a copy that configuration management
//! distributes), which is how the first admin is bootstrapped: `create` makes a random
//! token, stores only its SHA-256 digest, and prints the token once; `revoke` deletes an
//! entry (the nodes stop accepting it within a second of reading the file); `list` shows
//! names, roles and tenants, never a secret. Rewriting the file drops its comments.

use std::io::Read;
use std::path::Path;

use idem_client::idem_core::placement::TokenRole;
use idem_client::tokens::TokenInfo;
use idem_client::Client;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::cli::{TokenCommand, TokenCreateArgs};
use crate::error::CliError;
use crate::output::{Doc, Value};

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

/// The columns of `list` in table mode.
const COLUMNS: &[&str] = &["name", "role", "tenants", "created_at", "created_by"];

/// Runs a `--file` command on its credentials file; `None` when it names no file (it is
/// for the cluster: [`run`]).
pub fn file_command(command: &TokenCommand) -> Option<Result<Doc, CliError>> {
    Some(match command {
        TokenCommand::Create(args) => create(args.file.as_deref()?, args),
        TokenCommand::Revoke(args) => revoke(args.file.as_deref()?, &args.name),
        TokenCommand::List(args) => list(args.file.as_deref()?),
    })
}

/// Runs a token command on the cluster's replicated tokens.
pub async fn run(client: &Client, command: &TokenCommand) -> Result<Doc, CliError> {
    match command {
        TokenCommand::Create(args) => {
            let role = role(&args.role)?;
            tenants_given(&args.tenants)?;
            let token = client.create_token(&args.name, role, &args.tenants).await?;
            Ok(Doc::new()
                .with("name", token.name)
                .with("token", token.secret)
                .with(
                    "note",
                    "shown once: the cluster stores only its SHA-256 digest",
                ))
        }
        TokenCommand::Revoke(args) => {
            client.revoke_token(&args.name).await?;
            Ok(Doc::new().with("revoked", args.name.as_str()))
        }
        TokenCommand::List(_) => {
            let rows = client.list_tokens().await?.iter().map(info_doc).collect();
            Ok(Doc::new().with(
                "tokens",
                Value::Rows {
                    rows,
                    columns: COLUMNS,
                },
            ))
        }
    }
}

fn info_doc(info: &TokenInfo) -> Doc {
    let at = u64::try_from(info.created_at_ms).unwrap_or_default();
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
    Doc::new()
        .with("name", info.name.as_str())
        .with("role", info.role.name())
        .with("tenants", info.tenants.join(","))
        .with(
            "created_at",
            humantime::format_rfc3339_millis(at).to_string(),
        )
        .with("created_by", info.created_by.as_str())
}

fn role(name: &str) -> Result<TokenRole, CliError> {
    [TokenRole::Worker, TokenRole::Operator, TokenRole::Admin]
        .into_iter()
        .find(|role| role.name() == name)
        .ok_or_else(|| usage("--role must be worker, operator or admin"))
}

fn tenants_given(tenants: &[String]) -> Result<(), CliError> {
    if tenants.is_empty() {
        return Err(usage(
            "--tenant is required (repeat it, or '*' for every tenant)",
        ));
    }
    Ok(())
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

fn create(path: &Path, args: &TokenCreateArgs) -> Result<Doc, CliError> {
    role(&args.role)?;
    tenants_given(&args.tenants)?;
    let mut file = load(path)?;
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
    save(path, &file)?;
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
            file: Some(path.clone()),
            name: "payments".into(),
            role: "worker".into(),
            tenants: vec!["acme".into()],
            audit: Default::default(),
        };
        let doc = create(&path, &args).unwrap();
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
        assert!(create(&path, &args).is_err(), "names are unique");
        assert!(list(&path).unwrap().get("payments").is_some());
        revoke(&path, "payments").unwrap();
        assert!(list(&path).unwrap().get("payments").is_none());
        assert!(revoke(&path, "payments").is_err());
    }
}
