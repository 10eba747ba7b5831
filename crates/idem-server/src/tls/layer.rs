//! Moving a TLS connection's identity into each request, where services look for it.

use tonic::transport::server::TcpConnectInfo;

use super::ConnectionInfo;

/// Inserts the connection's [`ClientIdentity`](super::ClientIdentity) (when its client
/// presented a verified certificate) and its [`TcpConnectInfo`] (so
/// `Request::remote_addr` works as on a plaintext port) into the request's extensions.
/// Requests of plaintext connections pass unchanged.
pub fn attach_identity<B>(mut request: http::Request<B>) -> http::Request<B> {
    let Some(info) = request.extensions().get::<ConnectionInfo>().cloned() else {
        return request;
    };
    let extensions = request.extensions_mut();
    extensions.insert(TcpConnectInfo {
        local_addr: info.local_addr,
        remote_addr: info.remote_addr,
    });
    if let Some(identity) = info.identity {
        extensions.insert(identity);
    }
    request
}

/// [`attach_identity`] as a layer for tonic's server builder.
pub fn identity_layer() -> tower::util::MapRequestLayer<
    fn(http::Request<tonic::body::Body>) -> http::Request<tonic::body::Body>,
> {
    tower::util::MapRequestLayer::new(attach_identity::<tonic::body::Body>)
}
