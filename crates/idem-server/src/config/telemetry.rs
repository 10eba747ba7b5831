//! `[telemetry]`: where spans are exported as OpenTelemetry traces (off by default).
//!
//! The endpoint is checked here, at start, rather than by the exporter: a typo would
//! otherwise only show as traces that never arrive.

use super::sources::{Sources, TELEMETRY_OTLP_ENDPOINT};

/// Longest endpoint accepted (a URL, not a document).
const MAX_ENDPOINT: usize = 2048;

/// The `[telemetry]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The OTLP/gRPC collector (`http://host:4317`); `None`: no trace export.
    pub otlp_endpoint: Option<String>,
}

impl TelemetryConfig {
    /// The section as `--print-config` writes it.
    pub fn to_toml(&self) -> toml::Table {
        let mut table = toml::Table::new();
        if let Some(endpoint) = &self.otlp_endpoint {
            table.insert(
                "otlp_endpoint".into(),
                toml::Value::String(endpoint.clone()),
            );
        }
        table
    }
}

/// An `http://` or `https://` URL with a host; empty means off.
fn endpoint(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Ok(String::new());
    }
    if text.len() > MAX_ENDPOINT {
        return Err(format!("expected at most {MAX_ENDPOINT} characters"));
    }
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or("expected an http:// or https:// URL such as http://127.0.0.1:4317")?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("expected a URL with a host, such as http://127.0.0.1:4317".to_owned());
    }
    Ok(text.to_owned())
}

/// Reads `[telemetry]`.
pub(super) fn build(sources: &Sources<'_>, p: &mut Vec<String>) -> TelemetryConfig {
    let otlp_endpoint = sources.get(TELEMETRY_OTLP_ENDPOINT, String::new(), endpoint, p);
    TelemetryConfig {
        otlp_endpoint: (!otlp_endpoint.is_empty()).then_some(otlp_endpoint),
    }
}

#[cfg(test)]
mod tests {
    use super::endpoint;

    #[test]
    fn endpoints_are_urls_with_a_host() {
        assert_eq!(endpoint("").unwrap(), "");
        assert_eq!(
            endpoint("http://127.0.0.1:4317").unwrap(),
            "http://127.0.0.1:4317"
        );
        assert!(endpoint("https://otel.example:4317/").is_ok());
        for bad in ["127.0.0.1:4317", "http://", "ftp://x", "http://a b"] {
            assert!(endpoint(bad).is_err(), "{bad} accepted");
        }
        assert!(endpoint(&format!("http://{}", "a".repeat(3000))).is_err());
    }
}
