//! Request size limit: messages above `max_request_bytes` get `RESOURCE_EXHAUSTED` with the
//! reason `REQUEST_TOO_LARGE`, like every other idem error.
//!
//! tonic enforces the limit itself while decoding (the message is never buffered whole),
//! but reports it as a bare `OUT_OF_RANGE` without a reason, before any handler runs. This
//! layer recognises that one answer on its way out and rewrites its status headers into the
//! documented error; every other response passes untouched.

use http::header::HeaderValue;
use http::{HeaderMap, Response};
use idem_proto::{reason, status};
use tonic::Code;
use tower::util::MapResponseLayer;

/// The prefix of tonic's message for a request above the decoding limit.
const TONIC_TOO_LARGE: &str = "Error, decoded message length too large";

/// The layer for `tonic::transport::Server::layer`.
pub fn request_too_large_layer<B>() -> MapResponseLayer<fn(Response<B>) -> Response<B>> {
    MapResponseLayer::new(rewrite::<B>)
}

fn rewrite<B>(mut response: Response<B>) -> Response<B> {
    rewrite_headers(response.headers_mut());
    response
}

/// Rewrites tonic's "decoded message length too large" status in `headers`, if present.
pub fn rewrite_headers(headers: &mut HeaderMap) {
    let out_of_range = HeaderValue::from(Code::OutOfRange as i32);
    if headers.get(tonic::Status::GRPC_STATUS) != Some(&out_of_range) {
        return;
    }
    let Some(original) = tonic::Status::from_header_map(headers) else {
        return;
    };
    if !original.message().starts_with(TONIC_TOO_LARGE) {
        return;
    }
    let message = original
        .message()
        .replace(TONIC_TOO_LARGE, "request message too large");
    let ours = status::error(reason::REQUEST_TOO_LARGE, message, []);
    headers.remove(tonic::Status::GRPC_STATUS);
    headers.remove(tonic::Status::GRPC_MESSAGE);
    headers.remove(tonic::Status::GRPC_STATUS_DETAILS);
    if ours.add_header(headers).is_err() {
        // Only a message with bytes invalid in a header could fail; ours is ASCII.
        headers.insert(
            tonic::Status::GRPC_STATUS,
            HeaderValue::from(Code::ResourceExhausted as i32),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_only_tonics_too_large_answer() {
        let tonic_error = tonic::Status::out_of_range(
            "Error, decoded message length too large: found 5000000 bytes, the limit is: 2097152 bytes",
        );
        let mut headers = tonic_error.into_http::<()>().into_parts().0.headers;
        rewrite_headers(&mut headers);
        let status = tonic::Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status::reason_of(&status).as_deref(),
            Some(reason::REQUEST_TOO_LARGE)
        );
        assert!(status.message().contains("5000000"), "{}", status.message());

        let other = tonic::Status::out_of_range("something else");
        let mut headers = other.into_http::<()>().into_parts().0.headers;
        let before = headers.clone();
        rewrite_headers(&mut headers);
        assert_eq!(headers, before);

        let mut empty = HeaderMap::new();
        rewrite_headers(&mut empty);
        assert!(empty.is_empty());
    }
}
