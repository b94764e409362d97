//! The canonical benchmark corpus: deterministic synthetic telemetry shared
//! by the engine's benchmarks, `skein-bench` and tests, so that every figure
//! Skein publishes is measured on the same data and every answer can be
//! checked against it.
//!
//! Shape (defaults): 100,000 traces × 10 spans, 20 services, 3 span
//! attributes (`benchmark.group` with 100 values, `http.method`,
//! `http.status_code`), an event on every 50th span, about 2% error spans,
//! start times spread evenly over the hour before `end_ns`.

pub mod agent;
mod words;

use std::sync::Arc;

pub use agent::AgentCorpus;

use crate::ids::{SpanId, TraceId};
use crate::log::LogRecord;
use crate::resource::{Resource, Scope};
use crate::span::{Event, Span, SpanKind, Status, StatusCode};
use crate::value::{AnyValue, KeyValue};

/// SplitMix64: tiny, fast, and good enough to make synthetic data.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A Zipf (power-law) distribution over ranks `0..n`: rank `k` has weight
/// `1 / (k + 1)^s`. Sampling is a binary search of the cumulative weights.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (0..n.max(1))
            .map(|k| {
                acc += 1.0 / ((k + 1) as f64).powf(s);
                acc
            })
            .collect();
        cdf.iter_mut().for_each(|c| *c /= acc);
        Zipf { cdf }
    }
    pub fn len(&self) -> usize {
        self.cdf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }
    /// The probability of rank `k`.
    pub fn probability(&self, k: usize) -> f64 {
        self.cdf[k] - if k == 0 { 0.0 } else { self.cdf[k - 1] }
    }
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c <= u).min(self.cdf.len() - 1)
    }
}

/// Parameters of a corpus; `Corpus::new(spans, end_ns)` gives the canonical one.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub traces: u64,
    pub spans_per_trace: u64,
    pub services: u64,
    pub groups: u64,
    pub seed: u64,
    /// Start times fall in `[end_ns - window_ns, end_ns)`.
    pub end_ns: u64,
    pub window_ns: u64,
    resources: Vec<Arc<Resource>>,
    scope: Arc<Scope>,
}

pub const HOUR_NS: u64 = 3_600_000_000_000;
pub const GROUP_KEY: &str = "benchmark.group";
const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];

impl Corpus {
    /// The canonical corpus of `spans` spans (a multiple of 10) ending at `end_ns`.
    pub fn new(spans: u64, end_ns: u64) -> Corpus {
        Corpus::with_shape(spans.div_ceil(10), 10, 20, 100, end_ns)
    }

    pub fn with_shape(traces: u64, spans_per_trace: u64, services: u64, groups: u64, end_ns: u64) -> Corpus {
        let resources = (0..services)
            .map(|s| {
                Arc::new(Resource {
                    attributes: vec![
                        KeyValue::new("service.name", service_name(s)),
                        KeyValue::new("service.version", "1.4.2"),
                        KeyValue::new("host.name", format!("host-{}", s % 4)),
                        KeyValue::new("deployment.environment", "bench"),
                    ],
                    ..Default::default()
                })
            })
            .collect();
        Corpus {
            traces,
            spans_per_trace,
            services,
            groups,
            seed: 0x5EED,
            end_ns,
            window_ns: HOUR_NS,
            resources,
            scope: Arc::new(Scope {
                name: "skein-bench".into(),
                version: "1.0".into(),
                ..Default::default()
            }),
        }
    }

    pub fn span_count(&self) -> u64 {
        self.traces * self.spans_per_trace
    }

    pub fn trace_id(&self, trace: u64) -> TraceId {
        let mut r = Rng::new(self.seed ^ trace.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let hi = r.next_u64() | 1;
        TraceId::from_u128(((hi as u128) << 64) | r.next_u64() as u128)
    }

    pub fn span_id(&self, trace: u64, index: u64) -> SpanId {
        let mut r = Rng::new(self.seed ^ trace.wrapping_mul(31).wrapping_add(index + 1).wrapping_mul(0x9E37_79B9));
        SpanId::from_u64(r.next_u64() | 1)
    }

    pub fn trace_start(&self, trace: u64) -> u64 {
        let step = self.window_ns / self.traces.max(1);
        self.end_ns - self.window_ns + trace * step
    }

    /// The group value of a span: spreads evenly over `groups` values.
    pub fn group_of(&self, trace: u64, index: u64) -> u64 {
        (trace * self.spans_per_trace + index) % self.groups
    }

    pub fn group_value(group: u64) -> String {
        format!("group-{group}")
    }

    /// All spans of one trace, in span order.
    pub fn trace(&self, trace: u64) -> Vec<Span> {
        let mut rng = Rng::new(self.seed.wrapping_add(trace).wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let start = self.trace_start(trace);
        let total_duration = 2_000_000 + rng.below(200_000_000);
        (0..self.spans_per_trace)
            .map(|i| {
                let global = trace * self.spans_per_trace + i;
                let service = (trace + i) % self.services;
                let offset = if i == 0 { 0 } else { rng.below(total_duration / 2) };
                let duration = if i == 0 {
                    total_duration
                } else {
                    1_000 + rng.below(total_duration / 2)
                };
                let error = rng.below(50) == 0;
                let mut events = Vec::new();
                if global.is_multiple_of(50) {
                    events.push(Event {
                        time_unix_nano: start + offset + duration / 2,
                        name: if error { "exception".into() } else { "cache.miss".into() },
                        attributes: vec![KeyValue::new("retry", (global % 3) as i64)],
                        dropped_attributes_count: 0,
                    });
                }
                Span {
                    trace_id: self.trace_id(trace),
                    span_id: self.span_id(trace, i),
                    parent_span_id: (i > 0).then(|| self.span_id(trace, (i - 1) / 2)),
                    trace_state: String::new(),
                    flags: 1,
                    name: format!(
                        "{} /api/v1/{}",
                        METHODS[(i % 4) as usize],
                        ["users", "orders", "items", "cart", "search"][(global % 5) as usize]
                    ),
                    kind: if i == 0 { SpanKind::Server } else { SpanKind::Client },
                    start_time_unix_nano: start + offset,
                    end_time_unix_nano: start + offset + duration,
                    attributes: vec![
                        KeyValue::new(GROUP_KEY, Corpus::group_value(self.group_of(trace, i))),
                        KeyValue::new("http.method", METHODS[(i % 4) as usize]),
                        KeyValue::new("http.status_code", if error { 500i64 } else { 200 }),
                    ],
                    dropped_attributes_count: 0,
                    events,
                    dropped_events_count: 0,
                    links: Vec::new(),
                    dropped_links_count: 0,
                    status: if error {
                        Status {
                            code: StatusCode::Error,
                            message: "upstream failed".into(),
                        }
                    } else {
                        Status::default()
                    },
                    resource: self.resources[service as usize].clone(),
                    scope: self.scope.clone(),
                }
            })
            .collect()
    }

    /// Spans of traces `range`, in trace order.
    pub fn spans(&self, traces: std::ops::Range<u64>) -> Vec<Span> {
        traces.flat_map(|t| self.trace(t)).collect()
    }

    /// Log records correlated with a trace: one per span, severity by status.
    pub fn trace_logs(&self, trace: u64) -> Vec<LogRecord> {
        self.trace(trace)
            .into_iter()
            .enumerate()
            .map(|(i, s)| LogRecord {
                time_unix_nano: s.start_time_unix_nano,
                observed_time_unix_nano: s.start_time_unix_nano,
                severity_number: if s.is_error() {
                    17
                } else if i % 5 == 0 {
                    13
                } else {
                    9
                },
                severity_text: if s.is_error() {
                    "ERROR".into()
                } else if i % 5 == 0 {
                    "WARN".into()
                } else {
                    "INFO".into()
                },
                body: AnyValue::Str(if s.is_error() {
                    format!(
                        "request {} failed: upstream timeout after {} ms",
                        s.name,
                        s.duration_ns() / 1_000_000
                    )
                } else {
                    format!("handled {} in {} us", s.name, s.duration_ns() / 1_000)
                }),
                attributes: vec![KeyValue::new("logger", "app")],
                trace_id: Some(s.trace_id),
                span_id: Some(s.span_id),
                resource: s.resource.clone(),
                scope: s.scope.clone(),
                ..Default::default()
            })
            .collect()
    }
}

pub fn service_name(i: u64) -> String {
    format!("svc-{i:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_deterministic_and_shaped() {
        let c = Corpus::new(1000, 10 * HOUR_NS);
        assert_eq!(c.span_count(), 1000);
        let t = c.trace(7);
        assert_eq!(t, c.trace(7));
        assert_eq!(t.len(), 10);
        assert!(t[0].parent_span_id.is_none());
        assert!(t[1..].iter().all(|s| s.parent_span_id.is_some()));
        let ids: std::collections::HashSet<_> = c.spans(0..100).iter().map(|s| (s.trace_id, s.span_id)).collect();
        assert_eq!(ids.len(), 1000, "ids are unique");
        assert!(t.iter().all(|s| s.start_time_unix_nano >= c.end_ns - c.window_ns));
    }
}
