//! What a port's TLS is built from, and building it: the configured files become rustls
//! configurations (ring as the crypto provider, ALPN `h2` for gRPC).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};

use super::{pem, TlsError};
use crate::config::{ClientAuth, PeerTlsConfig, TlsConfig};

/// The files of one port's TLS.
#[derive(Clone, Debug)]
pub enum TlsSource {
    /// The API port: client certificates optional or required, as configured.
    Api(TlsConfig),
    /// The Raft port: client certificates of the cluster CA required; the same files make
    /// the client configuration of this node's connections to its peers.
    Peer(PeerTlsConfig),
}

/// rustls configurations built from a [`TlsSource`].
pub struct Built {
    /// What the port serves with.
    pub server: Arc<ServerConfig>,
    /// What this node dials its peers with ([`TlsSource::Peer`] only).
    pub client: Option<Arc<ClientConfig>>,
}

impl TlsSource {
    /// The files whose change triggers a reload.
    pub fn paths(&self) -> Vec<PathBuf> {
        match self {
            TlsSource::Api(api) => [Some(&api.cert), Some(&api.key), api.ca.as_ref()]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
            TlsSource::Peer(peer) => vec![peer.cert.clone(), peer.key.clone(), peer.ca.clone()],
        }
    }

    /// Reads the files and builds the configurations.
    pub fn build(&self) -> Result<Built, TlsError> {
        match self {
            TlsSource::Api(api) => Ok(Built {
                server: Arc::new(api_server(api)?),
                client: None,
            }),
            TlsSource::Peer(peer) => Ok(Built {
                server: Arc::new(peer_server(peer)?),
                client: Some(Arc::new(peer_client(peer)?)),
            }),
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn rustls_error(what: &'static str) -> impl Fn(rustls::Error) -> TlsError {
    move |e| TlsError::Rustls {
        what,
        why: e.to_string(),
    }
}

fn verifier_error(e: rustls::server::VerifierBuilderError) -> TlsError {
    TlsError::Rustls {
        what: "client certificate verifier",
        why: e.to_string(),
    }
}

fn api_server(api: &TlsConfig) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(rustls_error("API TLS"))?;
    let builder = match &api.ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(pem::roots(ca)?), provider());
            let verifier = match api.client_auth {
                ClientAuth::Require => verifier,
                ClientAuth::Optional => verifier.allow_unauthenticated(),
            };
            builder.with_client_cert_verifier(verifier.build().map_err(verifier_error)?)
        }
    };
    let certs = pem::certificates("certificate", &api.cert)?;
    let mut config = builder
        .with_single_cert(certs, pem::private_key(&api.key)?)
        .map_err(rustls_error("API certificate and key"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

fn peer_server(peer: &PeerTlsConfig) -> Result<ServerConfig, TlsError> {
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(pem::roots(&peer.ca)?), provider())
            .build()
            .map_err(verifier_error)?;
    let certs = pem::certificates("certificate", &peer.cert)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(rustls_error("peer TLS"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, pem::private_key(&peer.key)?)
        .map_err(rustls_error("peer certificate and key"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

fn peer_client(peer: &PeerTlsConfig) -> Result<ClientConfig, TlsError> {
    let certs = pem::certificates("certificate", &peer.cert)?;
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(rustls_error("peer TLS"))?
        .with_root_certificates(pem::roots(&peer.ca)?)
        .with_client_auth_cert(certs, pem::private_key(&peer.key)?)
        .map_err(rustls_error("peer client certificate and key"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}
