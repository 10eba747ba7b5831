//! Parsers and range checks of single values, each returning the message an operator reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use idem_core::Risk;

use super::LogFormat;

pub(super) fn ranged(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let value: u64 = text
        .replace('_', "")
        .parse()
        .map_err(|_| "expected a whole number".to_owned())?;
    if value < min || value > max {
        return Err(format!("must be between {min} and {max}"));
    }
    Ok(value)
}

/// A switch: `on`/`true` or `off`/`false`.
pub(super) fn switch(text: &str) -> Result<bool, String> {
    match text {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err("expected on or off".to_owned()),
    }
}

pub(super) fn path(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    Ok(PathBuf::from(text))
}

/// An `IP:port` socket address (no host names: a node's addresses are what it binds and
/// what its peers dial, resolved by nobody).
pub(crate) fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| "expected an IP address and port such as 127.0.0.1:7400".to_owned())
}

/// A region or zone name: 1 to 64 characters of `A-Z a-z 0-9 . _ -` (it appears in metric
/// labels, logs and every group's membership).
pub(crate) fn location(text: &str) -> Result<String, String> {
    let ok = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(text.to_owned())
    } else {
        Err("expected 1 to 64 characters of A-Z a-z 0-9 . _ -".to_owned())
    }
}

pub(super) fn log_format(text: &str) -> Result<LogFormat, String> {
    match text.to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected text or json".to_owned()),
    }
}

pub(super) fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("not a log filter ({e}); example: info,idem_server=debug"))
}

pub(super) fn risk(text: &str) -> Result<Risk, String> {
    match text.to_ascii_uppercase().trim_start_matches("RISK_") {
        "LOW" => Ok(Risk::Low),
        "NORMAL" => Ok(Risk::Normal),
        "HIGH" => Ok(Risk::High),
        _ => Err("expected LOW, NORMAL or HIGH".to_owned()),
    }
}

pub(super) fn result_bytes(text: &str) -> Result<u32, String> {
    ranged(
        text,
        idem_core::policy::MIN_RESULT_BYTES.into(),
        idem_core::policy::MAX_RESULT_BYTES.into(),
    )
    .map(|n| n as u32)
}

pub(super) fn duration_in(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let value = humantime::parse_duration(text)
        .map_err(|_| "expected a duration such as 5s, 250ms or 24h".to_owned())?;
    if value < min || value > max {
        return Err(if max == Duration::MAX {
            format!("must be at least {}", format_duration(min))
        } else {
            format!(
                "must be between {} and {}",
                format_duration(min),
                format_duration(max)
            )
        });
    }
    Ok(value)
}

/// A duration in the configuration's spelling (`250ms`, `5s`, `1day`).
pub fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0s".to_owned();
    }
    humantime::format_duration(duration).to_string()
}
