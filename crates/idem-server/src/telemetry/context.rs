//! W3C trace context across the follower→leader forwarding hop.
//!
//! A claim sent to a follower runs on the leader, in another process: without the context
//! its leader-side spans would start a trace of their own and nobody could tell which
//! client request they served. The follower writes the current span's context into the
//! `Forward` request's metadata as `traceparent` (and `tracestate`); the leader reads it
//! and makes its `forwarded` span a child of the follower's span. With trace export off the
//! current span has no OpenTelemetry context, nothing is written, and the leader's span is a
//! plain log span, so the hop costs nothing extra.
//!
//! The metadata is read from a peer on the Raft port: a malformed `traceparent` is ignored
//! (the span starts a new trace), never an error, and only the two W3C keys are read.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Writes the current span's trace context into outgoing request metadata.
pub fn inject(metadata: &mut MetadataMap) {
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut Outgoing(metadata));
}

/// A span for a forwarded request of `kind`, child of the trace context in `metadata`
/// when the follower sent one.
pub fn forwarded_span(kind: &'static str, group: u64, metadata: &MetadataMap) -> tracing::Span {
    let span = tracing::info_span!("forwarded", kind, group);
    let parent = TraceContextPropagator::new().extract(&Incoming(metadata));
    // Fails only when trace export is off (no OpenTelemetry layer): nothing to link then.
    let _ = span.set_parent(parent);
    span
}

/// Outgoing metadata as a propagator's carrier.
struct Outgoing<'a>(&'a mut MetadataMap);

impl Injector for Outgoing<'_> {
    fn set(&mut self, key: &str, value: String) {
        let Ok(key) = MetadataKey::from_bytes(key.as_bytes()) else {
            return;
        };
        if let Ok(value) = MetadataValue::try_from(value) {
            self.0.insert(key, value);
        }
    }
}

/// Incoming metadata as a propagator's carrier: only ASCII values are readable.
struct Incoming<'a>(&'a MetadataMap);

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|key| match key {
                tonic::metadata::KeyRef::Ascii(key) => Some(key.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::Context;

    fn remote() -> Context {
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        Context::new().with_remote_span_context(span)
    }

    #[test]
    fn trace_context_round_trips_through_metadata() {
        let mut metadata = MetadataMap::new();
        TraceContextPropagator::new().inject_context(&remote(), &mut Outgoing(&mut metadata));
        assert_eq!(
            metadata.get("traceparent").unwrap().to_str().unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let back = TraceContextPropagator::new().extract(&Incoming(&metadata));
        assert_eq!(
            back.span().span_context().trace_id(),
            remote().span().span_context().trace_id()
        );
    }

    #[test]
    fn a_malformed_traceparent_starts_no_trace() {
        let mut metadata = MetadataMap::new();
        metadata.insert("traceparent", "00-not-a-trace-01".parse().unwrap());
        let back = TraceContextPropagator::new().extract(&Incoming(&metadata));
        assert!(!back.span().span_context().is_valid());
    }

    #[test]
    fn without_trace_export_nothing_is_injected() {
        let mut metadata = MetadataMap::new();
        inject(&mut metadata);
        assert!(metadata.is_empty());
        let span = forwarded_span("propose", 0, &metadata);
        assert!(!span.context().span().span_context().is_valid());
    }
}
