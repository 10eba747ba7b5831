//! Turns a call's credential into a [`Principal`], with the credentials file kept current.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use idem_proto::reason;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::credentials::{Credentials, CredentialsError};
use super::principal::Principal;
use super::replicated::ReplicatedTokens;
use crate::backend::RequestError;
use crate::tls::ClientIdentity;

/// How often the credentials file is checked for changes: a revoked token stops working
/// within this.
const RELOAD_POLL: Duration = Duration::from_millis(250);

/// Whether calls must authenticate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthMode {
    /// Every call needs a credential (the default: a node refuses to start without a
    /// credentials file rather than serve anyone who reaches it).
    #[default]
    On,
    /// Anyone may call anything: a development node only (`make run`, tests, the plaintext
    /// local cluster).
    Off,
}

impl AuthMode {
    /// The configuration spelling.
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::On => "on",
            AuthMode::Off => "off",
        }
    }
}

/// The node's authenticator.
#[derive(Clone, Debug)]
pub struct Authenticator {
    mode: AuthMode,
    path: Option<PathBuf>,
    credentials: Arc<RwLock<Credentials>>,
    replicated: Option<ReplicatedTokens>,
}

impl Authenticator {
    /// An authenticator for `mode`, reading `path` (required when on).
    pub fn new(mode: AuthMode, path: Option<PathBuf>) -> Result<Authenticator, CredentialsError> {
        let credentials = match (&path, mode) {
            (Some(path), _) => Credentials::load(path)?,
            (None, _) => Credentials::default(),
        };
        Ok(Authenticator {
            mode,
            path,
            credentials: Arc::new(RwLock::new(credentials)),
            replicated: None,
        })
    }

    /// This authenticator, also accepting the tokens of the replicated configuration.
    pub fn with_replicated(self, tokens: ReplicatedTokens) -> Authenticator {
        Authenticator {
            replicated: Some(tokens),
            ..self
        }
    }

    /// Authentication is off.
    pub fn off() -> Authenticator {
        Authenticator {
            mode: AuthMode::Off,
            path: None,
            credentials: Arc::default(),
            replicated: None,
        }
    }

    /// The mode.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// The principal of a call with these headers and, over TLS, this client certificate.
    /// A bearer token, when present, decides alone: a wrong token is refused even if a
    /// certificate would have passed. A token is looked up in the credentials file, then
    /// in the replicated configuration.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        identity: Option<&ClientIdentity>,
    ) -> Result<Principal, RequestError> {
        if self.mode == AuthMode::Off {
            return Ok(Principal::unauthenticated());
        }
        let credentials = self.credentials.read().unwrap_or_else(|e| e.into_inner());
        if let Some(value) = headers.get(http::header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .ok_or_else(|| unauthenticated("authorization must be `Bearer <token>`"))?;
            let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
            return credentials
                .token_by_digest(&digest)
                .cloned()
                .or_else(|| self.replicated.as_ref()?.principal(&digest))
                .ok_or_else(|| unauthenticated("unknown or revoked token"));
        }
        if let Some(identity) = identity {
            return credentials
                .certificate(&identity.name)
                .cloned()
                .ok_or_else(|| {
                    unauthenticated("the client certificate is not mapped to a principal")
                });
        }
        Err(unauthenticated(
            "authentication is on: send a bearer token or a client certificate",
        ))
    }

    /// Re-reads the credentials file whenever it changes, until `shutdown`. A file that
    /// fails to parse is logged and the previous contents stay in force.
    pub async fn watch(self, shutdown: CancellationToken) {
        let Some(path) = self.path.clone() else {
            return;
        };
        let mut seen = modified(&path);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(RELOAD_POLL) => {}
            }
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            match Credentials::load(&path) {
                Ok(credentials) => {
                    *self.credentials.write().unwrap_or_else(|e| e.into_inner()) = credentials;
                    tracing::info!(path = %path.display(), "credentials reloaded");
                }
                Err(error) => {
                    tracing::error!(%error, "credentials not reloaded; the previous ones stay in force")
                }
            }
        }
    }
}

fn modified(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn unauthenticated(message: &str) -> RequestError {
    RequestError::denied(reason::UNAUTHENTICATED, message)
}
