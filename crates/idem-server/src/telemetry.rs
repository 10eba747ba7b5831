//! Structured logs on stderr, as text for people or JSON for log shippers.
//!
//! Request spans (see [`crate::api`]) carry `method`, `key_hash` (the first 8 bytes of
//! SHA-256 of the key, hex) and `operation_id`; neither format ever prints a raw
//! idempotency key, a request body or a stored result. The JSON format flattens each
//! event's fields and includes the current span's fields, so every line of a request can be
//! joined on `operation_id` or `key_hash`.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Registry};

use crate::config::LogFormat;

/// Installs the global subscriber. Fails if the filter is invalid or a subscriber is
/// already installed.
pub fn init(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let filter = EnvFilter::builder().parse(filter)?;
    let registry = Registry::default().with(filter);
    match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr).with_target(true))
            .try_init()?,
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr),
            )
            .try_init()?,
    }
    Ok(())
}
