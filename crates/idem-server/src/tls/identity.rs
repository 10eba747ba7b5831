//! The identity a verified client certificate proves, handed to authorization.
//!
//! The TLS layer knows who completed the handshake; the services (and the authorization in
//! front of them) only see a request. So the API port inserts a [`ClientIdentity`] into
//! every request's `http::Extensions` when the connection presented a certificate that
//! chains to the configured CA. No certificate (or no TLS), no extension: the absence is
//! the signal, never a default name.

use rustls::pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;

/// The name of a verified client certificate: its first DNS subject alternative name, else
/// its subject common name (the convention etcd follows for client-certificate users).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientIdentity {
    /// The first DNS SAN of the certificate, else its subject CN.
    pub name: String,
}

impl ClientIdentity {
    /// The identity carried by a request, if its connection presented a verified client
    /// certificate.
    pub fn of<T>(request: &tonic::Request<T>) -> Option<&ClientIdentity> {
        request.extensions().get::<ClientIdentity>()
    }

    /// The name of a (verified) certificate; `None` if it has neither a DNS SAN nor a CN.
    pub fn from_certificate(cert: &CertificateDer<'_>) -> Option<ClientIdentity> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
        let san = parsed.subject_alternative_name().ok().flatten();
        let dns = san.and_then(|san| {
            san.value.general_names.iter().find_map(|name| match name {
                GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                _ => None,
            })
        });
        let name = match dns {
            Some(dns) => dns,
            None => parsed
                .subject()
                .iter_common_name()
                .next()?
                .as_str()
                .ok()?
                .to_owned(),
        };
        Some(ClientIdentity { name })
    }
}
