//! From an HTTP request to idem's `CanonicalRequest`.
//!
//! The fingerprint decides whether a retry is "the same request", so it must ignore how the
//! client spelled it (member order, whitespace, query order of different names: idem-core's
//! `jcs-sha256/v1` does that) and include exactly what identifies the operation:
//!
//! - method, route template, path parameters and the decoded query, always;
//! - the body: the whole JSON body, or only the route's selected members (JSON Pointers),
//!   as an object from pointer to value (absent members are left out);
//! - a body that is not JSON (another content type, or malformed) enters as the string
//!   `sha256:<hex>` of its bytes: still compared exactly, never parsed;
//! - the route's selected headers, as path parameters named `header.<name>` (a template's
//!   parameter names cannot contain `.`, so they never collide), repeated values joined
//!   with `, `.

use http::request::Parts;
use idem_core::fingerprint::{CanonicalRequest, FingerprintError};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::FingerprintSpec;
use crate::route::parse_query;

/// The canonical request of `parts` and `body` on route `template`.
pub fn canonical_request(
    parts: &Parts,
    template: &str,
    path_params: &[(String, String)],
    body: &[u8],
    spec: &FingerprintSpec,
) -> Result<CanonicalRequest, FingerprintError> {
    let mut request = CanonicalRequest::new(parts.method.as_str(), template)?
        .with_path_params(path_params.iter().cloned())
        .with_query(parse_query(parts.uri.query().unwrap_or("")));
    for name in &spec.headers {
        let values: Vec<&str> = parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or(""))
            .collect();
        if !values.is_empty() {
            request = request.with_path_param(format!("header.{name}"), values.join(", "));
        }
    }
    if body.is_empty() {
        return Ok(request);
    }
    Ok(request.with_json_body(body_form(parts, body, spec)))
}

/// The JSON text that stands for the body in the fingerprint.
fn body_form(parts: &Parts, body: &[u8], spec: &FingerprintSpec) -> Vec<u8> {
    let parsed = is_json(parts)
        .then(|| serde_json::from_slice::<Value>(body).ok())
        .flatten();
    match (parsed, &spec.body_fields) {
        (Some(value), Some(pointers)) => {
            let selected: serde_json::Map<String, Value> = pointers
                .iter()
                .filter_map(|p| value.pointer(p).map(|v| (p.clone(), v.clone())))
                .collect();
            serde_json::to_vec(&selected).unwrap_or_default()
        }
        // The raw bytes: idem-core parses them strictly and canonicalises.
        (Some(_), None) => body.to_vec(),
        (None, _) => {
            let digest = hex::encode(Sha256::digest(body));
            format!("\"sha256:{digest}\"").into_bytes()
        }
    }
}

/// A JSON content type (`application/json`, `application/*+json`), or none given.
fn is_json(parts: &Parts) -> bool {
    let Some(value) = parts.headers.get(http::header::CONTENT_TYPE) else {
        return true;
    };
    let essence = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderName;

    fn parts(uri: &str, content_type: Option<&str>, headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::builder().method("POST").uri(uri);
        if let Some(ct) = content_type {
            builder = builder.header("content-type", ct);
        }
        for (n, v) in headers {
            builder = builder.header(*n, *v);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn digest(p: &Parts, body: &str, spec: &FingerprintSpec) -> Vec<u8> {
        let params = vec![("id".to_owned(), "c1".to_owned())];
        canonical_request(p, "/v1/charges/{id}", &params, body.as_bytes(), spec)
            .unwrap()
            .fingerprint(1)
            .unwrap()
            .digest
    }

    #[test]
    fn spelling_does_not_matter_meaning_does() {
        let spec = FingerprintSpec::default();
        let p = parts("/v1/charges/c1?a=1&b=2", Some("application/json"), &[]);
        let q = parts("/v1/charges/c1?b=2&a=1", None, &[]);
        assert_eq!(
            digest(&p, r#"{"amount":1,"currency":"EUR"}"#, &spec),
            digest(&q, r#"{ "currency": "EUR", "amount": 1.0 }"#, &spec)
        );
        assert_ne!(
            digest(&p, r#"{"amount":1}"#, &spec),
            digest(&p, r#"{"amount":2}"#, &spec)
        );
        let other_query = parts("/v1/charges/c1?a=2&b=2", None, &[]);
        assert_ne!(digest(&p, "", &spec), digest(&other_query, "", &spec));
    }

    #[test]
    fn selected_fields_and_headers() {
        let spec = FingerprintSpec {
            headers: vec![HeaderName::from_static("x-account")],
            body_fields: Some(vec!["/amount".into(), "/card/last4".into()]),
            server_hashed: false,
        };
        let a = parts("/v1/charges/c1", None, &[("x-account", "A")]);
        let b = parts("/v1/charges/c1", None, &[("x-account", "B")]);
        let body1 = r#"{"amount":1,"card":{"last4":"4242"},"note":"x"}"#;
        let body2 = r#"{"amount":1,"card":{"last4":"4242"},"note":"y"}"#;
        assert_eq!(digest(&a, body1, &spec), digest(&a, body2, &spec));
        assert_ne!(digest(&a, body1, &spec), digest(&b, body1, &spec));
        let body3 = r#"{"amount":2,"card":{"last4":"4242"}}"#;
        assert_ne!(digest(&a, body1, &spec), digest(&a, body3, &spec));
    }

    #[test]
    fn non_json_bodies_are_hashed() {
        let spec = FingerprintSpec::default();
        let text = parts("/v1/charges/c1", Some("text/plain"), &[]);
        assert_eq!(digest(&text, "a b", &spec), digest(&text, "a b", &spec));
        assert_ne!(digest(&text, "a b", &spec), digest(&text, "a  b", &spec));
        let bad_json = parts("/v1/charges/c1", Some("application/json"), &[]);
        assert_eq!(
            digest(&bad_json, "{oops", &spec),
            digest(&bad_json, "{oops", &spec)
        );
    }
}
