//! `[tls]` (the public API port) and `[peer_tls]` (the Raft port): certificate, key and CA
//! paths, resolved like every scalar key (flag, then `IDEM_*`, then the file).
//!
//! Both sections are off unless `cert` is set, so `make run` keeps a plaintext dev node.
//! The API port may ask clients for certificates (`client_auth`); the Raft port, once
//! `[peer_tls]` is set, always requires one from the cluster CA, so its `ca` is mandatory.
//! Only the paths are checked here; the files are read when the node starts and again on
//! every reload (`crate::tls`), so a rotation never needs a restart.

use std::path::PathBuf;

use super::sources::*;
use super::values::path;

/// Whether the API port asks clients for a certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// A certificate is verified against `[tls] ca` when one is presented; clients without
    /// one still connect (and authenticate otherwise, e.g. with a bearer token).
    #[default]
    Optional,
    /// Every client must present a certificate of `[tls] ca`; others fail the handshake.
    Require,
}

impl ClientAuth {
    /// The configuration spelling (`optional`, `require`).
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::Optional => "optional",
            ClientAuth::Require => "require",
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "optional" => Ok(ClientAuth::Optional),
            "require" | "required" => Ok(ClientAuth::Require),
            _ => Err("expected require or optional".into()),
        }
    }
}

/// TLS on the public API port (`[tls]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM certificate chain the node presents (leaf first).
    pub cert: PathBuf,
    /// PEM private key of `cert` (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates that client certificates must chain to; without it the port
    /// asks for no client certificate.
    pub ca: Option<PathBuf>,
    /// Whether a client certificate is required.
    pub client_auth: ClientAuth,
}

/// Mutual TLS on the Raft port and on this node's connections to its peers (`[peer_tls]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerTlsConfig {
    /// PEM certificate chain of this node, presented as server and as client.
    pub cert: PathBuf,
    /// PEM private key of `cert`.
    pub key: PathBuf,
    /// PEM certificates of the cluster CA: peers must present a certificate it signed.
    pub ca: PathBuf,
}

fn optional_path(text: &str) -> Result<Option<PathBuf>, String> {
    path(text).map(Some)
}

/// `[tls]`, if `tls.cert` is set; a problem per missing or inconsistent key.
pub(super) fn build_tls(sources: &Sources<'_>, p: &mut Vec<String>) -> Option<TlsConfig> {
    let cert = sources.get(TLS_CERT, None, optional_path, p);
    let key = sources.get(TLS_KEY, None, optional_path, p);
    let ca = sources.get(TLS_CA, None, optional_path, p);
    let client_auth = sources.get(TLS_CLIENT_AUTH, None, |s| ClientAuth::parse(s).map(Some), p);
    let (Some(cert), Some(key)) = (cert.clone(), key.clone()) else {
        let set = [
            (TLS_KEY.file, key.is_some()),
            (TLS_CA.file, ca.is_some()),
            (TLS_CLIENT_AUTH.file, client_auth.is_some()),
        ];
        for (name, _) in set.iter().filter(|(_, set)| *set) {
            p.push(format!("{name} is set but tls.cert is not: set both tls.cert and tls.key to serve the API over TLS"));
        }
        if cert.is_some() {
            p.push("tls.cert is set but tls.key is not".into());
        }
        return None;
    };
    let client_auth = client_auth.unwrap_or_default();
    if client_auth == ClientAuth::Require && ca.is_none() {
        p.push(
            "tls.client_auth = \"require\": needs tls.ca, the CA client certificates must chain to"
                .into(),
        );
    }
    Some(TlsConfig {
        cert,
        key,
        ca,
        client_auth,
    })
}

/// `[peer_tls]`, if any of its keys is set (then all three must be).
pub(super) fn build_peer_tls(sources: &Sources<'_>, p: &mut Vec<String>) -> Option<PeerTlsConfig> {
    let cert = sources.get(PEER_TLS_CERT, None, optional_path, p);
    let key = sources.get(PEER_TLS_KEY, None, optional_path, p);
    let ca = sources.get(PEER_TLS_CA, None, optional_path, p);
    match (cert, key, ca) {
        (None, None, None) => None,
        (Some(cert), Some(key), Some(ca)) => Some(PeerTlsConfig { cert, key, ca }),
        (cert, key, ca) => {
            let keys = [
                (PEER_TLS_CERT, cert.is_some()),
                (PEER_TLS_KEY, key.is_some()),
                (PEER_TLS_CA, ca.is_some()),
            ];
            for (k, _) in keys.iter().filter(|(_, set)| !set) {
                p.push(format!(
                    "{} is not set: [peer_tls] needs cert, key and ca (peers are mutually authenticated by the cluster CA)",
                    k.file
                ));
            }
            None
        }
    }
}

/// `[tls]` as printed by `--print-config`.
pub(super) fn tls_toml(tls: &TlsConfig) -> toml::Value {
    let mut table = toml::Table::new();
    table.insert("cert".into(), path_value(&tls.cert));
    table.insert("key".into(), path_value(&tls.key));
    if let Some(ca) = &tls.ca {
        table.insert("ca".into(), path_value(ca));
    }
    table.insert(
        "client_auth".into(),
        toml::Value::String(tls.client_auth.name().into()),
    );
    toml::Value::Table(table)
}

/// `[peer_tls]` as printed by `--print-config`.
pub(super) fn peer_tls_toml(tls: &PeerTlsConfig) -> toml::Value {
    let mut table = toml::Table::new();
    table.insert("cert".into(), path_value(&tls.cert));
    table.insert("key".into(), path_value(&tls.key));
    table.insert("ca".into(), path_value(&tls.ca));
    toml::Value::Table(table)
}

fn path_value(path: &std::path::Path) -> toml::Value {
    toml::Value::String(path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ConfigError};

    fn load(args: &[&str], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let args = std::iter::once("idemd").chain(args.iter().copied());
        // Authentication off: these tests are about the transport sections.
        let lookup = |name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
                .or_else(|| (name == "IDEM_AUTH").then(|| "off".to_owned()))
        };
        Config::load(args, &lookup).map(|i| i.config)
    }

    fn problems(result: Result<Config, ConfigError>) -> String {
        match result {
            Err(ConfigError::Invalid(lines)) => lines.join("\n"),
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn tls_is_off_until_a_certificate_is_set() {
        let config = load(&[], &[]).unwrap();
        assert_eq!((config.tls, config.peer_tls), (None, None));
    }

    #[test]
    fn flags_and_variables_set_both_sections() {
        let config = load(
            &["--tls-cert", "api.pem", "--tls-key", "api-key.pem"],
            &[
                ("IDEM_TLS_CA", "ca.pem"),
                ("IDEM_TLS_CLIENT_AUTH", "require"),
                ("IDEM_PEER_TLS_CERT", "n1.pem"),
                ("IDEM_PEER_TLS_KEY", "n1-key.pem"),
                ("IDEM_PEER_TLS_CA", "ca.pem"),
            ],
        )
        .unwrap();
        let api = config.tls.clone().unwrap();
        assert_eq!(api.cert, PathBuf::from("api.pem"));
        assert_eq!(api.ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(api.client_auth, ClientAuth::Require);
        assert_eq!(config.peer_tls.clone().unwrap().ca, PathBuf::from("ca.pem"));
        // --print-config is a valid configuration file with the same sections.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("idemd.toml");
        std::fs::write(&file, config.to_toml()).unwrap();
        let again = load(&["--config", file.to_str().unwrap()], &[]).unwrap();
        assert_eq!((again.tls, again.peer_tls), (config.tls, config.peer_tls));
    }

    #[test]
    fn incomplete_sections_name_the_missing_key() {
        let text = problems(load(&["--tls-cert", "a.pem"], &[]));
        assert!(text.contains("tls.key"), "{text}");
        let text = problems(load(
            &["--tls-cert", "a.pem", "--tls-key", "k.pem"],
            &[("IDEM_TLS_CLIENT_AUTH", "require")],
        ));
        assert!(text.contains("needs tls.ca"), "{text}");
        let text = problems(load(&["--peer-tls-cert", "n.pem"], &[]));
        assert!(
            text.contains("peer_tls.key") && text.contains("peer_tls.ca"),
            "{text}"
        );
        let text = problems(load(
            &[
                "--tls-cert",
                "a.pem",
                "--tls-key",
                "k.pem",
                "--tls-client-auth",
                "maybe",
            ],
            &[],
        ));
        assert!(text.contains("expected require or optional"), "{text}");
    }
}
