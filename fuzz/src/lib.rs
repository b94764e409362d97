//! Invariants shared by the fuzz targets in `fuzz_targets/`.
//!
//! Every check panics (which libFuzzer reports as a crash) when a decoder
//! accepts something it should not have, or loses or invents records.

use std::fmt::Debug;

use prost::Message;
use skein_engine::validate::{Limits, Validate};
use skein_model::otlp::proto::collector::logs::v1::ExportLogsServiceRequest;
use skein_model::otlp::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use skein_model::otlp::proto::collector::trace::v1::ExportTraceServiceRequest;
use skein_model::otlp::proto::metrics::v1 as pm;
use skein_model::otlp::{self, Decoded, MAX_ERROR_MESSAGES, MAX_TIME_NS};
use skein_model::{LogRecord, MetricPoint, ModelError, Span};

/// A signal as the OTLP converters see it.
pub trait OtlpSignal: Sized + Debug {
    type Request: Message + Default + Clone + Debug + serde::Serialize;
    /// How many outcomes (accepted + rejected) decoding `req` must report.
    fn submitted(req: &Self::Request) -> u64;
    fn from_otlp(req: Self::Request) -> Decoded<Self>;
    fn to_otlp(records: &[Self]) -> Self::Request;
    fn from_json(body: &[u8]) -> Result<Self::Request, ModelError>;
    /// What every accepted record must satisfy.
    fn check_accepted(&self);
}

/// The structural checks of the engine's `Validate`, without size limits.
fn unlimited() -> Limits {
    Limits {
        max_record_bytes: usize::MAX,
        max_attributes: usize::MAX,
    }
}

impl OtlpSignal for Span {
    type Request = ExportTraceServiceRequest;
    fn submitted(req: &Self::Request) -> u64 {
        req.resource_spans
            .iter()
            .flat_map(|rs| &rs.scope_spans)
            .map(|ss| ss.spans.len() as u64)
            .sum()
    }
    fn from_otlp(req: Self::Request) -> Decoded<Self> {
        otlp::spans_from_otlp(req)
    }
    fn to_otlp(records: &[Self]) -> Self::Request {
        otlp::spans_to_otlp(records)
    }
    fn from_json(body: &[u8]) -> Result<Self::Request, ModelError> {
        otlp::trace_request_from_json(body)
    }
    fn check_accepted(&self) {
        if let Err(e) = self.validate(&unlimited()) {
            panic!("accepted span fails validation: {e}: {self:?}");
        }
    }
}

impl OtlpSignal for LogRecord {
    type Request = ExportLogsServiceRequest;
    fn submitted(req: &Self::Request) -> u64 {
        req.resource_logs
            .iter()
            .flat_map(|rl| &rl.scope_logs)
            .map(|sl| sl.log_records.len() as u64)
            .sum()
    }
    fn from_otlp(req: Self::Request) -> Decoded<Self> {
        otlp::logs_from_otlp(req)
    }
    fn to_otlp(records: &[Self]) -> Self::Request {
        otlp::logs_to_otlp(records)
    }
    fn from_json(body: &[u8]) -> Result<Self::Request, ModelError> {
        otlp::logs_request_from_json(body)
    }
    fn check_accepted(&self) {
        if let Err(e) = self.validate(&unlimited()) {
            panic!("accepted log record fails validation: {e}: {self:?}");
        }
    }
}

impl OtlpSignal for MetricPoint {
    type Request = ExportMetricsServiceRequest;
    /// Each point is accepted or rejected; a metric without data is one
    /// rejection for the whole metric.
    fn submitted(req: &Self::Request) -> u64 {
        use pm::metric::Data;
        req.resource_metrics
            .iter()
            .flat_map(|rm| &rm.scope_metrics)
            .flat_map(|sm| &sm.metrics)
            .map(|m| match &m.data {
                None => 1,
                Some(Data::Gauge(g)) => g.data_points.len() as u64,
                Some(Data::Sum(s)) => s.data_points.len() as u64,
                Some(Data::Histogram(h)) => h.data_points.len() as u64,
                Some(Data::ExponentialHistogram(h)) => h.data_points.len() as u64,
                Some(Data::Summary(s)) => s.data_points.len() as u64,
            })
            .sum()
    }
    fn from_otlp(req: Self::Request) -> Decoded<Self> {
        otlp::metrics_from_otlp(req)
    }
    fn to_otlp(records: &[Self]) -> Self::Request {
        otlp::metrics_to_otlp(records)
    }
    fn from_json(body: &[u8]) -> Result<Self::Request, ModelError> {
        otlp::metrics_request_from_json(body)
    }
    fn check_accepted(&self) {
        // OTLP allows an empty metric name (the engine's `Validate` does
        // not), so only the times are checked here.
        assert!(self.time_unix_nano <= MAX_TIME_NS, "{self:?}");
        assert!(self.start_time_unix_nano <= MAX_TIME_NS, "{self:?}");
        for e in &self.exemplars {
            assert!(e.time_unix_nano <= MAX_TIME_NS, "{self:?}");
        }
    }
}

/// Every submitted record is either accepted or rejected, and the kept
/// messages agree with the count.
pub fn check_outcome<T>(d: &Decoded<T>, submitted: u64) {
    assert_eq!(
        d.records.len() as u64 + d.rejected,
        submitted,
        "accepted + rejected must equal what was submitted ({:?})",
        d.errors
    );
    assert_eq!(d.errors.len() as u64, d.rejected.min(MAX_ERROR_MESSAGES as u64));
    assert_eq!(d.error_message().is_empty(), d.rejected == 0);
}

/// Converts a decoded request and checks the outcome and the accepted records.
pub fn check_request<T: OtlpSignal>(req: T::Request) {
    let submitted = T::submitted(&req);
    let d = T::from_otlp(req);
    check_outcome(&d, submitted);
    check_records(&d.records);
}

/// Accepted records are valid, and model → OTLP → model is stable: all are
/// accepted again, unchanged, and encode to the same request (also through
/// protobuf bytes).
pub fn check_records<T: OtlpSignal>(records: &[T]) {
    for r in records {
        r.check_accepted();
    }
    let req = T::to_otlp(records);
    let again = T::from_otlp(req.clone());
    assert_eq!(
        again.rejected,
        0,
        "re-encoded records were rejected: {}",
        again.error_message()
    );
    // `Debug` rather than `==`, so that NaN equals itself.
    assert_eq!(
        format!("{:?}", again.records),
        format!("{records:?}"),
        "model -> OTLP -> model changed the records"
    );
    let bytes = req.encode_to_vec();
    assert_eq!(
        T::to_otlp(&again.records).encode_to_vec(),
        bytes,
        "re-encoding is not stable"
    );
    let from_bytes = T::Request::decode(&bytes[..]).expect("an encoded request decodes");
    let d = T::from_otlp(from_bytes);
    assert_eq!(
        d.rejected,
        0,
        "records rejected after a protobuf round trip: {}",
        d.error_message()
    );
    assert_eq!(d.records.len(), records.len());
}

/// OTLP/JSON: decode, convert and check; a request that decoded must also
/// survive opentelemetry-proto's canonical serialization and decode to the
/// same message.
pub fn check_json<T: OtlpSignal>(body: &[u8]) {
    let Ok(req) = T::from_json(body) else { return };
    let text = format!("{req:?}");
    // opentelemetry-proto writes non-finite doubles as `null` (outside
    // summary quantiles), which is lossy by design: skip those.
    if !text.contains("NaN") && !text.contains("inf") {
        let canonical = serde_json::to_vec(&req).expect("a decoded request serializes");
        let again = T::from_json(&canonical)
            .unwrap_or_else(|e| panic!("canonical JSON of a decoded request does not decode: {e}"));
        assert_eq!(
            format!("{again:?}"),
            text,
            "decode(serialize(decoded)) differs; canonical JSON: {}",
            String::from_utf8_lossy(&canonical)
        );
    }
    check_request::<T>(req);
}
