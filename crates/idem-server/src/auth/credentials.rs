//! The credentials file: who may call, with which token or client certificate.
//!
//! ```toml
//! [[token]]
//! name = "payments-eu"            # audited as the caller's name
//! sha256 = "9f86d0…"              # SHA-256 of the token, hex (`idemctl auth token new`)
//! role = "worker"                 # worker | operator | admin
//! tenants = ["acme"]              # or ["*"] for every tenant
//!
//! [[certificate]]
//! name = "ops.example.com"        # a client certificate's first DNS SAN, else its CN
//! role = "admin"
//! tenants = ["*"]
//! ```
//!
//! Only digests are stored: reading the file gives no usable token. Tokens are long random
//! strings (`idem_` + 64 hex digits), so an unsalted SHA-256 is enough to make the file
//! useless to a thief, and a lookup by digest costs the same for any token.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::principal::{Principal, Role, Tenants};

/// Why the credentials file cannot be used (the node refuses to start, or keeps the previous
/// contents on a reload).
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file cannot be read.
    #[error("credentials file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML of the expected shape.
    #[error("credentials file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
    #[serde(default)]
    certificate: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default)]
    sha256: Option<String>,
    role: String,
    tenants: Vec<String>,
}

/// The principals of the credentials file, by token digest and by certificate name.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    tokens: HashMap<[u8; 32], Principal>,
    certificates: HashMap<String, Principal>,
}

/// The SHA-256 digest of a token, as stored in the credentials file (hex).
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Credentials {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Credentials, CredentialsError> {
        let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Credentials::parse(&text).map_err(|message| CredentialsError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<Credentials, String> {
        let file: File = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut credentials = Credentials::default();
        for entry in file.token {
            let digest = entry
                .sha256
                .as_deref()
                .ok_or_else(|| format!("token {:?}: sha256 is required", entry.name))
                .and_then(|hex| parse_digest(&entry.name, hex))?;
            credentials.tokens.insert(digest, principal(entry)?);
        }
        for entry in file.certificate {
            if entry.sha256.is_some() {
                return Err(format!(
                    "certificate {:?}: sha256 is for tokens",
                    entry.name
                ));
            }
            credentials
                .certificates
                .insert(entry.name.clone(), principal(entry)?);
        }
        Ok(credentials)
    }

    /// The principal of a bearer token.
    pub fn token(&self, token: &str) -> Option<&Principal> {
        self.token_by_digest(&Sha256::digest(token.as_bytes()).into())
    }

    /// The principal of the token whose SHA-256 digest is `digest`.
    pub fn token_by_digest(&self, digest: &[u8; 32]) -> Option<&Principal> {
        self.tokens.get(digest)
    }

    /// The principal of a verified client certificate's name.
    pub fn certificate(&self, name: &str) -> Option<&Principal> {
        self.certificates.get(name)
    }
}

fn parse_digest(name: &str, text: &str) -> Result<[u8; 32], String> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| format!("token {name:?}: sha256 must be 64 hex digits"))
}

fn principal(entry: Entry) -> Result<Principal, String> {
    if entry.name.is_empty() {
        return Err("every entry needs a name".into());
    }
    let role = Role::parse(&entry.role).ok_or_else(|| {
        format!(
            "{:?}: role must be worker, operator or admin, not {:?}",
            entry.name, entry.role
        )
    })?;
    let tenants = if entry.tenants.iter().any(|t| t == "*") {
        Tenants::All
    } else if entry.tenants.is_empty() {
        return Err(format!(
            "{:?}: tenants must list at least one tenant, or \"*\"",
            entry.name
        ));
    } else {
        Tenants::Only(entry.tenants.into_iter().collect::<BTreeSet<_>>())
    };
    Ok(Principal {
        name: entry.name,
        role,
        tenants,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_by_digest_and_certificates_by_name() {
        let text = format!(
            "[[token]]\nname = \"w\"\nsha256 = \"{}\"\nrole = \"worker\"\ntenants = [\"acme\"]\n\
             [[certificate]]\nname = \"ops.example\"\nrole = \"admin\"\ntenants = [\"*\"]\n",
            token_digest("idem_secret")
        );
        let credentials = Credentials::parse(&text).unwrap();
        let worker = credentials.token("idem_secret").unwrap();
        assert_eq!(worker.role, Role::Worker);
        assert!(worker.tenants.contains("acme") && !worker.tenants.contains("globex"));
        assert!(credentials.token("idem_other").is_none());
        assert_eq!(
            credentials.certificate("ops.example").unwrap().tenants,
            Tenants::All
        );
    }

    #[test]
    fn bad_entries_are_refused_with_their_name() {
        for (text, expected) in [
            (
                "[[token]]\nname = \"a\"\nrole = \"worker\"\ntenants = [\"x\"]",
                "sha256 is required",
            ),
            (
                "[[token]]\nname = \"a\"\nsha256 = \"00\"\nrole = \"worker\"\ntenants = [\"x\"]",
                "64 hex",
            ),
            (
                "[[certificate]]\nname = \"a\"\nrole = \"root\"\ntenants = [\"x\"]",
                "role must be",
            ),
            (
                "[[certificate]]\nname = \"a\"\nrole = \"admin\"\ntenants = []",
                "at least one",
            ),
            ("[[user]]\nname = \"a\"", "unknown field"),
        ] {
            let error = Credentials::parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
