//! The bearer token sent with every call (`authorization: Bearer <token>` metadata), so a
//! node with authentication on knows the caller without a client certificate.
//!
//! Every channel of the client is wrapped once in an interceptor that adds the header; the
//! token never appears in `Debug` output or logs.

use std::fmt;

use idem_proto::reason;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::error::ClientError;

/// A bearer token (an `idemctl auth token create` secret).
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// The token `secret`.
    pub fn new(secret: impl Into<String>) -> Self {
        BearerToken(secret.into())
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// Adds the `authorization` header (when there is a token) to each request.
#[derive(Clone)]
pub(crate) struct Authorization(Option<MetadataValue<Ascii>>);

impl Authorization {
    /// The interceptor for `token`; a token that cannot be a header value is refused.
    pub(crate) fn new(token: Option<&BearerToken>) -> Result<Self, ClientError> {
        let Some(BearerToken(secret)) = token else {
            return Ok(Authorization(None));
        };
        let mut value: MetadataValue<Ascii> = format!("Bearer {secret}").parse().map_err(|_| {
            ClientError::invalid(
                reason::INVALID_ARGUMENT,
                "the bearer token must be printable ASCII",
            )
        })?;
        value.set_sensitive(true);
        Ok(Authorization(Some(value)))
    }
}

impl tonic::service::Interceptor for Authorization {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// What every call goes through: the endpoint's channel with the [`Authorization`].
pub(crate) type Connection = InterceptedService<Channel, Authorization>;

#[cfg(test)]
mod tests {
    use tonic::service::Interceptor;

    use super::*;

    fn header(token: Option<&BearerToken>) -> Option<String> {
        let mut interceptor = Authorization::new(token).unwrap();
        let request = interceptor.call(tonic::Request::new(())).unwrap();
        let value = request.metadata().get("authorization")?;
        Some(value.to_str().unwrap().to_owned())
    }

    #[test]
    fn every_call_carries_the_bearer_token() {
        let token = BearerToken::new("idem_s3cret");
        assert_eq!(header(Some(&token)).as_deref(), Some("Bearer idem_s3cret"));
        assert_eq!(header(None), None);
    }

    #[test]
    fn the_token_is_never_printed_and_must_be_a_header_value() {
        let token = BearerToken::new("idem_s3cret");
        assert!(!format!("{token:?}").contains("s3cret"));
        assert!(Authorization::new(Some(&BearerToken::new("bad\ntoken"))).is_err());
    }
}
