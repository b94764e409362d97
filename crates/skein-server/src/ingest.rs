//! What every ingest front end shares: turning decoded OTLP into stored
//! records, accounting, the OTLP partial-success answer, and the one error
//! type a refused request is described by.

use std::sync::Arc;
use std::time::Instant;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use skein_engine::{Engine, IngestReport};
use skein_model::otlp::{self, Decoded};
use skein_model::{LogRecord, MetricPoint, ModelError, Span};

use tokio::sync::broadcast;

use crate::app::SpaceError;
use crate::app::{App, Arrival, NotReady};
use crate::body::BodyError;
use crate::tenancy::Space;

/// One OTLP signal: its request and response types and how to store it.
pub trait OtlpSignal: Send + 'static {
    type Record: Clone + Send + 'static;
    type Request: prost::Message + Default + Send + 'static;
    type Response: prost::Message + serde::Serialize + Default + Send + 'static;
    const NAME: &'static str;

    fn decode_json(body: &[u8]) -> Result<Self::Request, ModelError>;
    fn convert(req: Self::Request) -> Decoded<Self::Record>;
    fn store(engine: &Engine, records: Vec<Self::Record>) -> skein_engine::Result<IngestReport>;
    fn response(rejected: u64, message: String) -> Self::Response;
    /// Applies the redaction rules (before the records reach the WAL).
    fn redact(r: &skein_redact::Redactor, records: &mut [Self::Record]);
    /// Publishes records to the live tails of their space (only when
    /// someone listens).
    fn announce(_arrivals: &broadcast::Sender<Arrival>, _records: &[Self::Record]) {}
}

pub struct Traces;
pub struct Logs;
pub struct Metrics;

impl OtlpSignal for Traces {
    type Record = Span;
    type Request = ExportTraceServiceRequest;
    type Response = ExportTraceServiceResponse;
    const NAME: &'static str = "spans";

    fn decode_json(body: &[u8]) -> Result<Self::Request, ModelError> {
        otlp::trace_request_from_json(body)
    }
    fn convert(req: Self::Request) -> Decoded<Span> {
        otlp::spans_from_otlp(req)
    }
    fn store(engine: &Engine, records: Vec<Span>) -> skein_engine::Result<IngestReport> {
        engine.ingest_spans(records)
    }
    fn redact(r: &skein_redact::Redactor, records: &mut [Span]) {
        r.spans(records)
    }
    fn response(rejected: u64, message: String) -> Self::Response {
        ExportTraceServiceResponse {
            partial_success: (rejected > 0).then_some(ExportTracePartialSuccess {
                rejected_spans: rejected as i64,
                error_message: message,
            }),
        }
    }
    fn announce(arrivals: &broadcast::Sender<Arrival>, records: &[Span]) {
        if arrivals.receiver_count() > 0 {
            for s in records {
                let _ = arrivals.send(Arrival::Span(Arc::new(s.clone())));
            }
        }
    }
}

impl OtlpSignal for Logs {
    type Record = LogRecord;
    type Request = ExportLogsServiceRequest;
    type Response = ExportLogsServiceResponse;
    const NAME: &'static str = "logs";

    fn decode_json(body: &[u8]) -> Result<Self::Request, ModelError> {
        otlp::logs_request_from_json(body)
    }
    fn convert(req: Self::Request) -> Decoded<LogRecord> {
        otlp::logs_from_otlp(req)
    }
    fn store(engine: &Engine, records: Vec<LogRecord>) -> skein_engine::Result<IngestReport> {
        engine.ingest_logs(records)
    }
    fn redact(r: &skein_redact::Redactor, records: &mut [LogRecord]) {
        r.logs(records)
    }
    fn response(rejected: u64, message: String) -> Self::Response {
        ExportLogsServiceResponse {
            partial_success: (rejected > 0).then_some(ExportLogsPartialSuccess {
                rejected_log_records: rejected as i64,
                error_message: message,
            }),
        }
    }
    fn announce(arrivals: &broadcast::Sender<Arrival>, records: &[LogRecord]) {
        if arrivals.receiver_count() > 0 {
            for l in records {
                let _ = arrivals.send(Arrival::Log(Arc::new(l.clone())));
            }
        }
    }
}

impl OtlpSignal for Metrics {
    type Record = MetricPoint;
    type Request = ExportMetricsServiceRequest;
    type Response = ExportMetricsServiceResponse;
    const NAME: &'static str = "metrics";

    fn decode_json(body: &[u8]) -> Result<Self::Request, ModelError> {
        otlp::metrics_request_from_json(body)
    }
    fn convert(req: Self::Request) -> Decoded<MetricPoint> {
        otlp::metrics_from_otlp(req)
    }
    fn store(engine: &Engine, records: Vec<MetricPoint>) -> skein_engine::Result<IngestReport> {
        engine.ingest_metrics(records)
    }
    fn redact(r: &skein_redact::Redactor, records: &mut [MetricPoint]) {
        r.metrics(records)
    }
    fn response(rejected: u64, message: String) -> Self::Response {
        ExportMetricsServiceResponse {
            partial_success: (rejected > 0).then_some(ExportMetricsPartialSuccess {
                rejected_data_points: rejected as i64,
                error_message: message,
            }),
        }
    }
}

/// The result of storing one request's records.
#[derive(Debug)]
pub struct Stored {
    pub accepted: u64,
    pub rejected: u64,
    pub message: String,
}

impl Stored {
    /// Every record was invalid: a permanent error (400, INVALID_ARGUMENT),
    /// not a partial success.
    pub fn nothing_valid(&self) -> bool {
        self.accepted == 0 && self.rejected > 0
    }
}

/// Why an ingest request was refused. Every front end describes its
/// refusals with it, counts them the same way ([`account`]), and turns them
/// into its own answer: a `google.rpc.Status` for OTLP/HTTP, an
/// `{"error": {"code", "message"}}` object for the JSON span API, a
/// `Status` for gRPC.
#[derive(Debug)]
pub enum IngestError {
    /// No engine to store with: starting or shutting down.
    NotReady(NotReady),
    /// The admission budget is spent; the client should back off.
    Overloaded,
    /// The body could not be read: too large, bad gzip, unknown type.
    Body(BodyError),
    /// The body was read but is not a request in the route's format.
    Malformed(String),
    /// The engine cannot store now, through no fault of the request (a WAL
    /// that refuses writes, flushes that keep failing, a closing engine): a
    /// retry later may succeed.
    Unavailable(String),
    /// The disk is (nearly) full: refused before anything was written, to
    /// be retried once space returns (503 + Retry-After, gRPC
    /// RESOURCE_EXHAUSTED).
    DiskFull(String),
    /// This server reads a bucket another skein writes (`--read-only`):
    /// never to be retried here (403, PERMISSION_DENIED).
    ReadOnly(String),
    Internal(String),
}

impl From<SpaceError> for IngestError {
    fn from(e: SpaceError) -> Self {
        match e {
            SpaceError::NotReady(nr) => IngestError::NotReady(nr),
            SpaceError::Open(m) => IngestError::Internal(m),
        }
    }
}

impl IngestError {
    /// Classifies a failed store: 503 / UNAVAILABLE for what a retry may
    /// fix, 400 / INVALID_ARGUMENT for a request the engine refuses as
    /// sent (a batch over the WAL frame limit), 500 / INTERNAL for the rest.
    pub fn storing(e: skein_engine::Error) -> Self {
        let message = format!("storing failed: {e}");
        if e.is_read_only() {
            IngestError::ReadOnly(e.to_string())
        } else if e.is_disk_full() {
            IngestError::DiskFull(message)
        } else if e.is_unavailable() {
            IngestError::Unavailable(message)
        } else if e.is_invalid_input() {
            IngestError::Malformed(message)
        } else {
            IngestError::Internal(message)
        }
    }

    /// The `reason` label of `skein_rejected_requests_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            IngestError::NotReady(_) => "not_ready",
            IngestError::Overloaded => "overloaded",
            IngestError::Body(b) => b.reason(),
            IngestError::Malformed(_) => "malformed",
            IngestError::Unavailable(_) => "unavailable",
            IngestError::DiskFull(_) => "disk_full",
            IngestError::ReadOnly(_) => "read_only",
            IngestError::Internal(_) => "internal",
        }
    }

    /// Counts this refusal in `skein_rejected_requests_total`.
    pub fn count(&self, app: &App) {
        app.metrics
            .rejected_requests
            .add(&format!("reason=\"{}\"", self.reason()), 1);
    }
}

/// Accounts for the outcome of one ingest request, the same for every
/// front end: a refusal by its reason, a request with nothing valid as
/// `invalid_records`, and the latency of every request that was stored.
pub fn account(app: &App, started: Instant, outcome: &Result<Stored, IngestError>) {
    match outcome {
        Ok(stored) => {
            app.metrics.ingest_latency.observe(started.elapsed().as_secs_f64());
            if stored.nothing_valid() {
                app.metrics.rejected_requests.add("reason=\"invalid_records\"", 1);
            }
        }
        Err(e) => e.count(app),
    }
}

/// Stores decoded records in `space` (blocking: call from a blocking
/// thread) and accounts for them. Rejections from decoding and from the
/// engine's limits are reported together.
pub fn store<S: OtlpSignal>(
    app: &App,
    space: &Space,
    decoded: Decoded<S::Record>,
    protocol: &str,
    body_bytes: usize,
) -> skein_engine::Result<Stored> {
    let labels = format!("signal=\"{}\",protocol=\"{protocol}\"", S::NAME);
    app.metrics.ingest_requests.add(&labels, 1);
    app.metrics.ingest_bytes.add(&labels, body_bytes as u64);
    let mut errors = decoded.errors;
    let mut rejected = decoded.rejected;
    let mut records = decoded.records;
    if let Some(r) = &app.config.redactor {
        S::redact(r, &mut records);
    }
    // Live tails see records only once they are stored.
    let tail_copy = (space.arrivals.receiver_count() > 0).then(|| records.clone());
    let report = if records.is_empty() {
        IngestReport::default()
    } else {
        S::store(&space.engine, records)?
    };
    if let Some(copy) = tail_copy {
        S::announce(&space.arrivals, &copy);
    }
    rejected += report.rejected;
    errors.extend(report.errors);
    app.metrics.ingest_records.add(&labels, report.accepted);
    if rejected > 0 {
        app.metrics.rejected_records.add(&labels, rejected);
    }
    let mut message = String::new();
    if rejected > 0 {
        message = format!("rejected {rejected}: {}", errors.join("; "));
        if rejected as usize > errors.len() {
            message.push_str("; …");
        }
    }
    Ok(Stored {
        accepted: report.accepted,
        rejected,
        message,
    })
}
