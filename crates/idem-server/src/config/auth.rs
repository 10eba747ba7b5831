//! `[auth]`: whether API calls must authenticate, and the credentials file.

use std::path::PathBuf;

use super::sources::{Sources, AUTH_CREDENTIALS, AUTH_MODE};
use super::values::path;
use crate::auth::AuthMode;

/// The `[auth]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthConfig {
    /// On (the default), or off (a development node only).
    pub mode: AuthMode,
    /// The credentials file; required when on.
    pub credentials: Option<PathBuf>,
}

impl AuthConfig {
    /// Authentication off: the development node.
    pub fn off() -> AuthConfig {
        AuthConfig {
            mode: AuthMode::Off,
            credentials: None,
        }
    }

    /// The section as `--print-config` writes it.
    pub fn to_toml(&self) -> toml::Table {
        let mut table = toml::Table::new();
        table.insert("mode".into(), toml::Value::String(self.mode.name().into()));
        if let Some(path) = &self.credentials {
            table.insert(
                "credentials".into(),
                toml::Value::String(path.to_string_lossy().into_owned()),
            );
        }
        table
    }
}

fn mode(text: &str) -> Result<AuthMode, String> {
    match text {
        "on" => Ok(AuthMode::On),
        "off" => Ok(AuthMode::Off),
        _ => Err("expected on or off".to_owned()),
    }
}

/// Reads `[auth]`; with authentication on, a credentials file is required.
pub(super) fn build(sources: &Sources<'_>, p: &mut Vec<String>) -> AuthConfig {
    let d = AuthConfig::default();
    let mode = sources.get(AUTH_MODE, d.mode, mode, p);
    let credentials = sources.get(AUTH_CREDENTIALS, PathBuf::new(), path, p);
    let credentials = (!credentials.as_os_str().is_empty()).then_some(credentials);
    if mode == AuthMode::On && credentials.is_none() {
        p.push(
            "auth.credentials: required while auth.mode = \"on\", the default (the file of \
             tokens and client certificates allowed to call: --auth-credentials FILE, \
             IDEM_AUTH_CREDENTIALS; create one with `idemctl auth token create --credentials \
             FILE ...`, docs/security.md); for a development node set auth.mode = \"off\" \
             (--auth off, IDEM_AUTH=off)"
                .to_owned(),
        );
    }
    AuthConfig { mode, credentials }
}
