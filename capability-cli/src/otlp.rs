//! `--otlp <endpoint>`: the MCP spans and durations of `capability gateway` and `capability
//! proxy` exported over OTLP/HTTP (protobuf), by OpenTelemetry's conventions for MCP.
//!
//! The libraries make `tracing` spans ([`capability::mcp::telemetry`]): `mcp.server` for each
//! client's request, `execute_tool` for each audited call in it, `mcp.client` for the leg to
//! the server. Here they become OpenTelemetry spans (`tracing-opentelemetry`, only the spans
//! of `capability::*` targets, every one sampled whatever the client's `traceparent` flags say),
//! batched and sent to `{endpoint}/v1/traces`; the
//! durations are histograms sent to `{endpoint}/v1/metrics` every 10 seconds and when the
//! command ends. The client's `traceparent`, `tracestate` and `baggage` (W3C, in
//! `params._meta`) make the `mcp.server` span the child of the client's, and the request passed
//! to the server carries the `mcp.client` span's, so one trace spans client, gateway and
//! server.
//!
//! The service is named `capability-gateway` or `capability-proxy` unless `OTEL_SERVICE_NAME`
//! says otherwise; `OTEL_RESOURCE_ATTRIBUTES` adds resource attributes.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{KeyValue, propagation::TextMapCompositePropagator};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, filter};

use capability::mcp::telemetry::{self, Ended, SessionEnded, Side, Telemetry, TraceContext};

/// How often the durations are sent (and once more when the command ends).
const METRICS_EVERY: Duration = Duration::from_secs(10);

/// The bucket boundaries the conventions advise for the MCP durations, in seconds.
const BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The exporters while the command runs: dropped, they send what is left (spans not yet sent,
/// the durations so far) and stop.
pub struct Otlp {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
}

/// Starts exporting to `endpoint` (`http://host:4318`, say) as `service`. Call it before the
/// async runtime starts (the HTTP client blocks on threads of its own). The libraries'
/// warnings go to standard error as `who: ...` ([`crate::report`]) in the same subscriber.
pub fn start(endpoint: &str, service: &str, who: &'static str) -> Result<Otlp, String> {
    let base = endpoint.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) || base.len() < 10 {
        return Err(format!(
            "--otlp wants the URL of an OTLP/HTTP receiver, such as http://127.0.0.1:4318 \
             (spans go to /v1/traces, metrics to /v1/metrics); `{endpoint}` is not one"
        ));
    }
    // The HTTP client is reqwest on rustls, whose crypto is ring (as for an HTTP upstream).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service.to_owned());
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/traces"))
        .build()
        .map_err(|e| format!("--otlp {endpoint}: the span exporter: {e}"))?;
    let durations = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/metrics"))
        .build()
        .map_err(|e| format!("--otlp {endpoint}: the metric exporter: {e}"))?;
    let traces = SdkTracerProvider::builder()
        // Every governed request is recorded: a client's `traceparent` names the parent, but
        // its sampling flag does not decide what the gateway records.
        .with_sampler(Sampler::AlwaysOn)
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let metrics = SdkMeterProvider::builder()
        .with_reader(
            PeriodicReader::builder(durations)
                .with_interval(METRICS_EVERY)
                .build(),
        )
        .with_resource(resource)
        .build();
    let tracer = traces.tracer("capability");
    // Only our spans: rmcp's, hyper's and the rest stay out of the trace, and so do the
    // events (each audit record is one; the trail holds them, and as span events they cost a
    // third of a traced call).
    let ours = filter::filter_fn(|meta| meta.is_span() && meta.target().starts_with("capability"));
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(ours),
        )
        .with(crate::report::layer(who));
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| format!("--otlp: cannot install the tracing subscriber: {e}"))?;
    let meter = metrics.meter("capability");
    let histogram = |name: &'static str, what: &'static str| {
        meter
            .f64_histogram(name)
            .with_unit("s")
            .with_description(what)
            .with_boundaries(BOUNDARIES.to_vec())
            .build()
    };
    let exported = Exported {
        propagator: TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]),
        server_operation: histogram(
            "mcp.server.operation.duration",
            "MCP request or notification duration as observed on the receiver",
        ),
        client_operation: histogram(
            "mcp.client.operation.duration",
            "The duration of the MCP request as observed on the sender",
        ),
        server_session: histogram(
            "mcp.server.session.duration",
            "The duration of the MCP session as observed on the MCP server",
        ),
        client_session: histogram(
            "mcp.client.session.duration",
            "The duration of the MCP session as observed on the MCP client",
        ),
    };
    telemetry::install(exported).map_err(|e| format!("--otlp: {e}"))?;
    Ok(Otlp { traces, metrics })
}

impl std::fmt::Debug for Otlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otlp").finish_non_exhaustive()
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        let say = |what: &str, e: &dyn std::fmt::Display| {
            eprintln!("capability: --otlp: the last {what} could not be sent: {e}");
        };
        // Each sends what it holds, then stops.
        if let Err(e) = self.traces.shutdown() {
            say("spans", &e);
        }
        if let Err(e) = self.metrics.shutdown() {
            say("durations", &e);
        }
    }
}

struct Exported {
    propagator: TextMapCompositePropagator,
    server_operation: Histogram<f64>,
    client_operation: Histogram<f64>,
    server_session: Histogram<f64>,
    client_session: Histogram<f64>,
}

fn key_values(attributes: Vec<(&'static str, &str)>) -> Vec<KeyValue> {
    attributes
        .into_iter()
        .map(|(key, value)| KeyValue::new(key, value.to_owned()))
        .collect()
}

impl Telemetry for Exported {
    fn adopt(&self, span: &tracing::Span, parent: &TraceContext) {
        let mut carrier = HashMap::new();
        carrier.insert("traceparent".to_owned(), parent.traceparent.clone());
        if let Some(state) = &parent.tracestate {
            carrier.insert("tracestate".to_owned(), state.clone());
        }
        if let Some(baggage) = &parent.baggage {
            carrier.insert("baggage".to_owned(), baggage.clone());
        }
        let _ = span.set_parent(self.propagator.extract(&carrier));
    }

    fn context(&self, span: &tracing::Span) -> Option<TraceContext> {
        let mut carrier = HashMap::new();
        self.propagator
            .inject_context(&span.context(), &mut carrier);
        Some(TraceContext {
            traceparent: carrier.remove("traceparent")?,
            tracestate: carrier.remove("tracestate").filter(|s| !s.is_empty()),
            baggage: carrier.remove("baggage").filter(|s| !s.is_empty()),
        })
    }

    fn operation(&self, side: Side, ended: &Ended<'_>, seconds: f64) {
        let histogram = match side {
            Side::Server => &self.server_operation,
            Side::Client => &self.client_operation,
        };
        histogram.record(seconds, &key_values(ended.attributes()));
    }

    fn session(&self, side: Side, ended: &SessionEnded<'_>, seconds: f64) {
        let histogram = match side {
            Side::Server => &self.server_session,
            Side::Client => &self.client_session,
        };
        histogram.record(seconds, &key_values(ended.attributes()));
    }
}
