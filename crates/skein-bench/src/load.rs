//! Ingest load: pre-encoded request bodies sent by N keep-alive clients over
//! one of four protocols, with per-request latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use skein_model::Span;
use skein_model::otlp::spans_to_otlp;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use crate::stats::Samples;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    OtlpHttpProtobuf,
    OtlpHttpJson,
    Grpc,
    JsonApi,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::OtlpHttpProtobuf => "OTLP/HTTP protobuf",
            Protocol::OtlpHttpJson => "OTLP/HTTP JSON",
            Protocol::Grpc => "OTLP/gRPC",
            Protocol::JsonApi => "JSON span API",
        }
    }
}

/// One request body, encoded before the clock starts.
#[derive(Clone)]
pub struct Payload {
    pub body: Bytes,
    pub records: u64,
}

/// A span in the simple JSON API's shape.
fn json_api_span(s: &Span) -> serde_json::Value {
    let attrs = skein_model::plain::attrs_to_plain_json(&s.attributes);
    let res = skein_model::plain::attrs_to_plain_json(&s.resource.attributes);
    serde_json::json!({
        "trace_id": s.trace_id.to_hex(), "span_id": s.span_id.to_hex(),
        "parent_span_id": s.parent_span_id.map(|p| p.to_hex()),
        "name": s.name, "kind": s.kind.as_str(),
        "start_time_unix_nano": s.start_time_unix_nano, "end_time_unix_nano": s.end_time_unix_nano,
        "status": {"code": s.status.code.as_str(), "message": s.status.message},
        "attributes": attrs, "resource": res,
        "events": s.events.iter().map(|e| serde_json::json!({
            "name": e.name, "time_unix_nano": e.time_unix_nano,
            "attributes": skein_model::plain::attrs_to_plain_json(&e.attributes)})).collect::<Vec<_>>(),
    })
}

/// Encodes a batch as an SDK or collector would: one envelope per resource
/// (spans grouped by service, order within a service kept).
pub fn encode(protocol: Protocol, spans: &[Span]) -> Payload {
    let mut spans = spans.to_vec();
    spans.sort_by(|a, b| a.service_name().cmp(b.service_name()));
    let spans = &spans[..];
    let body = match protocol {
        Protocol::OtlpHttpProtobuf | Protocol::Grpc => spans_to_otlp(spans).encode_to_vec(),
        Protocol::OtlpHttpJson => serde_json::to_vec(&spans_to_otlp(spans)).unwrap_or_default(),
        Protocol::JsonApi => {
            serde_json::to_vec(&spans.iter().map(json_api_span).collect::<Vec<_>>()).unwrap_or_default()
        }
    };
    Payload {
        body: Bytes::from(body),
        records: spans.len() as u64,
    }
}

/// Where a load goes.
#[derive(Clone)]
pub struct Target {
    pub otlp_http: String,
    pub grpc: String,
    pub api: String,
}

#[derive(Debug, Default)]
pub struct LoadResult {
    pub elapsed: Duration,
    pub requests: u64,
    pub records: u64,
    pub bytes: u64,
    pub latencies: Samples,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl LoadResult {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Sends raw pre-encoded protobuf over gRPC (no encoding on the clock) and
/// decodes nothing but the status.
#[derive(Clone, Copy)]
struct RawCodec;
struct RawEncoder;
struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = ();
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
        let n = src.remaining();
        src.advance(n);
        Ok(Some(()))
    }
}

/// Sends `payloads` (each once, in order of pick-up) with `clients`
/// concurrent keep-alive connections; stops early at `deadline`.
pub fn run(
    target: &Target,
    protocol: Protocol,
    otlp_path: &'static str,
    payloads: Arc<Vec<Payload>>,
    clients: usize,
    deadline: Option<Duration>,
    progress: Option<indicatif::ProgressBar>,
) -> Result<LoadResult, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let next = Arc::new(AtomicUsize::new(0));
        let records = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (next, records, bytes, errors, payloads, target, progress) = (
                next.clone(),
                records.clone(),
                bytes.clone(),
                errors.clone(),
                payloads.clone(),
                target.clone(),
                progress.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut lat = Samples::default();
                let mut first_error = None;
                let http = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .map_err(|e| e.to_string())?;
                let mut grpc = if protocol == Protocol::Grpc {
                    let ch = tonic::transport::Endpoint::from_shared(target.grpc.clone())
                        .map_err(|e| e.to_string())?
                        .connect()
                        .await
                        .map_err(|e| format!("gRPC connect {}: {e}", target.grpc))?;
                    Some(tonic::client::Grpc::new(ch).max_encoding_message_size(256 << 20))
                } else {
                    None
                };
                loop {
                    if deadline.is_some_and(|d| started.elapsed() >= d) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = payloads.get(i) else { break };
                    let t = Instant::now();
                    let outcome: Result<(), String> = match protocol {
                        Protocol::Grpc => {
                            let g = grpc.as_mut().ok_or("no gRPC client")?;
                            g.ready().await.map_err(|e| e.to_string())?;
                            g.unary(
                                tonic::Request::new(p.body.clone()),
                                http::uri::PathAndQuery::from_static(
                                    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                ),
                                RawCodec,
                            )
                            .await
                            .map(|_| ())
                            .map_err(|s| format!("gRPC {}: {}", s.code(), s.message()))
                        }
                        _ => {
                            let (url, ct) = match protocol {
                                Protocol::OtlpHttpProtobuf => {
                                    (format!("{}{otlp_path}", target.otlp_http), "application/x-protobuf")
                                }
                                Protocol::OtlpHttpJson => {
                                    (format!("{}{otlp_path}", target.otlp_http), "application/json")
                                }
                                _ => (format!("{}/api/v1/spans", target.api), "application/json"),
                            };
                            match http
                                .post(&url)
                                .header("content-type", ct)
                                .body(p.body.clone())
                                .send()
                                .await
                            {
                                Ok(r) if r.status().is_success() => {
                                    let _ = r.bytes().await;
                                    Ok(())
                                }
                                Ok(r) => Err(format!("HTTP {}: {}", r.status(), r.text().await.unwrap_or_default())),
                                Err(e) => Err(e.to_string()),
                            }
                        }
                    };
                    lat.push(t.elapsed());
                    match outcome {
                        Ok(()) => {
                            records.fetch_add(p.records, Ordering::Relaxed);
                            bytes.fetch_add(p.body.len() as u64, Ordering::Relaxed);
                            if let Some(pb) = &progress {
                                pb.inc(p.records);
                            }
                        }
                        Err(e) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            first_error.get_or_insert(e);
                        }
                    }
                }
                Ok::<_, String>((lat, first_error))
            }));
        }
        let mut result = LoadResult::default();
        for t in tasks {
            let (lat, err) = t.await.map_err(|e| e.to_string())??;
            result.requests += lat.len() as u64;
            result.latencies.extend(lat);
            if result.first_error.is_none() {
                result.first_error = err;
            }
        }
        result.elapsed = started.elapsed();
        result.records = records.load(Ordering::Relaxed);
        result.bytes = bytes.load(Ordering::Relaxed);
        result.errors = errors.load(Ordering::Relaxed);
        Ok(result)
    })
}

/// Sends `payloads` at a steady `requests_per_sec` spread over `clients`
/// (open loop: a slow response does not slow the schedule), for at most
/// `duration`; latency is measured per request.
pub fn run_paced(
    target: &Target,
    payloads: Arc<Vec<Payload>>,
    clients: usize,
    requests_per_sec: f64,
    duration: Duration,
) -> Result<LoadResult, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let per_client = Duration::from_secs_f64(clients as f64 / requests_per_sec.max(0.001));
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (next, payloads, target) = (next.clone(), payloads.clone(), target.clone());
            tasks.push(tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut tick = tokio::time::interval_at(
                    tokio::time::Instant::now() + per_client.mul_f64(c as f64 / clients as f64),
                    per_client,
                );
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                let mut r = LoadResult::default();
                while started.elapsed() < duration {
                    tick.tick().await;
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = payloads.get(i) else { break };
                    let t = Instant::now();
                    let ok = http
                        .post(format!("{}/v1/traces", target.otlp_http))
                        .header("content-type", "application/x-protobuf")
                        .body(p.body.clone())
                        .send()
                        .await
                        .is_ok_and(|resp| resp.status().is_success());
                    r.latencies.push(t.elapsed());
                    r.requests += 1;
                    if ok {
                        r.records += p.records;
                        r.bytes += p.body.len() as u64;
                    } else {
                        r.errors += 1;
                    }
                }
                r
            }));
        }
        let mut total = LoadResult::default();
        for t in tasks {
            let r = t.await.map_err(|e| e.to_string())?;
            total.requests += r.requests;
            total.records += r.records;
            total.bytes += r.bytes;
            total.errors += r.errors;
            total.latencies.extend(r.latencies);
        }
        total.elapsed = started.elapsed();
        Ok(total)
    })
}
