//! The OTLP/JSON decoder (`skein_model::otlp::*_request_from_json`).
//!
//! Round trips: requests serialized by opentelemetry-proto's own serde (the
//! canonical OTLP/JSON: camelCase, hex ids, 64-bit integers as strings)
//! decode to the same message, compared by protobuf encoding and by `Debug`.
//! opentelemetry-proto writes NaN and ±Infinity as `null` except in summary
//! quantiles, so the generated doubles elsewhere are finite; the special
//! values are covered by hand-written documents below.
//!
//! Then one small hand-written document per lenient or error case, a payload
//! shaped like the OpenTelemetry JS exporter's, and a property that no input
//! makes the decoder panic.

use std::fmt::Debug;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use prost::Message;

use skein_model::corpus::{Corpus, HOUR_NS};
use skein_model::otlp::proto::collector::logs::v1::ExportLogsServiceRequest;
use skein_model::otlp::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use skein_model::otlp::proto::collector::trace::v1::ExportTraceServiceRequest;
use skein_model::otlp::proto::common::v1 as pc;
use skein_model::otlp::proto::logs::v1 as pl;
use skein_model::otlp::proto::metrics::v1 as pm;
use skein_model::otlp::proto::resource::v1 as pr;
use skein_model::otlp::proto::trace::v1 as pt;
use skein_model::otlp::{
    logs_from_otlp, logs_request_from_json, logs_to_otlp, metrics_from_otlp, metrics_request_from_json,
    spans_from_otlp, spans_to_otlp, trace_request_from_json,
};
use skein_model::{AnyValue, SpanKind, StatusCode};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

/// Same protobuf encoding and same `Debug` rendering.
fn same<M: Message + Debug>(got: &M, want: &M) -> Result<(), TestCaseError> {
    let (g, w) = (format!("{got:#?}"), format!("{want:#?}"));
    if got.encode_to_vec() != want.encode_to_vec() || g != w {
        // Show where the renderings part, with some context.
        let (gl, wl): (Vec<_>, Vec<_>) = (g.lines().collect(), w.lines().collect());
        let at = gl
            .iter()
            .zip(&wl)
            .position(|(a, b)| a != b)
            .unwrap_or(gl.len().min(wl.len()));
        let from = at.saturating_sub(12);
        return Err(TestCaseError::fail(format!(
            "decoded message differs at line {at}:\n--- got\n{}\n--- want\n{}",
            gl[from..(at + 3).min(gl.len())].join("\n"),
            wl[from..(at + 3).min(wl.len())].join("\n"),
        )));
    }
    Ok(())
}

fn assert_same<M: Message + Debug>(got: &M, want: &M) {
    if let Err(e) = same(got, want) {
        panic!("{e}");
    }
}

fn trace(json: &str) -> ExportTraceServiceRequest {
    trace_request_from_json(json.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{json}"))
}
fn logs(json: &str) -> ExportLogsServiceRequest {
    logs_request_from_json(json.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{json}"))
}
fn metrics(json: &str) -> ExportMetricsServiceRequest {
    metrics_request_from_json(json.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{json}"))
}
fn trace_err(json: &str) -> String {
    match trace_request_from_json(json.as_bytes()) {
        Ok(req) => panic!("expected an error, got {req:?}"),
        Err(e) => e.to_string(),
    }
}

/// The one span of a one-span document.
fn only_span(req: &ExportTraceServiceRequest) -> &pt::Span {
    &req.resource_spans[0].scope_spans[0].spans[0]
}

/// Wraps span JSON in a request.
fn span_doc(span: &str) -> String {
    format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{span}]}}]}}]}}"#)
}

/// The value of the first attribute of a one-span document.
fn attr_value(value: &str) -> pc::AnyValue {
    let req = trace(&span_doc(&format!(
        r#"{{"attributes":[{{"key":"k","value":{value}}}]}}"#
    )));
    only_span(&req).attributes[0].value.clone().expect("a value")
}

fn number_point(metric: &str) -> pm::NumberDataPoint {
    let req = metrics(&format!(
        r#"{{"resourceMetrics":[{{"scopeMetrics":[{{"metrics":[{metric}]}}]}}]}}"#
    ));
    match &req.resource_metrics[0].scope_metrics[0].metrics[0].data {
        Some(pm::metric::Data::Gauge(g)) => g.data_points[0].clone(),
        Some(pm::metric::Data::Sum(s)) => s.data_points[0].clone(),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Round trips through opentelemetry-proto's serde
// ---------------------------------------------------------------------------

#[test]
fn corpus_spans_round_trip() {
    let corpus = Corpus::new(1000, 10 * HOUR_NS);
    let spans = corpus.spans(0..60);
    let req = spans_to_otlp(&spans);
    let json = serde_json::to_string(&req).unwrap();
    let back = trace(&json);
    assert_same(&back, &req);
    let decoded = spans_from_otlp(back);
    assert_eq!(decoded.rejected, 0, "{}", decoded.error_message());
    assert_eq!(decoded.records, spans);
}

#[test]
fn corpus_logs_round_trip() {
    let corpus = Corpus::new(1000, 10 * HOUR_NS);
    let records: Vec<_> = (0..20).flat_map(|t| corpus.trace_logs(t)).collect();
    let req = logs_to_otlp(&records);
    let back = logs(&serde_json::to_string(&req).unwrap());
    assert_same(&back, &req);
    let decoded = logs_from_otlp(back);
    assert_eq!(decoded.rejected, 0, "{}", decoded.error_message());
    assert_eq!(decoded.records, records);
}

fn some(value: pc::any_value::Value) -> pc::AnyValue {
    pc::AnyValue { value: Some(value) }
}

fn kv(key: &str, value: pc::any_value::Value) -> pc::KeyValue {
    pc::KeyValue {
        key: key.into(),
        value: Some(some(value)),
        key_strindex: 0,
    }
}

/// Every kind of value, nested.
fn every_value() -> Vec<pc::KeyValue> {
    use pc::any_value::Value as V;
    vec![
        kv("s", V::StringValue("héllo \"q\" \n".into())),
        kv("b", V::BoolValue(true)),
        kv("i", V::IntValue(i64::MIN)),
        kv("imax", V::IntValue(i64::MAX)),
        kv("d", V::DoubleValue(-1.25e-300)),
        kv("bytes", V::BytesValue(vec![0, 1, 2, 250, 255])),
        kv(
            "arr",
            V::ArrayValue(pc::ArrayValue {
                values: vec![
                    some(V::IntValue(1)),
                    pc::AnyValue { value: None },
                    some(V::ArrayValue(pc::ArrayValue {
                        values: vec![some(V::StringValue("deep".into()))],
                    })),
                ],
            }),
        ),
        kv(
            "map",
            V::KvlistValue(pc::KeyValueList {
                values: vec![kv("inner", V::DoubleValue(0.1)), kv("", V::BoolValue(false))],
            }),
        ),
        pc::KeyValue {
            key: "absent".into(),
            value: None,
            key_strindex: 0,
        },
    ]
}

fn resource() -> Option<pr::Resource> {
    Some(pr::Resource {
        attributes: every_value(),
        dropped_attributes_count: 3,
        entity_refs: vec![pc::EntityRef {
            schema_url: "https://opentelemetry.io/schemas/1.30.0".into(),
            r#type: "service".into(),
            id_keys: vec!["service.name".into(), "service.namespace".into()],
            description_keys: vec!["service.version".into()],
        }],
    })
}

fn scope() -> Option<pc::InstrumentationScope> {
    Some(pc::InstrumentationScope {
        name: "io.skein.test".into(),
        version: "1.2.3".into(),
        attributes: every_value(),
        dropped_attributes_count: 1,
    })
}

#[test]
fn every_log_field_round_trips() {
    use pc::any_value::Value as V;
    let record = pl::LogRecord {
        time_unix_nano: 1_700_000_000_123_456_789,
        observed_time_unix_nano: 1_700_000_000_223_456_789,
        severity_number: 21,
        severity_text: "FATAL".into(),
        body: Some(some(V::KvlistValue(pc::KeyValueList { values: every_value() }))),
        attributes: every_value(),
        dropped_attributes_count: 7,
        flags: 0x101,
        trace_id: vec![0xab; 16],
        span_id: vec![0xcd; 8],
        event_name: "app.crash".into(),
    };
    let req = ExportLogsServiceRequest {
        resource_logs: vec![
            pl::ResourceLogs {
                resource: resource(),
                scope_logs: vec![pl::ScopeLogs {
                    scope: scope(),
                    log_records: vec![
                        record.clone(),
                        pl::LogRecord {
                            body: Some(some(V::BytesValue(vec![9; 33]))),
                            ..Default::default()
                        },
                    ],
                    schema_url: "https://opentelemetry.io/schemas/1.29.0".into(),
                }],
                schema_url: "https://opentelemetry.io/schemas/1.28.0".into(),
            },
            pl::ResourceLogs {
                resource: None,
                scope_logs: vec![pl::ScopeLogs {
                    scope: None,
                    log_records: vec![record],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            },
        ],
    };
    let back = logs(&serde_json::to_string(&req).unwrap());
    assert_same(&back, &req);
    let decoded = logs_from_otlp(back);
    assert_eq!(decoded.rejected, 0, "{}", decoded.error_message());
}

fn exemplars() -> Vec<pm::Exemplar> {
    vec![
        pm::Exemplar {
            filtered_attributes: every_value(),
            time_unix_nano: 1_700_000_000_000_000_001,
            span_id: vec![1; 8],
            trace_id: vec![2; 16],
            value: Some(pm::exemplar::Value::AsInt(-42)),
        },
        pm::Exemplar {
            value: Some(pm::exemplar::Value::AsDouble(2.5)),
            ..Default::default()
        },
        pm::Exemplar::default(),
    ]
}

/// Every metric kind with every field set.
fn every_metric() -> Vec<pm::Metric> {
    use pm::metric::Data;
    let number = |value| pm::NumberDataPoint {
        attributes: every_value(),
        start_time_unix_nano: 1_700_000_000_000_000_000,
        time_unix_nano: 1_700_000_010_000_000_000,
        exemplars: exemplars(),
        flags: 1,
        value,
    };
    let metric = |name: &str, data| pm::Metric {
        name: name.into(),
        description: format!("the {name}"),
        unit: "ms".into(),
        metadata: vec![kv("meta", pc::any_value::Value::StringValue("data".into()))],
        data: Some(data),
    };
    vec![
        metric(
            "gauge",
            Data::Gauge(pm::Gauge {
                data_points: vec![
                    number(Some(pm::number_data_point::Value::AsDouble(-0.5))),
                    number(Some(pm::number_data_point::Value::AsInt(i64::MAX))),
                    number(None),
                ],
            }),
        ),
        metric(
            "sum",
            Data::Sum(pm::Sum {
                data_points: vec![number(Some(pm::number_data_point::Value::AsInt(9)))],
                aggregation_temporality: 2,
                is_monotonic: true,
            }),
        ),
        metric(
            "histogram",
            Data::Histogram(pm::Histogram {
                data_points: vec![
                    pm::HistogramDataPoint {
                        attributes: every_value(),
                        start_time_unix_nano: 5,
                        time_unix_nano: 6,
                        count: u64::MAX,
                        sum: Some(12.5),
                        bucket_counts: vec![1, 0, u64::MAX],
                        explicit_bounds: vec![0.5, 1e10],
                        exemplars: exemplars(),
                        flags: 1,
                        min: Some(-3.0),
                        max: Some(1e300),
                    },
                    pm::HistogramDataPoint {
                        count: 2,
                        sum: None,
                        min: None,
                        max: Some(0.0),
                        ..Default::default()
                    },
                ],
                aggregation_temporality: 1,
            }),
        ),
        metric(
            "exponential",
            Data::ExponentialHistogram(pm::ExponentialHistogram {
                data_points: vec![
                    pm::ExponentialHistogramDataPoint {
                        attributes: every_value(),
                        start_time_unix_nano: 7,
                        time_unix_nano: 8,
                        count: 10,
                        sum: Some(99.5),
                        scale: -3,
                        zero_count: 2,
                        positive: Some(pm::exponential_histogram_data_point::Buckets {
                            offset: -5,
                            bucket_counts: vec![1, 2, 3],
                        }),
                        negative: Some(pm::exponential_histogram_data_point::Buckets::default()),
                        flags: 1,
                        exemplars: exemplars(),
                        min: Some(0.001),
                        max: Some(50.0),
                        zero_threshold: 1e-9,
                    },
                    pm::ExponentialHistogramDataPoint {
                        scale: 20,
                        positive: None,
                        negative: Some(pm::exponential_histogram_data_point::Buckets {
                            offset: i32::MAX,
                            bucket_counts: vec![u64::MAX],
                        }),
                        ..Default::default()
                    },
                ],
                aggregation_temporality: 2,
            }),
        ),
        metric(
            "summary",
            Data::Summary(pm::Summary {
                data_points: vec![pm::SummaryDataPoint {
                    attributes: every_value(),
                    start_time_unix_nano: 9,
                    time_unix_nano: 10,
                    count: 100,
                    sum: 1234.5,
                    quantile_values: vec![
                        pm::summary_data_point::ValueAtQuantile {
                            quantile: 0.0,
                            value: f64::NEG_INFINITY,
                        },
                        pm::summary_data_point::ValueAtQuantile {
                            quantile: 0.99,
                            value: f64::NAN,
                        },
                        pm::summary_data_point::ValueAtQuantile {
                            quantile: 1.0,
                            value: f64::INFINITY,
                        },
                    ],
                    flags: 0,
                }],
            }),
        ),
    ]
}

#[test]
fn every_metric_kind_round_trips() {
    let req = ExportMetricsServiceRequest {
        resource_metrics: vec![pm::ResourceMetrics {
            resource: resource(),
            scope_metrics: vec![
                pm::ScopeMetrics {
                    scope: scope(),
                    metrics: every_metric(),
                    schema_url: "https://opentelemetry.io/schemas/1.29.0".into(),
                },
                pm::ScopeMetrics {
                    scope: Some(pc::InstrumentationScope::default()),
                    // No data at all: decodes, then `metrics_from_otlp` rejects it.
                    metrics: vec![pm::Metric {
                        name: "nodata".into(),
                        ..Default::default()
                    }],
                    schema_url: String::new(),
                },
            ],
            schema_url: "https://opentelemetry.io/schemas/1.28.0".into(),
        }],
    };
    let json = serde_json::to_string(&req).unwrap();
    assert!(json.contains(r#""value":"NaN""#), "{json}");
    let back = metrics(&json);
    assert_same(&back, &req);
    let decoded = metrics_from_otlp(back);
    assert_eq!(decoded.rejected, 1, "{}", decoded.error_message());
    assert!(
        decoded.errors[0].contains("\"nodata\" has no data"),
        "{:?}",
        decoded.errors
    );
}

#[test]
fn every_span_field_round_trips() {
    let span = pt::Span {
        trace_id: (0..16).collect(),
        span_id: (100..108).collect(),
        trace_state: "vendor=x,other=y".into(),
        parent_span_id: vec![0xfe; 8],
        flags: 0x301,
        name: "GET /".into(),
        kind: 5,
        start_time_unix_nano: 1_700_000_000_000_000_000,
        end_time_unix_nano: u64::MAX,
        attributes: every_value(),
        dropped_attributes_count: 1,
        events: vec![
            pt::span::Event {
                time_unix_nano: 3,
                name: "exception".into(),
                attributes: every_value(),
                dropped_attributes_count: 2,
            },
            pt::span::Event::default(),
        ],
        dropped_events_count: 3,
        links: vec![
            pt::span::Link {
                trace_id: vec![7; 16],
                span_id: vec![8; 8],
                trace_state: "a=b".into(),
                attributes: every_value(),
                dropped_attributes_count: 4,
                flags: 0x100,
            },
            pt::span::Link::default(),
        ],
        dropped_links_count: u32::MAX,
        status: Some(pt::Status {
            message: "boom".into(),
            code: 2,
        }),
    };
    let req = ExportTraceServiceRequest {
        resource_spans: vec![pt::ResourceSpans {
            resource: resource(),
            scope_spans: vec![
                pt::ScopeSpans {
                    scope: scope(),
                    spans: vec![
                        span.clone(),
                        pt::Span {
                            status: Some(pt::Status::default()),
                            ..span
                        },
                        pt::Span::default(),
                    ],
                    schema_url: "s".into(),
                },
                pt::ScopeSpans::default(),
            ],
            schema_url: "r".into(),
        }],
    };
    assert_same(&trace(&serde_json::to_string(&req).unwrap()), &req);
}

// ---------------------------------------------------------------------------
// Property: arbitrary requests round-trip
// ---------------------------------------------------------------------------

fn text() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-z._/]{0,10}", 1 => "\\PC{0,8}"]
}

/// Finite doubles (opentelemetry-proto writes NaN/±Infinity as `null`, except
/// in summaries), including ones that need all 17 digits.
fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<f64>().prop_filter("finite", |d| d.is_finite()),
        1 => Just(-0.0),
        1 => Just(f64::MIN_POSITIVE / 4.0),
        1 => Just(f64::MAX),
        1 => -1e6..1e6f64,
    ]
}

fn any_value() -> BoxedStrategy<pc::AnyValue> {
    use pc::any_value::Value as V;
    let leaf = prop_oneof![
        1 => Just(None),
        3 => text().prop_map(|s| Some(V::StringValue(s))),
        1 => any::<bool>().prop_map(|b| Some(V::BoolValue(b))),
        2 => any::<i64>().prop_map(|i| Some(V::IntValue(i))),
        2 => finite().prop_map(|d| Some(V::DoubleValue(d))),
        1 => vec(any::<u8>(), 0..12).prop_map(|b| Some(V::BytesValue(b))),
        1 => any::<i32>().prop_map(|i| Some(V::StringValueStrindex(i))),
    ]
    .prop_map(|value| pc::AnyValue { value });
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4)
                .prop_map(|values| some(pc::any_value::Value::ArrayValue(pc::ArrayValue { values }))),
            attrs_of(inner).prop_map(|values| some(pc::any_value::Value::KvlistValue(pc::KeyValueList { values }))),
        ]
    })
    .boxed()
}

fn attrs_of(value: BoxedStrategy<pc::AnyValue>) -> impl Strategy<Value = Vec<pc::KeyValue>> {
    let kv = (
        text(),
        proptest::option::of(value),
        prop_oneof![3 => Just(0), 1 => any::<i32>()],
    )
        .prop_map(|(key, value, key_strindex)| pc::KeyValue {
            key,
            value,
            key_strindex,
        });
    vec(kv, 0..4)
}

fn attrs() -> impl Strategy<Value = Vec<pc::KeyValue>> {
    attrs_of(any_value())
}

fn id() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        vec(any::<u8>(), 16),
        vec(any::<u8>(), 8),
        vec(any::<u8>(), 0..20)
    ]
}

fn resource_strategy() -> impl Strategy<Value = Option<pr::Resource>> {
    let entity = (text(), text(), vec(text(), 0..3), vec(text(), 0..3)).prop_map(
        |(schema_url, r#type, id_keys, description_keys)| pc::EntityRef {
            schema_url,
            r#type,
            id_keys,
            description_keys,
        },
    );
    proptest::option::of((attrs(), any::<u32>(), vec(entity, 0..2)).prop_map(
        |(attributes, dropped_attributes_count, entity_refs)| pr::Resource {
            attributes,
            dropped_attributes_count,
            entity_refs,
        },
    ))
}

fn scope_strategy() -> impl Strategy<Value = Option<pc::InstrumentationScope>> {
    proptest::option::of((text(), text(), attrs(), any::<u32>()).prop_map(
        |(name, version, attributes, dropped_attributes_count)| pc::InstrumentationScope {
            name,
            version,
            attributes,
            dropped_attributes_count,
        },
    ))
}

fn span_strategy() -> impl Strategy<Value = pt::Span> {
    let event = (any::<u64>(), text(), attrs(), any::<u32>()).prop_map(
        |(time_unix_nano, name, attributes, dropped_attributes_count)| pt::span::Event {
            time_unix_nano,
            name,
            attributes,
            dropped_attributes_count,
        },
    );
    let link = (id(), id(), text(), attrs(), any::<u32>(), any::<u32>()).prop_map(
        |(trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags)| pt::span::Link {
            trace_id,
            span_id,
            trace_state,
            attributes,
            dropped_attributes_count,
            flags,
        },
    );
    let status = proptest::option::of((text(), any::<i32>()).prop_map(|(message, code)| pt::Status { message, code }));
    let a = (id(), id(), text(), id(), any::<u32>(), text(), any::<i32>());
    let b = (
        any::<u64>(),
        any::<u64>(),
        attrs(),
        any::<u32>(),
        vec(event, 0..3),
        any::<u32>(),
    );
    let c = (vec(link, 0..3), any::<u32>(), status);
    (a, b, c).prop_map(
        |(
            (trace_id, span_id, trace_state, parent_span_id, flags, name, kind),
            (
                start_time_unix_nano,
                end_time_unix_nano,
                attributes,
                dropped_attributes_count,
                events,
                dropped_events_count,
            ),
            (links, dropped_links_count, status),
        )| pt::Span {
            trace_id,
            span_id,
            trace_state,
            parent_span_id,
            flags,
            name,
            kind,
            start_time_unix_nano,
            end_time_unix_nano,
            attributes,
            dropped_attributes_count,
            events,
            dropped_events_count,
            links,
            dropped_links_count,
            status,
        },
    )
}

fn trace_request() -> impl Strategy<Value = ExportTraceServiceRequest> {
    let ss =
        (scope_strategy(), vec(span_strategy(), 0..3), text()).prop_map(|(scope, spans, schema_url)| pt::ScopeSpans {
            scope,
            spans,
            schema_url,
        });
    let rs = (resource_strategy(), vec(ss, 0..3), text()).prop_map(|(resource, scope_spans, schema_url)| {
        pt::ResourceSpans {
            resource,
            scope_spans,
            schema_url,
        }
    });
    vec(rs, 0..3).prop_map(|resource_spans| ExportTraceServiceRequest { resource_spans })
}

fn log_request() -> impl Strategy<Value = ExportLogsServiceRequest> {
    let a = (
        any::<u64>(),
        any::<u64>(),
        any::<i32>(),
        text(),
        proptest::option::of(any_value()),
        attrs(),
    );
    let b = (any::<u32>(), any::<u32>(), id(), id(), text());
    let record = (a, b).prop_map(
        |(
            (time_unix_nano, observed_time_unix_nano, severity_number, severity_text, body, attributes),
            (dropped_attributes_count, flags, trace_id, span_id, event_name),
        )| pl::LogRecord {
            time_unix_nano,
            observed_time_unix_nano,
            severity_number,
            severity_text,
            body,
            attributes,
            dropped_attributes_count,
            flags,
            trace_id,
            span_id,
            event_name,
        },
    );
    let sl = (scope_strategy(), vec(record, 0..3), text()).prop_map(|(scope, log_records, schema_url)| pl::ScopeLogs {
        scope,
        log_records,
        schema_url,
    });
    let rl =
        (resource_strategy(), vec(sl, 0..3), text()).prop_map(|(resource, scope_logs, schema_url)| pl::ResourceLogs {
            resource,
            scope_logs,
            schema_url,
        });
    vec(rl, 0..3).prop_map(|resource_logs| ExportLogsServiceRequest { resource_logs })
}

fn exemplar_strategy() -> impl Strategy<Value = pm::Exemplar> {
    use pm::exemplar::Value as V;
    let value = prop_oneof![
        Just(None),
        any::<i64>().prop_map(|i| Some(V::AsInt(i))),
        finite().prop_map(|d| Some(V::AsDouble(d)))
    ];
    (attrs(), any::<u64>(), id(), id(), value).prop_map(
        |(filtered_attributes, time_unix_nano, span_id, trace_id, value)| pm::Exemplar {
            filtered_attributes,
            time_unix_nano,
            span_id,
            trace_id,
            value,
        },
    )
}

type Base = (Vec<pc::KeyValue>, u64, u64, u32, Vec<pm::Exemplar>);

fn base() -> impl Strategy<Value = Base> {
    (
        attrs(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        vec(exemplar_strategy(), 0..2),
    )
}

fn metric_data() -> impl Strategy<Value = Option<pm::metric::Data>> {
    use pm::metric::Data;
    use pm::number_data_point::Value as NV;
    let nvalue = prop_oneof![
        Just(None),
        any::<i64>().prop_map(|i| Some(NV::AsInt(i))),
        finite().prop_map(|d| Some(NV::AsDouble(d)))
    ];
    let number = (base(), nvalue)
        .prop_map(
            |((attributes, start_time_unix_nano, time_unix_nano, flags, exemplars), value)| pm::NumberDataPoint {
                attributes,
                start_time_unix_nano,
                time_unix_nano,
                exemplars,
                flags,
                value,
            },
        )
        .boxed();
    let opt = || proptest::option::of(finite());
    let histogram = (
        base(),
        any::<u64>(),
        opt(),
        vec(any::<u64>(), 0..4),
        vec(finite(), 0..4),
        opt(),
        opt(),
    )
        .prop_map(
            |(
                (attributes, start_time_unix_nano, time_unix_nano, flags, exemplars),
                count,
                sum,
                bucket_counts,
                explicit_bounds,
                min,
                max,
            )| {
                pm::HistogramDataPoint {
                    attributes,
                    start_time_unix_nano,
                    time_unix_nano,
                    count,
                    sum,
                    bucket_counts,
                    explicit_bounds,
                    exemplars,
                    flags,
                    min,
                    max,
                }
            },
        );
    let buckets = || {
        proptest::option::of(
            (any::<i32>(), vec(any::<u64>(), 0..4)).prop_map(|(offset, bucket_counts)| {
                pm::exponential_histogram_data_point::Buckets { offset, bucket_counts }
            }),
        )
    };
    let exp = (
        base(),
        (any::<u64>(), opt(), any::<i32>(), any::<u64>()),
        buckets(),
        buckets(),
        (opt(), opt(), finite()),
    )
        .prop_map(
            |(
                (attributes, start_time_unix_nano, time_unix_nano, flags, exemplars),
                (count, sum, scale, zero_count),
                positive,
                negative,
                (min, max, zero_threshold),
            )| {
                pm::ExponentialHistogramDataPoint {
                    attributes,
                    start_time_unix_nano,
                    time_unix_nano,
                    count,
                    sum,
                    scale,
                    zero_count,
                    positive,
                    negative,
                    flags,
                    exemplars,
                    min,
                    max,
                    zero_threshold,
                }
            },
        );
    // Summaries are written with the special doubles, so any double goes.
    let quantile = (any::<f64>(), any::<f64>())
        .prop_map(|(quantile, value)| pm::summary_data_point::ValueAtQuantile { quantile, value });
    let summary = (
        attrs(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        finite(),
        vec(quantile, 0..3),
        any::<u32>(),
    )
        .prop_map(
            |(attributes, start_time_unix_nano, time_unix_nano, count, sum, quantile_values, flags)| {
                pm::SummaryDataPoint {
                    attributes,
                    start_time_unix_nano,
                    time_unix_nano,
                    count,
                    sum,
                    quantile_values,
                    flags,
                }
            },
        );
    prop_oneof![
        Just(None),
        vec(number.clone(), 0..3).prop_map(|data_points| Some(Data::Gauge(pm::Gauge { data_points }))),
        (vec(number, 0..3), any::<i32>(), any::<bool>()).prop_map(
            |(data_points, aggregation_temporality, is_monotonic)| {
                Some(Data::Sum(pm::Sum {
                    data_points,
                    aggregation_temporality,
                    is_monotonic,
                }))
            }
        ),
        (vec(histogram, 0..3), any::<i32>()).prop_map(|(data_points, aggregation_temporality)| {
            Some(Data::Histogram(pm::Histogram {
                data_points,
                aggregation_temporality,
            }))
        }),
        (vec(exp, 0..3), any::<i32>()).prop_map(|(data_points, aggregation_temporality)| {
            Some(Data::ExponentialHistogram(pm::ExponentialHistogram {
                data_points,
                aggregation_temporality,
            }))
        }),
        vec(summary, 0..3).prop_map(|data_points| Some(Data::Summary(pm::Summary { data_points }))),
    ]
}

fn metric_request() -> impl Strategy<Value = ExportMetricsServiceRequest> {
    let metric =
        (text(), text(), text(), attrs(), metric_data()).prop_map(|(name, description, unit, metadata, data)| {
            pm::Metric {
                name,
                description,
                unit,
                metadata,
                data,
            }
        });
    let sm = (scope_strategy(), vec(metric, 0..3), text()).prop_map(|(scope, metrics, schema_url)| pm::ScopeMetrics {
        scope,
        metrics,
        schema_url,
    });
    let rm = (resource_strategy(), vec(sm, 0..3), text()).prop_map(|(resource, scope_metrics, schema_url)| {
        pm::ResourceMetrics {
            resource,
            scope_metrics,
            schema_url,
        }
    });
    vec(rm, 0..3).prop_map(|resource_metrics| ExportMetricsServiceRequest { resource_metrics })
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn arbitrary_trace_requests_round_trip(req in trace_request()) {
        let json = serde_json::to_string(&req).unwrap();
        same(&trace_request_from_json(json.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?, &req)?;
    }

    #[test]
    fn arbitrary_log_requests_round_trip(req in log_request()) {
        let json = serde_json::to_string(&req).unwrap();
        same(&logs_request_from_json(json.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?, &req)?;
    }

    #[test]
    fn arbitrary_metric_requests_round_trip(req in metric_request()) {
        let json = serde_json::to_string(&req).unwrap();
        same(&metrics_request_from_json(json.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?, &req)?;
    }
}

// ---------------------------------------------------------------------------
// Hand-written documents: leniency
// ---------------------------------------------------------------------------

#[test]
fn integers_as_numbers_or_strings() {
    let as_strings = trace(&span_doc(
        r#"{"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"18446744073709551615",
            "droppedAttributesCount":"3","flags":"257","kind":"2",
            "attributes":[{"key":"k","value":{"intValue":"-9223372036854775808"}}]}"#,
    ));
    let as_numbers = trace(&span_doc(
        r#"{"startTimeUnixNano":1700000000000000000,"endTimeUnixNano":18446744073709551615,
            "droppedAttributesCount":3,"flags":257,"kind":2,
            "attributes":[{"key":"k","value":{"intValue":-9223372036854775808}}]}"#,
    ));
    assert_same(&as_numbers, &as_strings);
    let s = only_span(&as_numbers);
    assert_eq!(s.start_time_unix_nano, 1_700_000_000_000_000_000);
    assert_eq!(s.end_time_unix_nano, u64::MAX);
    assert_eq!((s.dropped_attributes_count, s.flags, s.kind), (3, 257, 2));
    assert_eq!(
        s.attributes[0].value.as_ref().unwrap().value,
        Some(pc::any_value::Value::IntValue(i64::MIN))
    );

    // Integral numbers in other spellings.
    let s = trace(&span_doc(
        r#"{"droppedEventsCount":5.0,"droppedLinksCount":"1e3","startTimeUnixNano":1e18}"#,
    ));
    let s = only_span(&s);
    assert_eq!((s.dropped_events_count, s.dropped_links_count), (5, 1000));
    assert_eq!(s.start_time_unix_nano, 1_000_000_000_000_000_000);
    assert_eq!(
        attr_value(r#"{"intValue":"+42"}"#).value,
        Some(pc::any_value::Value::IntValue(42))
    );

    // Histogram counts, bucket counts and scales too.
    let req = metrics(
        r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"exponentialHistogram":{"dataPoints":[
            {"count":7,"zeroCount":"2","scale":"-3","positive":{"offset":"-2","bucketCounts":[1,"2",3]}}]}}]}]}]}"#,
    );
    let Some(pm::metric::Data::ExponentialHistogram(h)) = &req.resource_metrics[0].scope_metrics[0].metrics[0].data
    else {
        panic!("{req:?}")
    };
    let p = &h.data_points[0];
    assert_eq!((p.count, p.zero_count, p.scale), (7, 2, -3));
    assert_eq!(p.positive.as_ref().unwrap().offset, -2);
    assert_eq!(p.positive.as_ref().unwrap().bucket_counts, [1, 2, 3]);
}

#[test]
fn out_of_range_and_fractional_integers_are_errors() {
    for (field, value, msg) in [
        ("droppedAttributesCount", "-1", "-1 is out of range for a uint32"),
        (
            "droppedAttributesCount",
            "4294967296",
            "4294967296 is out of range for a uint32",
        ),
        (
            "flags",
            r#""4294967296""#,
            r#""4294967296" is out of range for a uint32"#,
        ),
        ("startTimeUnixNano", "-5", "-5 is out of range for a uint64"),
        (
            "startTimeUnixNano",
            r#""18446744073709551616""#,
            "out of range for a uint64",
        ),
        (
            "startTimeUnixNano",
            "1.5",
            "expected a uint64 (a number or decimal string), got 1.5",
        ),
        (
            "startTimeUnixNano",
            r#""12abc""#,
            r#"expected a uint64 (a number or decimal string), got "12abc""#,
        ),
        ("startTimeUnixNano", r#""""#, "expected a uint64"),
        (
            "startTimeUnixNano",
            "true",
            "expected a uint64 (a number or decimal string), got true",
        ),
    ] {
        let err = trace_err(&span_doc(&format!(r#"{{"{field}":{value}}}"#)));
        assert!(
            err.starts_with(&format!("resourceSpans[0].scopeSpans[0].spans[0].{field}: ")) && err.contains(msg),
            "{field}={value}: {err}"
        );
    }
    let err = trace_err(&span_doc(
        r#"{"attributes":[{"key":"k","value":{"intValue":"9223372036854775808"}}]}"#,
    ));
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue: "9223372036854775808" is out of range for an int64"#
    );
}

#[test]
fn enums_as_names_or_numbers() {
    let by_name = trace(&span_doc(
        r#"{"kind":"SPAN_KIND_SERVER","status":{"code":"STATUS_CODE_ERROR","message":"x"}}"#,
    ));
    let by_number = trace(&span_doc(r#"{"kind":2,"status":{"code":2,"message":"x"}}"#));
    let by_string = trace(&span_doc(r#"{"kind":"2","status":{"code":"2","message":"x"}}"#));
    assert_same(&by_name, &by_number);
    assert_same(&by_string, &by_number);
    assert_eq!(only_span(&by_name).kind, SpanKind::Server.as_i32());
    assert_eq!(
        only_span(&by_name).status.as_ref().unwrap().code,
        StatusCode::Error.as_i32()
    );
    for (name, n) in [
        ("SPAN_KIND_UNSPECIFIED", 0),
        ("SPAN_KIND_INTERNAL", 1),
        ("SPAN_KIND_CLIENT", 3),
        ("SPAN_KIND_PRODUCER", 4),
        ("SPAN_KIND_CONSUMER", 5),
    ] {
        assert_eq!(only_span(&trace(&span_doc(&format!(r#"{{"kind":"{name}"}}"#)))).kind, n);
    }
    // Unknown numbers pass (proto3 enums are open); the converter rejects them.
    let req = trace(&span_doc(
        r#"{"traceId":"01010101010101010101010101010101","spanId":"0101010101010101","kind":9}"#,
    ));
    assert_eq!(only_span(&req).kind, 9);
    let decoded = spans_from_otlp(req);
    assert!(
        decoded.errors[0].contains("kind 9 is not a SpanKind"),
        "{:?}",
        decoded.errors
    );

    let req = logs(
        r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[
            {"severityNumber":"SEVERITY_NUMBER_WARN"},{"severityNumber":13},{"severity_number":"SEVERITY_NUMBER_FATAL4"}]}]}]}"#,
    );
    let severities: Vec<_> = req.resource_logs[0].scope_logs[0]
        .log_records
        .iter()
        .map(|r| r.severity_number)
        .collect();
    assert_eq!(severities, [13, 13, 24]);

    for (name, n) in [
        ("AGGREGATION_TEMPORALITY_DELTA", 1),
        ("AGGREGATION_TEMPORALITY_CUMULATIVE", 2),
        ("AGGREGATION_TEMPORALITY_UNSPECIFIED", 0),
    ] {
        let req = metrics(&format!(
            r#"{{"resourceMetrics":[{{"scopeMetrics":[{{"metrics":[
                {{"sum":{{"aggregationTemporality":"{name}","isMonotonic":true}}}},
                {{"histogram":{{"aggregationTemporality":"{name}"}}}},
                {{"exponentialHistogram":{{"aggregation_temporality":"{name}"}}}}]}}]}}]}}"#
        ));
        let temporalities: Vec<_> = req.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .map(|m| match &m.data {
                Some(pm::metric::Data::Sum(s)) => {
                    assert!(s.is_monotonic);
                    s.aggregation_temporality
                }
                Some(pm::metric::Data::Histogram(h)) => h.aggregation_temporality,
                Some(pm::metric::Data::ExponentialHistogram(h)) => h.aggregation_temporality,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(temporalities, [n, n, n]);
    }
}

#[test]
fn snake_case_field_names_are_accepted() {
    let camel = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":{"stringValue":"x"}}],
        "droppedAttributesCount":1,"entityRefs":[{"schemaUrl":"u","type":"t","idKeys":["a"],"descriptionKeys":["b"]}]},
        "schemaUrl":"r","scopeSpans":[{"schemaUrl":"s","scope":{"name":"n","droppedAttributesCount":2},
        "spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","parentSpanId":"0807060504030201",
        "traceState":"a=b","startTimeUnixNano":"1","endTimeUnixNano":"2","droppedAttributesCount":3,"droppedEventsCount":4,
        "droppedLinksCount":5,"events":[{"timeUnixNano":"3","droppedAttributesCount":6}],
        "links":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","traceState":"c=d","droppedAttributesCount":7}],
        "attributes":[{"key":"b","value":{"boolValue":true}},{"key":"c","value":{"intValue":"5"}},{"key":"d","value":{"doubleValue":1.5}},
        {"key":"e","value":{"bytesValue":"AQI="}},{"key":"f","value":{"arrayValue":{"values":[{"stringValue":"y"}]}}},
        {"key":"g","value":{"kvlistValue":{"values":[{"key":"h","value":{"intValue":1}}]}}}]}]}]}]}"#;
    let snake = r#"{"resource_spans":[{"resource":{"attributes":[{"key":"a","value":{"string_value":"x"}}],
        "dropped_attributes_count":1,"entity_refs":[{"schema_url":"u","type":"t","id_keys":["a"],"description_keys":["b"]}]},
        "schema_url":"r","scope_spans":[{"schema_url":"s","scope":{"name":"n","dropped_attributes_count":2},
        "spans":[{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","parent_span_id":"0807060504030201",
        "trace_state":"a=b","start_time_unix_nano":"1","end_time_unix_nano":"2","dropped_attributes_count":3,"dropped_events_count":4,
        "dropped_links_count":5,"events":[{"time_unix_nano":"3","dropped_attributes_count":6}],
        "links":[{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","trace_state":"c=d","dropped_attributes_count":7}],
        "attributes":[{"key":"b","value":{"bool_value":true}},{"key":"c","value":{"int_value":"5"}},{"key":"d","value":{"double_value":1.5}},
        {"key":"e","value":{"bytes_value":"AQI="}},{"key":"f","value":{"array_value":{"values":[{"string_value":"y"}]}}},
        {"key":"g","value":{"kvlist_value":{"values":[{"key":"h","value":{"int_value":1}}]}}}]}]}]}]}"#;
    let (camel, snake) = (trace(camel), trace(snake));
    assert_same(&snake, &camel);
    let s = only_span(&camel);
    assert_eq!((s.dropped_events_count, s.links[0].dropped_attributes_count), (4, 7));
    assert_eq!(
        camel.resource_spans[0].resource.as_ref().unwrap().entity_refs[0].description_keys,
        ["b"]
    );

    let camel = metrics(
        r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","exponentialHistogram":{"dataPoints":[
            {"startTimeUnixNano":"1","timeUnixNano":"2","zeroCount":"3","zeroThreshold":0.5,
             "positive":{"bucketCounts":["1"]},"exemplars":[{"filteredAttributes":[],"timeUnixNano":"4","asInt":"5",
             "spanId":"0102030405060708","traceId":""}]}],"aggregationTemporality":1}},
            {"summary":{"dataPoints":[{"quantileValues":[{"quantile":0.5,"value":1}]}]}},
            {"gauge":{"dataPoints":[{"asDouble":1.5}]}}]}]}]}"#,
    );
    let snake = metrics(
        r#"{"resource_metrics":[{"scope_metrics":[{"metrics":[{"name":"m","exponential_histogram":{"data_points":[
            {"start_time_unix_nano":"1","time_unix_nano":"2","zero_count":"3","zero_threshold":0.5,
             "positive":{"bucket_counts":["1"]},"exemplars":[{"filtered_attributes":[],"time_unix_nano":"4","as_int":"5",
             "span_id":"0102030405060708","trace_id":""}]}],"aggregation_temporality":1}},
            {"summary":{"data_points":[{"quantile_values":[{"quantile":0.5,"value":1}]}]}},
            {"gauge":{"data_points":[{"as_double":1.5}]}}]}]}]}"#,
    );
    assert_same(&snake, &camel);
    let camel = logs(
        r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"observedTimeUnixNano":"9","severityText":"W","eventName":"e",
            "traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708"}]}]}]}"#,
    );
    let snake = logs(
        r#"{"resource_logs":[{"scope_logs":[{"log_records":[{"observed_time_unix_nano":"9","severity_text":"W","event_name":"e",
            "trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708"}]}]}]}"#,
    );
    assert_same(&snake, &camel);
    assert_eq!(camel.resource_logs[0].scope_logs[0].log_records[0].event_name, "e");
}

#[test]
fn hex_ids_are_case_insensitive() {
    let upper = trace(&span_doc(
        r#"{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","parentSpanId":"EeE19b7Ec3C1b173",
            "links":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174"}]}"#,
    ));
    let lower = trace(&span_doc(
        r#"{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"eee19b7ec3c1b173",
            "links":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"}]}"#,
    ));
    assert_same(&upper, &lower);
    assert_eq!(
        only_span(&upper).trace_id,
        [
            0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c
        ]
    );
    // Empty means no id.
    let none = trace(&span_doc(r#"{"traceId":"","parentSpanId":""}"#));
    assert!(only_span(&none).trace_id.is_empty() && only_span(&none).parent_span_id.is_empty());
}

#[test]
fn id_lengths_are_left_to_the_converter() {
    let req = trace(&span_doc(
        r#"{"traceId":"abcd","spanId":"0102030405060708","name":"short"}"#,
    ));
    assert_eq!(only_span(&req).trace_id, [0xab, 0xcd]);
    let decoded = spans_from_otlp(req);
    assert_eq!(decoded.rejected, 1);
    assert!(
        decoded.errors[0].contains("trace_id must be 16 bytes"),
        "{:?}",
        decoded.errors
    );
}

#[test]
fn unknown_fields_are_ignored() {
    let with_unknown = trace(
        r#"{"extra":1,"resourceSpans":[{"future":{"a":[1,2]},"resource":{"attributes":[],"x":null,"entityRefs":[{"y":1}]},
            "scopeSpans":[{"scope":{"name":"n","nope":"z"},"spans":[{"name":"s","kind":1,"unknownField":{"deep":[{"traceId":"zz"}]},
            "status":{"code":0,"details":"x"},"attributes":[{"key":"k","value":{"stringValue":"v","futureValue":3},"note":1}],
            "events":[{"name":"e","x":1}],"links":[{"traceId":"","w":2}]}]}]}]}"#,
    );
    let without = trace(
        r#"{"resourceSpans":[{"resource":{"attributes":[],"entityRefs":[{}]},
            "scopeSpans":[{"scope":{"name":"n"},"spans":[{"name":"s","kind":1,"status":{"code":0},
            "attributes":[{"key":"k","value":{"stringValue":"v"}}],"events":[{"name":"e"}],"links":[{"traceId":""}]}]}]}]}"#,
    );
    assert_same(&with_unknown, &without);
    // A value with only unknown members is empty.
    assert_eq!(attr_value(r#"{"stringValueV2":"x"}"#).value, None);
    // Each top-level decoder ignores the other signals' envelopes.
    let req = metrics(r#"{"resourceSpans":[{"bad":1}],"resourceLogs":"ignored","resourceMetrics":[]}"#);
    assert!(req.resource_metrics.is_empty());
}

#[test]
fn repeated_keys_last_wins() {
    let req = trace(&span_doc(
        r#"{"name":"a","name":"b","kind":1,"kind":"SPAN_KIND_CLIENT","trace_id":"01","traceId":"02"}"#,
    ));
    let s = only_span(&req);
    assert_eq!((s.name.as_str(), s.kind, s.trace_id.as_slice()), ("b", 3, &[2u8][..]));
    // The same oneof member twice (in either spelling) is not a conflict.
    assert_eq!(
        attr_value(r#"{"intValue":"1","int_value":2}"#).value,
        Some(pc::any_value::Value::IntValue(2))
    );
}

#[test]
fn null_means_default() {
    let req = trace(
        r#"{"resourceSpans":[{"resource":null,"schemaUrl":null,"scopeSpans":[{"scope":null,"spans":[
            {"traceId":null,"spanId":null,"name":null,"kind":null,"startTimeUnixNano":null,"flags":null,"status":null,
             "attributes":[{"key":"k","value":null},{"key":"e","value":{"stringValue":null}},
                           {"key":"a","value":{"arrayValue":{"values":[null,{"intValue":"1"}]}}}],
             "events":null,"links":[null]},
            null]}]},
          null]}"#,
    );
    let want = ExportTraceServiceRequest {
        resource_spans: vec![
            pt::ResourceSpans {
                resource: None,
                scope_spans: vec![pt::ScopeSpans {
                    scope: None,
                    spans: vec![
                        pt::Span {
                            attributes: vec![
                                pc::KeyValue {
                                    key: "k".into(),
                                    value: None,
                                    key_strindex: 0,
                                },
                                pc::KeyValue {
                                    key: "e".into(),
                                    value: Some(pc::AnyValue { value: None }),
                                    key_strindex: 0,
                                },
                                kv(
                                    "a",
                                    pc::any_value::Value::ArrayValue(pc::ArrayValue {
                                        values: vec![
                                            pc::AnyValue { value: None },
                                            some(pc::any_value::Value::IntValue(1)),
                                        ],
                                    }),
                                ),
                            ],
                            links: vec![pt::span::Link::default()],
                            ..Default::default()
                        },
                        pt::Span::default(),
                    ],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            },
            pt::ResourceSpans::default(),
        ],
    };
    assert_same(&req, &want);

    // Optional doubles: null is absent, a number is present.
    let req = metrics(
        r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[
            {"sum":null,"min":0,"max":null,"bucketCounts":null}]}}]}]}]}"#,
    );
    let Some(pm::metric::Data::Histogram(h)) = &req.resource_metrics[0].scope_metrics[0].metrics[0].data else {
        panic!("{req:?}")
    };
    assert_eq!(
        (h.data_points[0].sum, h.data_points[0].min, h.data_points[0].max),
        (None, Some(0.0), None)
    );
    // A null oneof member does not set the oneof.
    assert_eq!(
        number_point(r#"{"gauge":{"dataPoints":[{"asInt":null,"asDouble":2}]}}"#).value,
        Some(pm::number_data_point::Value::AsDouble(2.0))
    );
    let req = metrics(r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":null}]}]}]}"#);
    assert_eq!(req.resource_metrics[0].scope_metrics[0].metrics[0].data, None);
}

#[test]
fn special_doubles() {
    use pc::any_value::Value as V;
    let bits = |v: pc::AnyValue| match v.value {
        Some(V::DoubleValue(d)) => d,
        other => panic!("{other:?}"),
    };
    assert!(bits(attr_value(r#"{"doubleValue":"NaN"}"#)).is_nan());
    assert_eq!(bits(attr_value(r#"{"doubleValue":"Infinity"}"#)), f64::INFINITY);
    assert_eq!(bits(attr_value(r#"{"doubleValue":"-Infinity"}"#)), f64::NEG_INFINITY);
    assert_eq!(bits(attr_value(r#"{"doubleValue":"2.5e-3"}"#)), 0.0025);
    assert_eq!(bits(attr_value(r#"{"doubleValue":7}"#)), 7.0);
    assert_eq!(
        bits(attr_value(r#"{"doubleValue":-0.0}"#)).to_bits(),
        (-0.0f64).to_bits()
    );
    assert_eq!(bits(attr_value(r#"{"doubleValue":0.1}"#)), 0.1);

    let p = number_point(r#"{"sum":{"dataPoints":[{"asDouble":"NaN"}]}}"#);
    assert!(matches!(p.value, Some(pm::number_data_point::Value::AsDouble(d)) if d.is_nan()));
    let req = metrics(
        r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[
            {"sum":"Infinity","min":"-Infinity","max":"NaN","explicitBounds":["-Infinity",0,"1.5","Infinity"]}]}},
            {"exponentialHistogram":{"dataPoints":[{"zeroThreshold":"1e-9","sum":"NaN"}]}},
            {"summary":{"dataPoints":[{"sum":"NaN","quantileValues":[{"quantile":"0.5","value":"-Infinity"}]}]}}]}]}]}"#,
    );
    let ms = &req.resource_metrics[0].scope_metrics[0].metrics;
    let Some(pm::metric::Data::Histogram(h)) = &ms[0].data else {
        panic!()
    };
    let p = &h.data_points[0];
    assert_eq!((p.sum, p.min), (Some(f64::INFINITY), Some(f64::NEG_INFINITY)));
    assert!(p.max.unwrap().is_nan());
    assert_eq!(p.explicit_bounds, [f64::NEG_INFINITY, 0.0, 1.5, f64::INFINITY]);
    let Some(pm::metric::Data::ExponentialHistogram(h)) = &ms[1].data else {
        panic!()
    };
    assert_eq!(h.data_points[0].zero_threshold, 1e-9);
    assert!(h.data_points[0].sum.unwrap().is_nan());
    let Some(pm::metric::Data::Summary(s)) = &ms[2].data else {
        panic!()
    };
    assert!(s.data_points[0].sum.is_nan());
    assert_eq!(s.data_points[0].quantile_values[0].quantile, 0.5);
    assert_eq!(s.data_points[0].quantile_values[0].value, f64::NEG_INFINITY);

    // Other spellings of the specials are not OTLP/JSON.
    for bad in [
        r#""nan""#,
        r#""inf""#,
        r#""-inf""#,
        r#""infinity""#,
        r#""1e999""#,
        r#""""#,
        r#""1,5""#,
        "true",
        "[]",
    ] {
        let err = trace_err(&span_doc(&format!(
            r#"{{"attributes":[{{"key":"k","value":{{"doubleValue":{bad}}}}}]}}"#
        )));
        assert!(
            err.starts_with(
                "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.doubleValue: expected a double"
            ),
            "{bad}: {err}"
        );
    }
}

#[test]
fn base64_variants() {
    use pc::any_value::Value as V;
    let want = Some(V::BytesValue(vec![0, 1, 2, 0xfa, 0xff]));
    for text in ["AAEC+v8=", "AAEC+v8", "AAEC-v8=", "AAEC-v8"] {
        assert_eq!(
            attr_value(&format!(r#"{{"bytesValue":"{text}"}}"#)).value,
            want,
            "{text}"
        );
    }
    assert_eq!(
        attr_value(r#"{"bytesValue":"/w=="}"#).value,
        Some(V::BytesValue(vec![0xff]))
    );
    assert_eq!(
        attr_value(r#"{"bytesValue":"_w"}"#).value,
        Some(V::BytesValue(vec![0xff]))
    );
    assert_eq!(
        attr_value(r#"{"bytesValue":""}"#).value,
        Some(V::BytesValue(Vec::new()))
    );
    let err = trace_err(&span_doc(
        r#"{"attributes":[{"key":"k","value":{"bytesValue":"not base64!"}}]}"#,
    ));
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.bytesValue: "not base64!" is not base64"#
    );
    let err = trace_err(&span_doc(r#"{"attributes":[{"key":"k","value":{"bytesValue":"A"}}]}"#));
    assert!(err.ends_with(r#""A" is not base64"#), "{err}");
}

#[test]
fn empty_objects() {
    assert_same(&trace("{}"), &ExportTraceServiceRequest::default());
    assert_same(&logs("{}"), &ExportLogsServiceRequest::default());
    assert_same(&metrics(" {} \n"), &ExportMetricsServiceRequest::default());
    let req = trace(r#"{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{"status":{}}]}]}]}"#);
    let want = ExportTraceServiceRequest {
        resource_spans: vec![pt::ResourceSpans {
            resource: Some(pr::Resource::default()),
            scope_spans: vec![pt::ScopeSpans {
                scope: Some(pc::InstrumentationScope::default()),
                spans: vec![pt::Span {
                    status: Some(pt::Status::default()),
                    ..Default::default()
                }],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    assert_same(&req, &want);
    assert_eq!(attr_value("{}"), pc::AnyValue { value: None });
    assert_eq!(
        attr_value(r#"{"arrayValue":{}}"#).value,
        Some(pc::any_value::Value::ArrayValue(pc::ArrayValue::default()))
    );
    assert_eq!(
        attr_value(r#"{"kvlistValue":{}}"#).value,
        Some(pc::any_value::Value::KvlistValue(pc::KeyValueList::default()))
    );
    let req = logs(r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{}}]}]}]}"#);
    assert_eq!(
        req.resource_logs[0].scope_logs[0].log_records[0].body,
        Some(pc::AnyValue { value: None })
    );
    let req = metrics(r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{}}]}]}]}"#);
    assert_eq!(
        req.resource_metrics[0].scope_metrics[0].metrics[0].data,
        Some(pm::metric::Data::Gauge(pm::Gauge::default()))
    );
}

#[test]
fn kvlist_and_array_nesting() {
    use pc::any_value::Value as V;
    let v = attr_value(
        r#"{"kvlistValue":{"values":[
            {"key":"list","value":{"arrayValue":{"values":[
                {"intValue":1},
                {"kvlistValue":{"values":[{"key":"deep","value":{"arrayValue":{"values":[{"boolValue":false},{}]}}}]}},
                {"arrayValue":{"values":[]}},
                {"bytesValue":"AQ=="}]}}},
            {"key":"empty"},
            {"key":"map","value":{"kvlistValue":{"values":[{"key":"x","value":{"doubleValue":"NaN"}}]}}}]}}"#,
    );
    let want = some(V::KvlistValue(pc::KeyValueList {
        values: vec![
            kv(
                "list",
                V::ArrayValue(pc::ArrayValue {
                    values: vec![
                        some(V::IntValue(1)),
                        some(V::KvlistValue(pc::KeyValueList {
                            values: vec![kv(
                                "deep",
                                V::ArrayValue(pc::ArrayValue {
                                    values: vec![some(V::BoolValue(false)), pc::AnyValue { value: None }],
                                }),
                            )],
                        })),
                        some(V::ArrayValue(pc::ArrayValue::default())),
                        some(V::BytesValue(vec![1])),
                    ],
                }),
            ),
            pc::KeyValue {
                key: "empty".into(),
                value: None,
                key_strindex: 0,
            },
            kv(
                "map",
                V::KvlistValue(pc::KeyValueList {
                    values: vec![kv("x", V::DoubleValue(f64::NAN))],
                }),
            ),
        ],
    }));
    // NaN != NaN, so compare encodings.
    assert_eq!(v.encode_to_vec(), want.encode_to_vec(), "{v:#?}");

    // And through the model.
    let json = span_doc(&format!(
        r#"{{"traceId":"01010101010101010101010101010101","spanId":"0101010101010101","attributes":[{{"key":"k","value":{}}}]}}"#,
        r#"{"arrayValue":{"values":[{"stringValue":"a"},{"kvlistValue":{"values":[{"key":"b","value":{"intValue":"2"}}]}}]}}"#
    ));
    let spans = spans_from_otlp(trace(&json)).records;
    assert_eq!(
        spans[0].attributes[0].value,
        AnyValue::Array(vec![
            AnyValue::Str("a".into()),
            AnyValue::Map(vec![skein_model::KeyValue::new("b", 2i64)])
        ])
    );
}

#[test]
fn byte_order_mark_is_skipped() {
    let mut body = b"\xEF\xBB\xBF".to_vec();
    body.extend_from_slice(br#"{"resourceSpans":[]}"#);
    assert!(trace_request_from_json(&body).unwrap().resource_spans.is_empty());
}

// ---------------------------------------------------------------------------
// Hand-written documents: errors name the path
// ---------------------------------------------------------------------------

#[test]
fn bad_hex_names_the_path() {
    let err = trace_err(
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[
            {"traceId":"0102030405060708090a0b0c0d0e0f10"},{},{"traceId":"xyz"}]}]}]}"#,
    );
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[2].traceId: "xyz" is not hex"#
    );
    let err = trace_err(&span_doc(r#"{"links":[{},{"spanId":"abc"}]}"#));
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[0].links[1].spanId: "abc" is not hex"#
    );
    let err = trace_err(&span_doc(r#"{"parent_span_id":"0g"}"#));
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[0].parent_span_id: "0g" is not hex"#
    );
    let err = trace_err(&span_doc(r#"{"traceId":16}"#));
    assert_eq!(
        err,
        "resourceSpans[0].scopeSpans[0].spans[0].traceId: expected a hex string, got 16"
    );
    let err =
        logs_request_from_json(br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"spanId":"AQIDBAUGBwg="}]}]}]}"#)
            .unwrap_err()
            .to_string();
    assert_eq!(
        err,
        r#"resourceLogs[0].scopeLogs[0].logRecords[0].spanId: "AQIDBAUGBwg=" is not hex"#
    );
    let err = metrics_request_from_json(
        br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"exemplars":[{"traceId":"q"}]}]}}]}]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        r#"resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[0].exemplars[0].traceId: "q" is not hex"#
    );
    // Long values are cut short in the message.
    let err = trace_err(&span_doc(&format!(r#"{{"traceId":"{}"}}"#, "z".repeat(500))));
    assert!(err.len() < 200 && err.ends_with("…\" is not hex"), "{err}");
}

#[test]
fn bad_enum_names_the_path() {
    let err = trace_err(&span_doc(r#"{"kind":"SERVER"}"#));
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[0].kind: "SERVER" is not a SpanKind name"#
    );
    let err = trace_err(&span_doc(r#"{"status":{"code":"STATUS_CODE_FAILED"}}"#));
    assert_eq!(
        err,
        r#"resourceSpans[0].scopeSpans[0].spans[0].status.code: "STATUS_CODE_FAILED" is not a StatusCode name"#
    );
    let err =
        logs_request_from_json(br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{},{"severityNumber":"WARN"}]}]}]}"#)
            .unwrap_err()
            .to_string();
    assert_eq!(
        err,
        r#"resourceLogs[0].scopeLogs[0].logRecords[1].severityNumber: "WARN" is not a SeverityNumber name"#
    );
    let err = metrics_request_from_json(
        br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"sum":{"aggregationTemporality":"DELTA"}}]}]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        r#"resourceMetrics[0].scopeMetrics[0].metrics[0].sum.aggregationTemporality: "DELTA" is not an AggregationTemporality name"#
    );
    let err = trace_err(&span_doc(r#"{"kind":{"v":1}}"#));
    assert_eq!(
        err,
        "resourceSpans[0].scopeSpans[0].spans[0].kind: expected a SpanKind (a number or name), got an object"
    );
    let err = trace_err(&span_doc(r#"{"kind":4294967296}"#));
    assert!(err.ends_with("kind: 4294967296 is out of range for an int32"), "{err}");
}

#[test]
fn wrong_types_name_the_path() {
    for (doc, want) in [
        (
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":{"traceId":"00"}}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans: expected an array, got an object",
        ),
        (
            r#"{"resourceSpans":{}}"#,
            "resourceSpans: expected an array, got an object",
        ),
        (
            r#"{"resourceSpans":[[]]}"#,
            "resourceSpans[0]: expected an object, got an array",
        ),
        (
            r#"{"resourceSpans":[{"resource":"svc"}]}"#,
            r#"resourceSpans[0].resource: expected an object, got "svc""#,
        ),
        (
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":42}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].name: expected a string, got 42",
        ),
        (
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":"a=b"}]}]}]}"#,
            r#"resourceSpans[0].scopeSpans[0].spans[0].attributes: expected an array, got "a=b""#,
        ),
        (
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":"v"}]}]}]}]}"#,
            r#"resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value: expected an object, got "v""#,
        ),
        (
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":1}]}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].key: expected a string, got 1",
        ),
        (
            r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"kvlistValue":{"values":{"a":1}}}}]}}]}"#,
            "resourceSpans[0].resource.attributes[0].value.kvlistValue.values: expected an array, got an object",
        ),
        (
            r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"boolValue":"yes"}]}}}]}}]}"#,
            r#"resourceSpans[0].resource.attributes[0].value.arrayValue.values[0].boolValue: expected a boolean, got "yes""#,
        ),
        (
            r#"{"resourceSpans":[{"resource":{"entityRefs":[{"idKeys":[1]}]}}]}"#,
            "resourceSpans[0].resource.entityRefs[0].idKeys[0]: expected a string, got 1",
        ),
        (
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"stringValue":"a","intValue":"1"}}]}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue: stringValue is already set (only one of them may be)",
        ),
    ] {
        assert_eq!(trace_err(doc), want, "{doc}");
    }
    let err =
        metrics_request_from_json(br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{},"sum":{}}]}]}]}"#)
            .unwrap_err()
            .to_string();
    assert_eq!(
        err,
        "resourceMetrics[0].scopeMetrics[0].metrics[0].sum: gauge is already set (only one of them may be)"
    );
    let err = metrics_request_from_json(
        br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"bucketCounts":[1,"x"]}]}}]}]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        r#"resourceMetrics[0].scopeMetrics[0].metrics[0].histogram.dataPoints[0].bucketCounts[1]: expected a uint64 (a number or decimal string), got "x""#
    );
}

#[test]
fn invalid_json_and_non_objects() {
    let err = trace_err("{\"resourceSpans\": [\n  {\"scopeSpans\": [}]}");
    assert!(
        err.starts_with("invalid OTLP/JSON request body: ") && err.contains("line 2 column"),
        "{err}"
    );
    let err = trace_err("");
    assert_eq!(
        err,
        "invalid OTLP/JSON request body: EOF while parsing a value at line 1 column 0"
    );
    let err = trace_err(r#"{"resourceSpans":[]} trailing"#);
    assert!(err.contains("trailing characters at line 1 column 22"), "{err}");
    for (doc, got) in [("[]", "an array"), ("null", "null"), ("\"x\"", "\"x\""), ("12", "12")] {
        assert_eq!(
            trace_err(doc),
            format!("OTLP/JSON request body must be a JSON object, got {got}")
        );
    }
    let err = logs_request_from_json(b"\xff\xfe{}").unwrap_err().to_string();
    assert!(err.starts_with("invalid OTLP/JSON request body: "), "{err}");
}

// ---------------------------------------------------------------------------
// A payload as the OpenTelemetry JS SDK's OTLP/HTTP JSON exporter sends it
// ---------------------------------------------------------------------------

const JS_SDK_TRACES: &str = r#"{
  "resourceSpans": [
    {
      "resource": {
        "attributes": [
          { "key": "service.name", "value": { "stringValue": "checkout" } },
          { "key": "telemetry.sdk.language", "value": { "stringValue": "nodejs" } },
          { "key": "telemetry.sdk.name", "value": { "stringValue": "opentelemetry" } },
          { "key": "telemetry.sdk.version", "value": { "stringValue": "1.30.1" } },
          { "key": "process.pid", "value": { "intValue": 48213 } },
          { "key": "process.runtime.version", "value": { "stringValue": "20.11.1" } }
        ],
        "droppedAttributesCount": 0
      },
      "scopeSpans": [
        {
          "scope": { "name": "@opentelemetry/instrumentation-http", "version": "0.57.2" },
          "spans": [
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "eee19b7ec3c1b174",
              "name": "GET /api/cart",
              "kind": 2,
              "startTimeUnixNano": "1718000000123000000",
              "endTimeUnixNano": "1718000000375500000",
              "attributes": [
                { "key": "http.method", "value": { "stringValue": "GET" } },
                { "key": "http.status_code", "value": { "intValue": 200 } },
                { "key": "http.response_content_length", "value": { "intValue": "1834" } },
                { "key": "net.peer.port", "value": { "intValue": 52614 } },
                { "key": "http.flavor", "value": { "stringValue": "1.1" } }
              ],
              "droppedAttributesCount": 0,
              "events": [
                {
                  "attributes": [{ "key": "cache.hit", "value": { "boolValue": false } }],
                  "name": "cache.lookup",
                  "timeUnixNano": "1718000000130000000",
                  "droppedAttributesCount": 0
                }
              ],
              "droppedEventsCount": 0,
              "status": { "code": 0 },
              "links": [],
              "droppedLinksCount": 0,
              "flags": 257
            },
            {
              "traceId": "5b8efff798038103d269b633813fc60c",
              "spanId": "8448eb211c80319c",
              "parentSpanId": "eee19b7ec3c1b174",
              "name": "pg.query:SELECT",
              "kind": 3,
              "startTimeUnixNano": "1718000000140000000",
              "endTimeUnixNano": "1718000000190000000",
              "attributes": [
                { "key": "db.system", "value": { "stringValue": "postgresql" } },
                { "key": "db.rows", "value": { "doubleValue": 3 } }
              ],
              "droppedAttributesCount": 0,
              "events": [],
              "droppedEventsCount": 0,
              "status": { "code": 2, "message": "connection reset" },
              "links": [],
              "droppedLinksCount": 0
            }
          ]
        }
      ]
    }
  ]
}"#;

#[test]
fn js_sdk_payload() {
    let req = trace(JS_SDK_TRACES);
    let decoded = spans_from_otlp(req);
    assert_eq!(decoded.rejected, 0, "{}", decoded.error_message());
    let [server, client] = &decoded.records[..] else {
        panic!("{:?}", decoded.records)
    };
    assert_eq!(server.trace_id.to_hex(), "5b8efff798038103d269b633813fc60c");
    assert_eq!(server.span_id.to_hex(), "eee19b7ec3c1b174");
    assert_eq!(server.parent_span_id, None);
    assert_eq!(server.kind, SpanKind::Server);
    assert_eq!(server.start_time_unix_nano, 1_718_000_000_123_000_000);
    assert_eq!(server.end_time_unix_nano, 1_718_000_000_375_500_000);
    assert_eq!(server.flags, 257);
    assert_eq!(server.status.code, StatusCode::Unset);
    let attr = |s: &skein_model::Span, k: &str| s.attributes.iter().find(|kv| kv.key == k).map(|kv| kv.value.clone());
    assert_eq!(attr(server, "http.status_code"), Some(AnyValue::Int(200)));
    assert_eq!(attr(server, "http.response_content_length"), Some(AnyValue::Int(1834)));
    assert_eq!(attr(server, "http.method"), Some(AnyValue::Str("GET".into())));
    assert_eq!(server.events.len(), 1);
    assert_eq!(server.events[0].name, "cache.lookup");
    assert_eq!(server.events[0].time_unix_nano, 1_718_000_000_130_000_000);
    assert_eq!(server.events[0].attributes[0].value, AnyValue::Bool(false));
    assert_eq!(
        server
            .resource
            .attributes
            .iter()
            .find(|kv| kv.key == "process.pid")
            .map(|kv| &kv.value),
        Some(&AnyValue::Int(48213))
    );
    assert_eq!(server.scope.name, "@opentelemetry/instrumentation-http");
    assert_eq!(server.scope.version, "0.57.2");

    assert_eq!(client.parent_span_id, Some(server.span_id));
    assert_eq!(client.kind, SpanKind::Client);
    assert_eq!(client.status.code, StatusCode::Error);
    assert_eq!(client.status.message, "connection reset");
    assert_eq!(attr(client, "db.rows"), Some(AnyValue::Double(3.0)));
    assert!(std::sync::Arc::ptr_eq(&server.resource, &client.resource));
}

// ---------------------------------------------------------------------------
// Property: no input makes the decoder panic
// ---------------------------------------------------------------------------

/// Runs all three decoders, and the converters on whatever decodes.
fn decode_all(body: &[u8]) {
    if let Ok(req) = trace_request_from_json(body) {
        let _ = spans_from_otlp(req);
    }
    if let Ok(req) = logs_request_from_json(body) {
        let _ = logs_from_otlp(req);
    }
    if let Ok(req) = metrics_request_from_json(body) {
        let _ = metrics_from_otlp(req);
    }
}

/// Field names of every message, so that random documents reach deep.
const FIELDS: &[&str] = &[
    "resourceSpans",
    "resourceLogs",
    "resourceMetrics",
    "resource",
    "scopeSpans",
    "scopeLogs",
    "scopeMetrics",
    "scope",
    "spans",
    "logRecords",
    "metrics",
    "schemaUrl",
    "attributes",
    "key",
    "value",
    "values",
    "traceId",
    "spanId",
    "parentSpanId",
    "kind",
    "status",
    "code",
    "events",
    "links",
    "startTimeUnixNano",
    "timeUnixNano",
    "stringValue",
    "intValue",
    "doubleValue",
    "bytesValue",
    "arrayValue",
    "kvlistValue",
    "boolValue",
    "body",
    "severityNumber",
    "gauge",
    "sum",
    "histogram",
    "exponentialHistogram",
    "summary",
    "dataPoints",
    "asInt",
    "asDouble",
    "bucketCounts",
    "explicitBounds",
    "positive",
    "negative",
    "scale",
    "quantileValues",
    "exemplars",
    "aggregationTemporality",
    "min",
    "max",
    "count",
    "flags",
    "entityRefs",
    "idKeys",
    "name",
];

fn json_scalar() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|d| serde_json::Number::from_f64(d).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![
            "",
            "NaN",
            "Infinity",
            "-Infinity",
            "1e999",
            "-1",
            "18446744073709551616",
            "0102030405060708",
            "zz",
            "AAEC-v8",
            "=",
            "SPAN_KIND_SERVER",
            "SEVERITY_NUMBER_WARN",
            "1.5",
            "1e3",
            "+",
            "-",
        ])
        .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    json_scalar().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
            vec((prop::sample::select(FIELDS), inner), 0..5).prop_map(|fields| {
                serde_json::Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// Replaces the `n`th node (in depth-first order) of `v`, if there is one.
fn replace_node(v: &mut serde_json::Value, n: &mut usize, with: &serde_json::Value) -> bool {
    if *n == 0 {
        *v = with.clone();
        return true;
    }
    *n -= 1;
    match v {
        serde_json::Value::Array(items) => items.iter_mut().any(|x| replace_node(x, n, with)),
        serde_json::Value::Object(map) => map.values_mut().any(|x| replace_node(x, n, with)),
        _ => false,
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_never_panic(body in vec(any::<u8>(), 0..256)) {
        decode_all(&body);
    }

    #[test]
    fn json_ish_text_never_panics(body in "[\\[\\]{}\":,. a-zA-Z0-9_+\\-]{0,160}") {
        decode_all(body.as_bytes());
    }

    #[test]
    fn random_documents_never_panic(doc in json_value()) {
        decode_all(doc.to_string().as_bytes());
    }

    /// Valid requests with one node replaced by something arbitrary: reaches
    /// every field with every kind of wrong value.
    #[test]
    fn mutated_requests_never_panic(
        traces in trace_request(),
        logs in log_request(),
        metrics in metric_request(),
        at in any::<prop::sample::Index>(),
        with in json_value(),
    ) {
        for mut doc in [
            serde_json::to_value(&traces).unwrap(),
            serde_json::to_value(&logs).unwrap(),
            serde_json::to_value(&metrics).unwrap(),
        ] {
            let mut n = at.index(1 << 16);
            if !replace_node(&mut doc, &mut n, &with) {
                let mut n = at.index(64);
                replace_node(&mut doc, &mut n, &with);
            }
            decode_all(doc.to_string().as_bytes());
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"k","value":{}{}}}]}}}}]}}"#,
        r#"{"arrayValue":{"values":["#.repeat(200),
        "]}}".repeat(200)
    );
    let err = trace_err(&deep);
    assert!(err.contains("recursion limit exceeded"), "{err}");
}
