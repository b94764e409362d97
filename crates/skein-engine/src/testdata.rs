//! Small deterministic records for tests and benchmarks.

use std::sync::Arc;

use skein_model::corpus::Corpus;
use skein_model::metric::*;
use skein_model::{AnyValue, KeyValue, LogRecord, MetricPoint, Resource, Scope, Span};

/// End of the synthetic time window used by test data: 2026-01-01.
pub const END_NS: u64 = 1_767_225_600_000_000_000;

/// `traces` traces of `per_trace` spans from the canonical generator.
pub fn spans(traces: u64, per_trace: u64) -> Vec<Span> {
    Corpus::with_shape(traces, per_trace, 5, 10, END_NS).spans(0..traces)
}

/// `n` log records over 3 services with varied severities and bodies.
pub fn logs(n: usize) -> Vec<LogRecord> {
    let resources: Vec<Arc<Resource>> = (0..3)
        .map(|i| Arc::new(Resource::with_service(&format!("svc-{i}"))))
        .collect();
    let scope = Arc::new(Scope {
        name: "test".into(),
        ..Default::default()
    });
    let c = Corpus::with_shape(n as u64, 1, 3, 10, END_NS);
    (0..n)
        .map(|i| LogRecord {
            time_unix_nano: c.trace_start(i as u64),
            observed_time_unix_nano: c.trace_start(i as u64) + 5,
            severity_number: [9, 13, 17, 5][i % 4],
            severity_text: ["INFO", "WARN", "ERROR", "DEBUG"][i % 4].into(),
            body: if i % 7 == 6 {
                AnyValue::Map(vec![KeyValue::new("msg", format!("structured {i}"))])
            } else {
                AnyValue::Str(format!("message number {i} about {}", ["cats", "dogs", "fish"][i % 3]))
            },
            attributes: vec![KeyValue::new("n", i as i64)],
            trace_id: (i % 2 == 0).then(|| c.trace_id(i as u64)),
            span_id: (i % 2 == 0).then(|| c.span_id(i as u64, 0)),
            resource: resources[i % 3].clone(),
            scope: scope.clone(),
            ..Default::default()
        })
        .collect()
}

/// `n` metric points covering every metric kind.
pub fn metric_points(n: usize) -> Vec<MetricPoint> {
    let resource = Arc::new(Resource::with_service("metrics-svc"));
    let scope = Arc::new(Scope::default());
    let kinds = [
        MetricKind::Gauge,
        MetricKind::Sum {
            temporality: Temporality::Cumulative,
            monotonic: true,
        },
        MetricKind::Histogram {
            temporality: Temporality::Delta,
        },
        MetricKind::ExponentialHistogram {
            temporality: Temporality::Delta,
        },
        MetricKind::Summary,
    ];
    let descs: Vec<Arc<MetricDesc>> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            Arc::new(MetricDesc {
                name: format!("metric.{}", k.as_str()),
                description: format!("test metric {i}"),
                unit: "ms".into(),
                metadata: Vec::new(),
                kind: *k,
            })
        })
        .collect();
    (0..n)
        .map(|i| {
            let desc = descs[i % descs.len()].clone();
            let value = match desc.kind {
                MetricKind::Gauge => PointValue::Number(Some(Number::Double(i as f64 * 1.5))),
                MetricKind::Sum { .. } => PointValue::Number(Some(Number::Int(i as i64))),
                MetricKind::Histogram { .. } => PointValue::Histogram(HistogramValue {
                    count: 6,
                    sum: Some(21.0),
                    bucket_counts: vec![1, 2, 3],
                    explicit_bounds: vec![1.0, 5.0],
                    min: Some(0.5),
                    max: Some(9.0),
                }),
                MetricKind::ExponentialHistogram { .. } => PointValue::ExponentialHistogram(ExpHistogramValue {
                    count: 3,
                    sum: Some(7.0),
                    scale: 2,
                    zero_count: 1,
                    positive: Some(ExpBuckets {
                        offset: -1,
                        bucket_counts: vec![1, 1],
                    }),
                    negative: None,
                    min: None,
                    max: None,
                    zero_threshold: 0.0,
                }),
                MetricKind::Summary => PointValue::Summary(SummaryValue {
                    count: 10,
                    sum: 55.0,
                    quantiles: vec![(0.5, 5.0), (0.99, 9.9)],
                }),
            };
            MetricPoint {
                metric: desc,
                attributes: vec![KeyValue::new("host", format!("h{}", i % 3))],
                start_time_unix_nano: END_NS - 1_000_000_000_000,
                time_unix_nano: END_NS - 1_000_000_000_000 + i as u64 * 1_000_000_000,
                flags: 0,
                exemplars: if i % 10 == 0 {
                    vec![Exemplar {
                        filtered_attributes: vec![KeyValue::new("user", "u1")],
                        time_unix_nano: END_NS - 1,
                        value: Some(Number::Double(2.5)),
                        span_id: Some(skein_model::SpanId::from_u64(7)),
                        trace_id: Some(skein_model::TraceId::from_u128(9)),
                    }]
                } else {
                    Vec::new()
                },
                value,
                resource: resource.clone(),
                scope: scope.clone(),
            }
        })
        .collect()
}

/// An empty span of `service` named `name` (ids and times left zero).
pub fn span_with(service: &str, name: &str) -> Span {
    Span {
        name: name.to_string(),
        resource: Arc::new(Resource::with_service(service)),
        ..Default::default()
    }
}
