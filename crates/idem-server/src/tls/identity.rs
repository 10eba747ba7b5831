//! The identity a verified client certificate proves, handed to authorization.
//!
//! The TLS layer knows who completed the handshake; the services (and the authorization in
//! front of them) only see a request. So the API port inserts a [`ClientIdentity`] into
//! every request's `http::Extensions` when the connection presented a certificate that
//! chains to the configured CA. No certificate (or no TLS), no extension: the absence is
//! the signal, never a default name.

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
}
