//! The canonical request: the parts of an HTTP request that identify it for `jcs-sha256/v1`.
//!
//! Its canonical form is the RFC 8785 (JCS, see [`super::jcs`]) serialisation of one JSON
//! object with these members:
//!
//! | member        | JSON                         | rule |
//! |---------------|------------------------------|------|
//! | `method`      | string                       | an upper-case token, `A-Z`, 1 to 16 letters, validated, never case-folded |
//! | `route`       | string                       | the route template (`/v1/charges/{id}`), 1 to [`MAX_ROUTE_BYTES`] bytes |
//! | `path_params` | object of strings            | the values bound to the template's parameters |
//! | `query`       | object of arrays of strings  | see below |
//! | `body`        | any JSON                     | omitted when the request has no body |
//!
//! Because the form is built from parsed data, how the client spelled the request does not
//! matter: body member order, whitespace, escapes and number notation are all normalised.
//! What is *not* normalised is meaning:
//!
//! - **Query parameters**: pass them decoded (after percent-decoding), in the order they
//!   appeared. They become an object from name to the array of that name's values. The order
//!   of *different* names does not matter (`?a=1&b=2` equals `?b=2&a=1`), the order of the
//!   values of *one* name does (`?a=1&a=2` differs from `?a=2&a=1`), since applications
//!   commonly read repeated parameters as a list. `?a=` (an empty value) differs from no `a`.
//! - **Body**: no body and a JSON `null` body are different requests; the first omits the
//!   `body` member, the second has `"body":null`. Only JSON bodies are supported.
//! - Headers (authorization, tracing, ...) never enter the fingerprint.
//!
//! The size limit of the [`JcsOptions`] applies to a raw body before it is parsed and to the
//! whole canonical request, and the depth limit to the body.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::jcs::{self, compare_utf16, JcsOptions, JsonValue};
use super::{Fingerprint, FingerprintError, JCS_SHA256_V1};

/// The longest HTTP method accepted, in bytes.
pub const MAX_METHOD_LEN: usize = 16;

/// The longest route accepted, in bytes.
pub const MAX_ROUTE_BYTES: usize = 2048;

/// A request body: raw JSON bytes, or a value already parsed.
///
/// Both spellings of the same data give the same fingerprint.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestBody {
    /// JSON bytes as received; parsed strictly when the canonical form is computed.
    Raw(Vec<u8>),
    /// An already-parsed JSON value.
    Value(JsonValue),
}

/// The identifying parts of a request, from which a `jcs-sha256/v1` fingerprint is computed.
///
/// Built with [`CanonicalRequest::new`] and the `with_*` methods:
///
/// ```
/// use idem_core::fingerprint::request::CanonicalRequest;
///
/// let request = CanonicalRequest::new("POST", "/v1/accounts/{account}/charges")?
///     .with_path_param("account", "acct_42")
///     .with_query_param("expand", "customer")
///     .with_json_body(r#"{"amount": 1000, "currency": "EUR"}"#);
/// let fingerprint = request.fingerprint(1)?;
/// assert_eq!(fingerprint.algorithm, "jcs-sha256/v1");
/// assert_eq!(fingerprint.digest.len(), 32);
/// # Ok::<(), idem_core::fingerprint::FingerprintError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CanonicalRequest {
    method: String,
    route: String,
    path_params: BTreeMap<String, String>,
    query: Vec<(String, String)>,
    body: Option<RequestBody>,
    options: JcsOptions,
}

impl CanonicalRequest {
    /// A request with no parameters and no body, and the default [`JcsOptions`].
    ///
    /// `method` must already be an upper-case token (`A-Z`, 1 to [`MAX_METHOD_LEN`]
    /// letters): it is validated, not upper-cased, so `get` is an error rather than a
    /// silent alias of `GET`. `route` must be 1 to [`MAX_ROUTE_BYTES`] bytes.
    pub fn new(
        method: impl Into<String>,
        route: impl Into<String>,
    ) -> Result<Self, FingerprintError> {
        let method = method.into();
        if method.is_empty()
            || method.len() > MAX_METHOD_LEN
            || !method.bytes().all(|b| b.is_ascii_uppercase())
        {
            return Err(FingerprintError::InvalidMethod { method });
        }
        let route = route.into();
        if route.is_empty() || route.len() > MAX_ROUTE_BYTES {
            return Err(FingerprintError::InvalidRoute {
                max: MAX_ROUTE_BYTES,
                actual: route.len(),
            });
        }
        Ok(Self {
            method,
            route,
            path_params: BTreeMap::new(),
            query: Vec::new(),
            body: None,
            options: JcsOptions::new(),
        })
    }

    /// Sets a path parameter (replacing an earlier value of the same name).
    #[must_use]
    pub fn with_path_param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.path_params.insert(name.into(), value.into());
        self
    }

    /// Sets several path parameters (later ones replace earlier ones of the same name).
    #[must_use]
    pub fn with_path_params<K, V>(mut self, params: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.path_params
            .extend(params.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Appends one decoded query parameter. Repeating a name appends another value.
    #[must_use]
    pub fn with_query_param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    /// Appends decoded query parameters, in the order they appeared in the request.
    #[must_use]
    pub fn with_query<K, V>(mut self, params: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.query
            .extend(params.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Sets the body to raw JSON bytes (validated when the canonical form is computed).
    #[must_use]
    pub fn with_json_body(mut self, json: impl Into<Vec<u8>>) -> Self {
        self.body = Some(RequestBody::Raw(json.into()));
        self
    }

    /// Sets the body to an already-parsed JSON value.
    #[must_use]
    pub fn with_body_value(mut self, value: JsonValue) -> Self {
        self.body = Some(RequestBody::Value(value));
        self
    }

    /// Sets or clears the body.
    #[must_use]
    pub fn with_body(mut self, body: Option<RequestBody>) -> Self {
        self.body = body;
        self
    }

    /// Sets the size and depth limits (see [`JcsOptions`]).
    #[must_use]
    pub fn with_options(mut self, options: JcsOptions) -> Self {
        self.options = options;
        self
    }

    /// The HTTP method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The route template.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The path parameters.
    pub fn path_params(&self) -> &BTreeMap<String, String> {
        &self.path_params
    }

    /// The query parameters, in the order given.
    pub fn query(&self) -> &[(String, String)] {
        &self.query
    }

    /// The body, if the request has one.
    pub fn body(&self) -> Option<&RequestBody> {
        self.body.as_ref()
    }

    /// The limits applied when computing the canonical form.
    pub fn options(&self) -> &JcsOptions {
        &self.options
    }

    /// The RFC 8785 canonical JSON of this request (see the module documentation).
    ///
    /// Fails if the body is not acceptable JSON or a limit is exceeded.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, FingerprintError> {
        let parsed;
        let body = match &self.body {
            None => None,
            Some(RequestBody::Raw(raw)) => {
                parsed = jcs::parse_with(raw, &self.options)?;
                Some(&parsed)
            }
            Some(RequestBody::Value(value)) => Some(value),
        };

        // Member names in UTF-16 order: body < method < path_params < query < route.
        let mut out = Vec::new();
        out.push(b'{');
        if let Some(body) = body {
            out.extend_from_slice(b"\"body\":");
            jcs::write_value(body, &mut out, 0, self.options.max_depth())?;
            out.push(b',');
        }

        out.extend_from_slice(b"\"method\":");
        jcs::write_string(&self.method, &mut out);

        out.extend_from_slice(b",\"path_params\":{");
        // A BTreeMap iterates in UTF-8 order, which is not the canonical UTF-16 order.
        let mut params: Vec<(&String, &String)> = self.path_params.iter().collect();
        params.sort_by(|a, b| compare_utf16(a.0, b.0));
        for (i, (name, value)) in params.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            jcs::write_string(name, &mut out);
            out.push(b':');
            jcs::write_string(value, &mut out);
        }

        out.extend_from_slice(b"},\"query\":{");
        // A stable sort groups the values of each name and keeps their order.
        let mut query: Vec<&(String, String)> = self.query.iter().collect();
        query.sort_by(|a, b| compare_utf16(&a.0, &b.0));
        let mut previous: Option<&str> = None;
        for (name, value) in query {
            if previous == Some(name.as_str()) {
                out.push(b',');
            } else {
                if previous.is_some() {
                    out.extend_from_slice(b"],");
                }
                jcs::write_string(name, &mut out);
                out.extend_from_slice(b":[");
                previous = Some(name);
            }
            jcs::write_string(value, &mut out);
        }
        if previous.is_some() {
            out.push(b']');
        }

        out.extend_from_slice(b"},\"route\":");
        jcs::write_string(&self.route, &mut out);
        out.push(b'}');

        jcs::check_size(&out, &self.options)?;
        Ok(out)
    }

    /// The `jcs-sha256/v1` fingerprint: SHA-256 of [`Self::canonical_bytes`], tagged with
    /// the algorithm and the caller's request `schema_version`.
    pub fn fingerprint(&self, schema_version: u32) -> Result<Fingerprint, FingerprintError> {
        let digest = Sha256::digest(self.canonical_bytes()?);
        Ok(Fingerprint {
            algorithm: JCS_SHA256_V1.to_owned(),
            schema_version,
            digest: digest.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn request() -> CanonicalRequest {
        CanonicalRequest::new("POST", "/v1/accounts/{account}/charges").unwrap()
    }

    fn canonical(request: &CanonicalRequest) -> String {
        String::from_utf8(request.canonical_bytes().unwrap()).unwrap()
    }

    #[test]
    fn canonical_form_of_a_full_request() {
        let request = request()
            .with_path_param("account", "acct_42")
            .with_query_param("expand", "customer")
            .with_query_param("dry_run", "false")
            .with_query_param("expand", "invoice")
            .with_json_body(
                r#"{ "currency": "EUR", "amount": 1000.0, "meta": {"b": null, "a": "é"} }"#,
            );
        assert_eq!(
            canonical(&request),
            concat!(
                r#"{"body":{"amount":1000,"currency":"EUR","meta":{"a":"é","b":null}},"#,
                r#""method":"POST","path_params":{"account":"acct_42"},"#,
                r#""query":{"dry_run":["false"],"expand":["customer","invoice"]},"#,
                r#""route":"/v1/accounts/{account}/charges"}"#,
            )
        );
    }

    /// The pinned digest: changing it changes every stored fingerprint, so it must never
    /// change under `jcs-sha256/v1`. (Recomputable with
    /// `printf '%s' '<canonical form>' | sha256sum`.)
    #[test]
    fn golden_digest() {
        let request = request()
            .with_path_param("account", "acct_42")
            .with_query_param("expand", "customer")
            .with_json_body(r#"{"amount":1000,"currency":"EUR"}"#);
        assert_eq!(
            canonical(&request),
            concat!(
                r#"{"body":{"amount":1000,"currency":"EUR"},"method":"POST","#,
                r#""path_params":{"account":"acct_42"},"query":{"expand":["customer"]},"#,
                r#""route":"/v1/accounts/{account}/charges"}"#,
            )
        );
        let fingerprint = request.fingerprint(3).unwrap();
        assert_eq!(fingerprint.algorithm, JCS_SHA256_V1);
        assert_eq!(fingerprint.schema_version, 3);
        assert_eq!(fingerprint.to_hex(), GOLDEN_DIGEST);
    }

    const GOLDEN_DIGEST: &str = "e6ffcd5665ecf2a0c7806b830a4ffbef42333658ab66e93474c202a0fd82dab9";

    #[test]
    fn minimal_request() {
        let request = CanonicalRequest::new("GET", "/").unwrap();
        assert_eq!(
            canonical(&request),
            r#"{"method":"GET","path_params":{},"query":{},"route":"/"}"#
        );
    }

    #[test]
    fn absent_and_null_bodies_differ() {
        let absent = request();
        let null = request().with_json_body("null");
        let null_value = request().with_body_value(JsonValue::Null);
        let empty_object = request().with_json_body("{}");
        assert!(!canonical(&absent).contains("body"));
        assert!(canonical(&null).starts_with(r#"{"body":null,"#));
        assert_eq!(canonical(&null), canonical(&null_value));
        let digests: Vec<_> = [&absent, &null, &empty_object]
            .iter()
            .map(|r| r.fingerprint(1).unwrap().digest)
            .collect();
        assert_ne!(digests[0], digests[1]);
        assert_ne!(digests[1], digests[2]);
        assert_ne!(digests[0], digests[2]);
        // An empty body is not JSON; "no body" must be said with `None`.
        assert!(matches!(
            request().with_json_body("").canonical_bytes(),
            Err(FingerprintError::NotJson { .. })
        ));
        assert_eq!(request().with_json_body("1").with_body(None), absent);
    }

    #[test]
    fn raw_and_parsed_bodies_agree() {
        let raw = request().with_json_body(r#"{"b":[1, 2.0, "x"], "a": true}"#);
        let value = request().with_body_value(JsonValue::Object(vec![
            ("a".into(), JsonValue::Bool(true)),
            (
                "b".into(),
                JsonValue::Array(vec![
                    JsonValue::Number(1.0),
                    JsonValue::Number(2.0),
                    JsonValue::String("x".into()),
                ]),
            ),
        ]));
        let serde = serde_json::json!({"a": true, "b": [1, 2, "x"]});
        let serde = request().with_body_value(JsonValue::try_from(&serde).unwrap());
        assert_eq!(raw.fingerprint(1).unwrap(), value.fingerprint(1).unwrap());
        assert_eq!(raw.fingerprint(1).unwrap(), serde.fingerprint(1).unwrap());
    }

    #[test]
    fn body_spelling_does_not_matter_but_content_does() {
        let a = request().with_json_body(r#"{"amount":1000,"currency":"EUR"}"#);
        let b =
            request().with_json_body("{\n  \"currency\" : \"\\u0045UR\",\n  \"amount\" : 1e3\n}\n");
        let c = request().with_json_body(r#"{"amount":1001,"currency":"EUR"}"#);
        assert_eq!(a.fingerprint(1).unwrap(), b.fingerprint(1).unwrap());
        assert_ne!(a.fingerprint(1).unwrap(), c.fingerprint(1).unwrap());
    }

    #[test]
    fn query_names_are_unordered_but_values_of_one_name_are_ordered() {
        let base = request().with_query([("a", "1"), ("b", "2"), ("a", "3")]);
        let names_swapped = request().with_query([("b", "2"), ("a", "1"), ("a", "3")]);
        let values_swapped = request().with_query([("a", "3"), ("b", "2"), ("a", "1")]);
        assert_eq!(canonical(&base), canonical(&names_swapped));
        assert!(canonical(&base).contains(r#""query":{"a":["1","3"],"b":["2"]}"#));
        assert_ne!(canonical(&base), canonical(&values_swapped));
        // An empty value is not an absent parameter.
        let empty = request().with_query_param("a", "");
        assert!(canonical(&empty).contains(r#""query":{"a":[""]}"#));
        assert_ne!(canonical(&empty), canonical(&request()));
        // Names sort in UTF-16 order, like every JCS object.
        let query = request().with_query([("\u{fb33}", "x"), ("\u{1f600}", "y"), ("\u{e9}", "z")]);
        assert!(canonical(&query)
            .contains("\"query\":{\"\u{e9}\":[\"z\"],\"\u{1f600}\":[\"y\"],\"\u{fb33}\":[\"x\"]}"));
    }

    #[test]
    fn path_params_sort_in_utf16_order_and_escape() {
        let request = request()
            .with_path_params([("\u{fb33}", "1"), ("\u{1f600}", "2")])
            .with_path_param("q\"", "line\nbreak");
        assert!(canonical(&request).contains(
            "\"path_params\":{\"q\\\"\":\"line\\nbreak\",\"\u{1f600}\":\"2\",\"\u{fb33}\":\"1\"}"
        ));
        // Replacing a value is allowed; the last one wins.
        let replaced = self::request()
            .with_path_param("a", "1")
            .with_path_param("a", "2");
        assert_eq!(
            replaced.path_params().get("a").map(String::as_str),
            Some("2")
        );
    }

    #[test]
    fn every_part_changes_the_digest() {
        let base = request()
            .with_path_param("account", "a")
            .with_query_param("q", "1")
            .with_json_body("{}");
        let variants = [
            CanonicalRequest::new("PUT", base.route())
                .unwrap()
                .with_query_param("q", "1"),
            base.clone().with_path_param("account", "b"),
            base.clone().with_query_param("q", "2"),
            base.clone().with_json_body("[]"),
            base.clone().with_body(None),
        ];
        let digest = base.fingerprint(1).unwrap().digest;
        for variant in variants {
            assert_ne!(
                variant.fingerprint(1).unwrap().digest,
                digest,
                "{variant:?}"
            );
        }
        // The schema version is carried beside the digest, not hashed into it.
        let v2 = base.fingerprint(2).unwrap();
        assert_eq!(v2.digest, digest);
        assert_eq!(v2.schema_version, 2);
    }

    #[test]
    fn method_and_route_are_validated() {
        for method in ["GET", "POST", "A", "ABCDEFGHIJKLMNOP"] {
            assert!(CanonicalRequest::new(method, "/").is_ok(), "{method}");
        }
        for method in [
            "",
            "get",
            "Post",
            "GET ",
            "M-SEARCH",
            "ABCDEFGHIJKLMNOPQ",
            "GÉT",
            "GET\n",
        ] {
            assert_eq!(
                CanonicalRequest::new(method, "/"),
                Err(FingerprintError::InvalidMethod {
                    method: method.into()
                }),
                "{method:?}"
            );
        }
        assert_eq!(
            CanonicalRequest::new("GET", ""),
            Err(FingerprintError::InvalidRoute {
                max: MAX_ROUTE_BYTES,
                actual: 0
            })
        );
        let long = "/".repeat(MAX_ROUTE_BYTES + 1);
        assert_eq!(
            CanonicalRequest::new("GET", long),
            Err(FingerprintError::InvalidRoute {
                max: MAX_ROUTE_BYTES,
                actual: MAX_ROUTE_BYTES + 1
            })
        );
        assert!(CanonicalRequest::new("GET", "/".repeat(MAX_ROUTE_BYTES)).is_ok());
    }

    #[test]
    fn body_errors_surface() {
        let dup = request().with_json_body(r#"{"a":1,"a":2}"#);
        assert_eq!(
            dup.fingerprint(1),
            Err(FingerprintError::DuplicateMember { name: "a".into() })
        );
        let deep = request().with_json_body("[".repeat(200));
        assert_eq!(
            deep.fingerprint(1),
            Err(FingerprintError::TooDeep { limit: 128 })
        );
        let nan = request().with_body_value(JsonValue::Number(f64::NAN));
        assert_eq!(nan.fingerprint(1), Err(FingerprintError::NonFiniteNumber));
        let huge = request().with_json_body(vec![b' '; jcs::DEFAULT_MAX_BYTES + 1]);
        assert_eq!(
            huge.fingerprint(1),
            Err(FingerprintError::TooLarge {
                limit: jcs::DEFAULT_MAX_BYTES,
                actual: jcs::DEFAULT_MAX_BYTES + 1
            })
        );
    }

    #[test]
    fn size_limit_covers_the_whole_canonical_request() {
        let options = JcsOptions::new().with_max_bytes(100);
        let small = request().with_options(options);
        assert!(small.canonical_bytes().is_ok());
        let big = small.with_query_param("x", "y".repeat(100));
        assert!(matches!(
            big.canonical_bytes(),
            Err(FingerprintError::TooLarge { limit: 100, .. })
        ));
    }

    fn arb_pairs() -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::vec(("[ab\u{e9}\u{fb33}\u{1f600}]{0,2}", any::<String>()), 0..8)
    }

    proptest! {
        #[test]
        fn body_spelling_never_changes_the_digest(
            value in jcs::tests::arb_value(),
            seed in 1u64..,
        ) {
            let mut noisy = String::new();
            jcs::tests::write_noisy(&value, &mut jcs::tests::Rng(seed), &mut noisy);
            let parsed = request().with_body_value(value).fingerprint(7).unwrap();
            let raw = request().with_json_body(noisy).fingerprint(7).unwrap();
            prop_assert_eq!(parsed, raw);
        }

        #[test]
        fn query_canonical_form_is_grouped_and_ordered(pairs in arb_pairs(), seed in any::<u64>()) {
            // Reorder the pairs so that the relative order within each name is kept.
            let mut names: Vec<&String> = pairs.iter().map(|(n, _)| n).collect();
            names.sort();
            names.dedup();
            let mut reordered: Vec<(String, String)> = Vec::new();
            let mut remaining: Vec<Vec<&(String, String)>> = names
                .iter()
                .map(|n| pairs.iter().filter(|(m, _)| &m == n).collect::<Vec<_>>())
                .collect();
            let mut state = seed | 1;
            while remaining.iter().any(|q| !q.is_empty()) {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let nonempty: Vec<usize> =
                    (0..remaining.len()).filter(|&i| !remaining[i].is_empty()).collect();
                let pick = nonempty[(state >> 33) as usize % nonempty.len()];
                reordered.push(remaining[pick].remove(0).clone());
            }
            let a = request().with_query(pairs.clone()).fingerprint(1).unwrap();
            let b = request().with_query(reordered).fingerprint(1).unwrap();
            prop_assert_eq!(a, b);
            // And the query object is valid canonical JSON on its own.
            let bytes = request().with_query(pairs).canonical_bytes().unwrap();
            prop_assert_eq!(jcs::canonicalize(&bytes).unwrap(), bytes);
        }
    }
}
