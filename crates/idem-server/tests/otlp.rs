//! OpenTelemetry trace export: a 3-node cluster in this process exports its spans over
//! OTLP/gRPC to a collector served by the test, and a claim sent to a follower is one trace
//! across the forwarding hop: the leader's `forwarded` span has the follower's `rpc` span's
//! trace id and that span as its parent (the W3C `traceparent` in the `Forward` metadata).
//!
//! Its own test binary: the trace exporter is part of the process-wide subscriber.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use idem_proto::testing::requests;
use idem_proto::v1::idempotency_client::IdempotencyClient;
use idem_server::config::{AuthConfig, LogFormat};
use idem_server::telemetry;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use tonic::{Request, Response, Status};

/// An OTLP trace collector that keeps every span it receives.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Collector {
    /// Serves the collector on a loopback port; returns its address.
    async fn serve(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let service = TraceServiceServer::new(self.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        addr
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

/// The string value of a span attribute.
fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        })
}

/// Exports the queued spans (blocking, off the runtime's workers).
async fn flush(telemetry: telemetry::Telemetry) -> telemetry::Telemetry {
    tokio::task::spawn_blocking(move || {
        telemetry.flush().expect("spans exported");
        telemetry
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forwarded_claim_is_one_trace_across_follower_and_leader() {
    let collector = Collector::default();
    let endpoint = format!("http://{}", collector.serve().await);
    // Logs at warn: the trace layer keeps idem's info spans whatever the log level.
    let telemetry = telemetry::init(LogFormat::Text, "warn", Some(&endpoint)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let nodes = support::three_nodes(dir.path(), AuthConfig::off()).await;
    let follower = &nodes[support::roles(&nodes).1[0]];

    let mut client = IdempotencyClient::connect(format!("http://{}", follower.api_addr()))
        .await
        .unwrap();
    let claim = requests::claim(requests::scope("acme"), "otlp-1", "h1", r#"{"amount": 5}"#);
    let answer = client.claim(claim).await.unwrap().into_inner();
    assert_eq!(answer.fence, 1, "the follower's claim was acquired");

    let telemetry = flush(telemetry).await;
    let spans = collector.spans();
    let rpc = spans
        .iter()
        .find(|s| s.name == "rpc" && attribute(s, "method") == Some("claim"))
        .unwrap_or_else(|| panic!("no claim span among {} exported spans", spans.len()));
    let forwarded: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "forwarded" && attribute(s, "kind") == Some("propose"))
        .collect();
    assert!(
        !forwarded.is_empty(),
        "the leader exported no forwarded span"
    );
    let hop = forwarded
        .iter()
        .find(|s| s.trace_id == rpc.trace_id)
        .unwrap_or_else(|| {
            panic!(
                "no forwarded span in the follower's trace {}; forwarded traces: {:?}",
                hex::encode(&rpc.trace_id),
                forwarded
                    .iter()
                    .map(|s| hex::encode(&s.trace_id))
                    .collect::<Vec<_>>()
            )
        });
    assert_eq!(
        hop.parent_span_id, rpc.span_id,
        "the leader's span is a child of the follower's claim span"
    );
    assert_ne!(hop.span_id, rpc.span_id);
    assert_eq!(rpc.trace_id.len(), 16);

    support::shutdown(nodes).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap();
}
