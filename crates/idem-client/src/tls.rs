//! TLS to the nodes' API port (rustls through tonic; no OpenSSL).
//!
//! A client given [`TlsOptions`] speaks `https://` to every endpoint, configured or learned
//! (leader hints and region members are plain `host:port`), verifying the node's
//! certificate against `ca`; with `cert` and `key` it also presents a client certificate,
//! whose name the node takes as the caller's identity. The files are read once, when the
//! client is created.

use std::path::{Path, PathBuf};

use idem_proto::reason;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::error::ClientError;

/// Where the client's TLS material is (PEM files) and which name the nodes' certificates
/// must carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// CA certificates the nodes' certificates must chain to (required).
    pub ca: Option<PathBuf>,
    /// The client certificate chain to present (with `key`), for client-certificate
    /// authentication.
    pub cert: Option<PathBuf>,
    /// The private key of `cert`.
    pub key: Option<PathBuf>,
    /// The name to verify the nodes' certificates against, instead of each endpoint's host
    /// (for nodes reached by an address their certificate does not name).
    pub server_name: Option<String>,
}

impl TlsOptions {
    /// TLS verifying the nodes against the CA certificates in the PEM file `ca`.
    pub fn with_ca(ca: impl Into<PathBuf>) -> Self {
        TlsOptions {
            ca: Some(ca.into()),
            ..TlsOptions::default()
        }
    }

    /// Also presents the client certificate `cert` with its private key `key`.
    #[must_use]
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }

    /// Verifies the nodes' certificates against `name` instead of each endpoint's host.
    #[must_use]
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// tonic's client TLS for these options (files read now).
    pub(crate) fn client_config(&self) -> Result<ClientTlsConfig, ClientError> {
        let ca = self
            .ca
            .as_deref()
            .ok_or_else(|| invalid("TLS needs a CA certificate file (ca, idemctl --cacert)"))?;
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            (None, None) => {}
            _ => return Err(invalid("a client certificate needs both cert and key")),
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name.clone());
        }
        Ok(config)
    }
}

fn invalid(message: impl Into<String>) -> ClientError {
    ClientError::invalid(reason::INVALID_ARGUMENT, message.into())
}

fn read(path: &Path) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|e| invalid(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_needs_a_ca_and_a_whole_client_certificate() {
        assert!(TlsOptions::default().client_config().is_err());
        let dir = std::env::temp_dir();
        let half = TlsOptions {
            cert: Some(dir.join("cert.pem")),
            ..TlsOptions::with_ca(dir.join("ca.pem"))
        };
        assert!(half.client_config().is_err());
        let missing = TlsOptions::with_ca(dir.join("no-such-ca-file.pem"));
        let error = missing.client_config().unwrap_err();
        assert!(error.message().contains("no-such-ca-file.pem"), "{error}");
    }
}
