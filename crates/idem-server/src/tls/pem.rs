//! Reading PEM files into the DER types rustls takes, with errors naming the file.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;

use super::TlsError;

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn pem_error(what: &'static str, path: &Path, why: impl ToString) -> TlsError {
    TlsError::Pem {
        what,
        path: path.to_owned(),
        why: why.to_string(),
    }
}

/// Every certificate of a PEM file, in order (a chain: leaf first).
pub(super) fn certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(what, path, e))?;
    if certs.is_empty() {
        return Err(pem_error(what, path, "no CERTIFICATE block"));
    }
    Ok(certs)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub(super) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    const WHAT: &str = "private key";
    let bytes = read(WHAT, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| pem_error(WHAT, path, e))
}

/// The CA certificates of a PEM file as trust anchors.
pub(super) fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    const WHAT: &str = "CA";
    let mut roots = RootCertStore::empty();
    for cert in certificates(WHAT, path)? {
        roots
            .add(cert)
            .map_err(|e| pem_error(WHAT, path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}
