//! Structured logs on stderr, as text for people or JSON for log shippers, and, when
//! `[telemetry] otlp_endpoint` is set, the same spans exported as OpenTelemetry traces.
//!
//! Request spans (see [`crate::api`]) carry `method`, `key_hash` (the first 8 bytes of
//! SHA-256 of the key, hex) and `operation_id`; neither format ever prints a raw
//! idempotency key, a request body or a stored result. The JSON format flattens each
//! event's fields and includes the current span's fields, so every line of a request can be
//! joined on `operation_id` or `key_hash`.
//!
//! Traces answer what logs cannot: where the time of one forwarded claim went, across the
//! follower that received it and the leader that ran it. The exporter is OTLP over gRPC
//! (the tonic the node already serves with), batched on a background thread so a slow or
//! absent collector costs the request path nothing but a queue push; spans are dropped,
//! never waited for, when the queue is full. The log filter (`log_level`) only filters the
//! log lines: the trace layer keeps idem's own spans at `info` whatever the log level, so
//! turning logs down does not blind traces. The trace context crosses the forwarding hop
//! as W3C `traceparent` metadata ([`context`]).

pub mod context;

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer, Registry};

use crate::config::LogFormat;

/// The `service.name` of exported spans.
const SERVICE_NAME: &str = "idemd";
/// How long one export to the collector may take before the batch is dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Telemetry::shutdown`] waits for the last batch.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// A boxed layer over the plain registry: the text, JSON and trace layers in one list.
type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The installed logging and, when configured, the trace exporter; flush it before exit.
#[must_use = "dropping the guard does not flush the last spans: call shutdown"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still queued and stops the exporter. Blocks up to a few seconds;
    /// call it from outside the async runtime's worker threads (or in `spawn_blocking`).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(error) = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
                eprintln!("idemd: flushing traces: {error}");
            }
        }
    }

    /// Exports the spans queued so far (tests read a collector afterwards). Blocking, as
    /// [`Telemetry::shutdown`].
    pub fn flush(&self) -> anyhow::Result<()> {
        if let Some(provider) = &self.provider {
            provider.force_flush()?;
        }
        Ok(())
    }
}

/// Installs the global subscriber: logs in `format` filtered by `filter`, and spans
/// exported to `otlp_endpoint` when given. With an endpoint it must run inside a tokio
/// runtime (the exporter's gRPC channel is spawned on it). Fails if the filter or the
/// endpoint is invalid or a subscriber is already installed.
pub fn init(
    format: LogFormat,
    filter: &str,
    otlp_endpoint: Option<&str>,
) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::builder().parse(filter)?;
    let mut layers = vec![log_layer(format, filter)];
    let provider = match otlp_endpoint {
        Some(endpoint) => {
            let provider = tracer_provider(endpoint)?;
            layers.push(trace_layer(&provider));
            Some(provider)
        }
        None => None,
    };
    Registry::default().with(layers).try_init()?;
    Ok(Telemetry { provider })
}

fn log_layer(format: LogFormat, filter: EnvFilter) -> BoxedLayer {
    match format {
        LogFormat::Text => fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(true)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    }
}

/// idem's spans and events at `info` and above, as OpenTelemetry spans.
fn trace_layer(provider: &SdkTracerProvider) -> BoxedLayer {
    let ours = Targets::new()
        .with_target("idem_server", Level::INFO)
        .with_target("idem_raft", Level::INFO)
        .with_target("idem_store", Level::INFO);
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        .with_filter(ours)
        .boxed()
}

fn tracer_provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let resource = Resource::builder().with_service_name(SERVICE_NAME).build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}
