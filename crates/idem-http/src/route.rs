//! Route templates (`/v1/accounts/{account}/charges`) and their matching.
//!
//! The endpoint of a record's scope and the `route` of its fingerprint must be the route
//! *template*, not the concrete path: two charges for two accounts are different requests of
//! one endpoint, told apart by the path parameters that enter the fingerprint. Under axum the
//! template comes from `MatchedPath`; under a plain tower/hyper stack the layer matches the
//! configured templates itself. Both use this one matcher for the parameters, so the same
//! request gives the same fingerprint under either stack.

use std::borrow::Cow;

/// One segment of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// A literal segment.
    Literal(String),
    /// `{name}`: one segment, bound to `name`.
    Param(String),
    /// `{*name}`: the rest of the path (last segment only).
    Rest(String),
}

/// A parsed route template in axum 0.8 syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTemplate {
    raw: String,
    segments: Vec<Segment>,
}

/// A template that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Templates start with `/` and contain printable ASCII without spaces.
    #[error("route template {0:?} must start with '/' and be printable ASCII without spaces")]
    Shape(String),
    /// `{` without `}`, an empty name, or `{*rest}` before the last segment.
    #[error("route template {0:?} has a malformed parameter")]
    Param(String),
}

impl RouteTemplate {
    /// Parses a template such as `/v1/charges/{id}` or `/files/{*path}`.
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        if !raw.starts_with('/') || !raw.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TemplateError::Shape(raw.to_owned()));
        }
        let parts: Vec<&str> = raw[1..].split('/').collect();
        let mut segments = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let segment = match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(name) if name.starts_with('*') && name.len() > 1 && i + 1 == parts.len() => {
                    Segment::Rest(name[1..].to_owned())
                }
                Some(name) if !name.is_empty() && !name.contains(['{', '}', '*']) => {
                    Segment::Param(name.to_owned())
                }
                Some(_) => return Err(TemplateError::Param(raw.to_owned())),
                None if part.contains(['{', '}']) => {
                    return Err(TemplateError::Param(raw.to_owned()))
                }
                None => Segment::Literal((*part).to_owned()),
            };
            segments.push(segment);
        }
        Ok(RouteTemplate {
            raw: raw.to_owned(),
            segments,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The path parameters (percent-decoded) when `path` matches, else `None`.
    pub fn matches(&self, path: &str) -> Option<Vec<(String, String)>> {
        let rest = path.strip_prefix('/')?;
        let mut parts = rest.split('/');
        let mut params = Vec::new();
        for (i, segment) in self.segments.iter().enumerate() {
            match segment {
                Segment::Rest(name) => {
                    let tail: Vec<&str> = rest.split('/').skip(i).collect();
                    params.push((name.clone(), percent_decode(&tail.join("/")).into_owned()));
                    return Some(params);
                }
                Segment::Literal(literal) => {
                    if parts.next()? != literal {
                        return None;
                    }
                }
                Segment::Param(name) => {
                    let value = parts.next().filter(|v| !v.is_empty())?;
                    params.push((name.clone(), percent_decode(value).into_owned()));
                }
            }
        }
        parts.next().is_none().then_some(params)
    }
}

/// Decodes `%XX` escapes; a malformed escape or a result that is not UTF-8 is kept as is.
pub fn percent_decode(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        });
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    match String::from_utf8(out) {
        Ok(decoded) => Cow::Owned(decoded),
        Err(_) => Cow::Borrowed(text),
    }
}

/// Decodes an `application/x-www-form-urlencoded` query into its pairs, in order.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| percent_decode(&s.replace('+', " ")).into_owned();
            (decode(name), decode(value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn matches_literals_params_and_rest() {
        let t = RouteTemplate::parse("/v1/accounts/{account}/charges").unwrap();
        assert_eq!(
            t.matches("/v1/accounts/acct%2042/charges"),
            Some(pairs(&[("account", "acct 42")]))
        );
        assert_eq!(t.matches("/v1/accounts//charges"), None);
        assert_eq!(t.matches("/v1/accounts/a/charges/x"), None);
        assert_eq!(t.matches("/v1/accounts/a"), None);
        let rest = RouteTemplate::parse("/files/{*path}").unwrap();
        assert_eq!(rest.matches("/files/a/b"), Some(pairs(&[("path", "a/b")])));
        assert_eq!(
            RouteTemplate::parse("/").unwrap().matches("/"),
            Some(vec![])
        );
    }

    #[test]
    fn refuses_malformed_templates() {
        for bad in ["v1", "/a b", "/{", "/{}", "/{*rest}/x", "/a{b}"] {
            assert!(RouteTemplate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn query_and_percent_decoding() {
        assert_eq!(
            parse_query("a=1&b=x+y&a=%32&c&&d="),
            pairs(&[("a", "1"), ("b", "x y"), ("a", "2"), ("c", ""), ("d", "")])
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%ff"), "%ff");
    }
}
