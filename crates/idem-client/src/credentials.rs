//! The bearer token sent with every call (`authorization: Bearer <token>` metadata), so a
//! node with authentication on knows the caller without a client certificate, and the
//! reason a node audits for the admin changes of a client made with
//! [`crate::Client::connect_audited`] (`idem-audit-reason` metadata).
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

/// Request metadata with the reason a node audits for an admin change.
pub const AUDIT_REASON_METADATA_KEY: &str = "idem-audit-reason";
/// Longest audit reason a node accepts (bytes).
pub const MAX_AUDIT_REASON: usize = 1024;

/// Adds the `authorization` header (when there is a token) and the audit reason (when
/// there is one) to each request.
#[derive(Clone)]
pub(crate) struct Authorization {
    token: Option<MetadataValue<Ascii>>,
    reason: Option<MetadataValue<Ascii>>,
}

impl Authorization {
    /// The interceptor for `token` and `audit_reason`; a token or reason that cannot be a
    /// header value, or a reason longer than [`MAX_AUDIT_REASON`], is refused.
    pub(crate) fn new(
        token: Option<&BearerToken>,
        audit_reason: Option<&str>,
    ) -> Result<Self, ClientError> {
        let token = match token {
            Some(BearerToken(secret)) => {
                let mut value = header_value(&format!("Bearer {secret}"), "the bearer token")?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let reason = match audit_reason.map(str::trim).filter(|r| !r.is_empty()) {
            Some(text) if text.len() > MAX_AUDIT_REASON => {
                return Err(ClientError::invalid(
                    reason::INVALID_ARGUMENT,
                    format!("the audit reason is longer than {MAX_AUDIT_REASON} bytes"),
                ))
            }
            Some(text) => Some(header_value(text, "the audit reason")?),
            None => None,
        };
        Ok(Authorization { token, reason })
    }
}

fn header_value(text: &str, what: &str) -> Result<MetadataValue<Ascii>, ClientError> {
    text.parse().map_err(|_| {
        ClientError::invalid(
            reason::INVALID_ARGUMENT,
            format!("{what} must be printable ASCII"),
        )
    })
}

impl tonic::service::Interceptor for Authorization {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.token {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        if let Some(value) = &self.reason {
            request
                .metadata_mut()
                .insert(AUDIT_REASON_METADATA_KEY, value.clone());
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
        let mut interceptor = Authorization::new(token, None).unwrap();
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
        assert!(Authorization::new(Some(&BearerToken::new("bad\ntoken")), None).is_err());
    }

    #[test]
    fn the_audit_reason_is_sent_trimmed_and_bounded() {
        let reason = |text: &str| {
            let mut interceptor = Authorization::new(None, Some(text))?;
            let request = interceptor.call(tonic::Request::new(())).unwrap();
            let value = request.metadata().get(AUDIT_REASON_METADATA_KEY);
            Ok::<_, ClientError>(value.map(|v| v.to_str().unwrap().to_owned()))
        };
        assert_eq!(reason(" CHG-7 ").unwrap().as_deref(), Some("CHG-7"));
        assert_eq!(reason("  ").unwrap(), None);
        assert!(reason("bad\nline").is_err());
        assert!(reason(&"r".repeat(MAX_AUDIT_REASON + 1)).is_err());
        assert!(reason(&"r".repeat(MAX_AUDIT_REASON)).unwrap().is_some());
    }
}
