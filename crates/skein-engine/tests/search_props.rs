//! Property tests: every search, trace lookup and aggregation answers exactly
//! what a naive model over the ingested records answers, whatever mix of hot
//! tiers, flushed parts, compactions and restarts holds the data.
//!
//! The model of spans is "the last ingested version of each
//! `(trace_id, span_id)`"; logs and metric points are keyed by content, so
//! the model is the set of distinct records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::Config;
use skein_engine::Durability;
use skein_engine::{
    AttrFilter, AttrPredicate, AttrScope, Cursor, Engine, EngineOptions, LogQuery, MetricQuery, Record, RecordKey,
    SpanQuery, Window, testdata,
};
use skein_model::metric::{Exemplar, MetricDesc, MetricKind, Number, PointValue, Temporality};
use skein_model::{
    AnyValue, Event, KeyValue, Link, LogRecord, MetricPoint, Resource, Scope, Span, SpanId, SpanKind, Status,
    StatusCode, TraceId,
};

const CASES: u32 = 24;
/// Start of the test data's time range; record `k` of a time domain is at
/// `T0 + k * STEP`.
const T0: u64 = testdata::END_NS - 10_000_000;
const STEP: u64 = 1_000;
/// Time slots: small, so that equal times (ties broken by key) are common.
const SLOTS: u64 = 30;

/// `PROPTEST_CASES` overrides the case count (for longer soak runs).
fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        failure_persistence: None,
        ..Config::default()
    }
}

// ------------------------------------------------------------------ world

/// The fixed vocabulary records are built from: small domains so that
/// filters hit.
struct World {
    resources: Vec<Arc<Resource>>,
    scopes: Vec<Arc<Scope>>,
    metrics: Vec<Arc<MetricDesc>>,
}

const SERVICES: [&str; 4] = ["svc-a", "svc-b", "unknown_service", "svc-none"];
const SPAN_NAMES: [&str; 5] = [
    "GET /users",
    "get /Users/{id}",
    "POST /orders",
    "db.query",
    "Ünïcode op",
];
const NEEDLES: [&str; 9] = ["users", "USERS", "get", "ORD", "ünï", "ÜNÏCODE", "", "zzz", "/"];
/// Full-text queries over what the records hold: span and event names,
/// status messages, log bodies (also structured ones), event names.
const TEXT_QUERIES: [&str; 16] = [
    "refused",
    "connection",
    "body:disk",
    "name:users",
    "boom",
    "message:boom",
    "\"connection refused\"",
    "us*",
    "refused OR login",
    "db.query",
    "query -refused",
    "name:login",
    "ärger",
    "structured OR full",
    "zzz",
    "ÜNÏCODE",
];

fn text_query(i: usize) -> skein_engine::TextQuery {
    skein_engine::TextQuery::parse(TEXT_QUERIES[i]).unwrap()
}

const DURATIONS: [u64; 8] = [0, 1, 999, 1_000, 1_500, 20_000, 1_000_000, 123_456_789];
const TRACES: usize = 4;
const SPAN_IDS: u8 = 10;

fn world() -> World {
    let res = |attrs: Vec<KeyValue>| {
        Arc::new(Resource {
            attributes: attrs,
            ..Default::default()
        })
    };
    World {
        resources: vec![
            res(vec![
                KeyValue::new("service.name", "svc-a"),
                KeyValue::new("env", "prod"),
                KeyValue::new("tier", 1i64),
            ]),
            res(vec![
                KeyValue::new("service.name", "svc-b"),
                KeyValue::new("env", "dev"),
                KeyValue::new("tier", 2i64),
            ]),
            // Same service as the first, another resource.
            res(vec![
                KeyValue::new("service.name", "svc-a"),
                KeyValue::new("env", "dev"),
            ]),
            // No service.name: unknown_service.
            res(vec![KeyValue::new("env", "prod"), KeyValue::new("code", 200i64)]),
        ],
        scopes: vec![
            Arc::new(Scope {
                name: "lib".into(),
                version: "1.0".into(),
                ..Default::default()
            }),
            Arc::new(Scope::default()),
        ],
        metrics: vec![
            Arc::new(MetricDesc {
                name: "http.requests".into(),
                description: "requests".into(),
                unit: "1".into(),
                metadata: Vec::new(),
                kind: MetricKind::Sum {
                    temporality: Temporality::Cumulative,
                    monotonic: true,
                },
            }),
            Arc::new(MetricDesc {
                name: "cpu.usage".into(),
                description: String::new(),
                unit: "%".into(),
                metadata: Vec::new(),
                kind: MetricKind::Gauge,
            }),
            Arc::new(MetricDesc {
                name: "queue.depth".into(),
                description: "depth".into(),
                unit: "{item}".into(),
                metadata: Vec::new(),
                kind: MetricKind::Gauge,
            }),
        ],
    }
}

fn trace_id(i: u8) -> TraceId {
    // Index TRACES is a trace that never has spans.
    TraceId::from_u128(0x0123_4567_89ab_cdef_0000_0000_0000_0000 | ((i as u128 * 0x9E37) << 8) | 1)
}

fn span_id(i: u8) -> SpanId {
    SpanId::from_u64(0x00ff_0000_0000_0000 ^ ((i as u64 + 1) * 0x1_0001))
}

fn payload() -> String {
    "x".repeat(300)
}

/// Attribute `(key, value)` from small domains. The same key can carry
/// different types ("code": int or string), and some values are not
/// indexable (long strings, arrays).
fn attr(k: u8, v: u8) -> KeyValue {
    match k % 7 {
        0 => KeyValue::new("http.method", ["GET", "POST", "get"][v as usize % 3]),
        1 => KeyValue::new("code", [200i64, 404, 500][v as usize % 3]),
        2 => KeyValue::new("code", ["200", "404"][v as usize % 2]),
        3 => KeyValue::new("flag", v.is_multiple_of(2)),
        4 => KeyValue::new("ratio", [0.5f64, 1.0, 0.0, -0.0, 1e300][v as usize % 5]),
        5 => KeyValue::new(
            "payload",
            if v.is_multiple_of(2) {
                "short".to_string()
            } else {
                payload()
            },
        ),
        _ => KeyValue {
            key: "tags".into(),
            value: AnyValue::Array(vec![AnyValue::Str("a".into()), AnyValue::Int(v as i64 % 2)]),
        },
    }
}

/// Like `attr`, without -0.0 (its content key differs from 0.0's although
/// the two compare equal, which would make the content-keyed model ambiguous).
fn label(k: u8, v: u8) -> KeyValue {
    let kv = attr(k, v);
    match kv.value {
        // Matches -0.0 too (float patterns compare with ==).
        AnyValue::Double(0.0) => KeyValue::new("ratio", 0.0f64),
        _ => kv,
    }
}

// ------------------------------------------------------------- generators

#[derive(Debug, Clone)]
struct SpanSpec {
    trace: u8,
    span: u8,
    parent: Option<u8>,
    name: u8,
    kind: u8,
    status: u8,
    start: u8,
    /// Index into DURATIONS; `DURATIONS.len()` means end before start.
    dur: u8,
    res: u8,
    scope: u8,
    attrs: Vec<(u8, u8)>,
    events: Vec<Vec<(u8, u8)>>,
    extra: u8,
    /// An arbitrary double attribute: parts must keep every bit of it.
    measure: Option<f64>,
}

fn measure() -> impl Strategy<Value = Option<f64>> {
    prop::option::weighted(0.3, prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL)
}

fn span_spec() -> impl Strategy<Value = SpanSpec> {
    (
        (0..TRACES as u8, 0..SPAN_IDS, prop::option::of(0..SPAN_IDS), 0..5u8),
        (0..6u8, 0..3u8, 0..SLOTS as u8, 0..=DURATIONS.len() as u8),
        (0..4u8, 0..2u8, prop::collection::vec((0..7u8, 0..6u8), 0..4)),
        (
            prop::collection::vec(prop::collection::vec((0..7u8, 0..6u8), 0..3), 0..3),
            0..8u8,
            measure(),
        ),
    )
        .prop_map(
            |(
                (trace, span, parent, name),
                (kind, status, start, dur),
                (res, scope, attrs),
                (events, extra, measure),
            )| {
                SpanSpec {
                    trace,
                    span,
                    parent,
                    name,
                    kind,
                    status,
                    start,
                    dur,
                    res,
                    scope,
                    attrs,
                    events,
                    extra,
                    measure,
                }
            },
        )
}

impl SpanSpec {
    fn build(&self, w: &World) -> Span {
        let start = T0 + self.start as u64 * STEP;
        let end = match DURATIONS.get(self.dur as usize) {
            Some(d) => start + d,
            None => start - 7,
        };
        let status = StatusCode::from_i32(self.status as i32).unwrap();
        Span {
            trace_id: trace_id(self.trace),
            span_id: span_id(self.span),
            parent_span_id: self.parent.map(span_id),
            trace_state: if self.extra.is_multiple_of(3) {
                "k=v".into()
            } else {
                String::new()
            },
            flags: self.extra as u32 % 2,
            name: SPAN_NAMES[self.name as usize].into(),
            kind: SpanKind::from_i32(self.kind as i32).unwrap(),
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes: self
                .attrs
                .iter()
                .map(|&(k, v)| attr(k, v))
                .chain(self.measure.map(|m| KeyValue::new("measure", m)))
                .collect(),
            dropped_attributes_count: self.extra as u32 % 4 / 3,
            events: self
                .events
                .iter()
                .enumerate()
                .map(|(i, a)| Event {
                    time_unix_nano: start + i as u64,
                    name: format!("event-{i}"),
                    attributes: a.iter().map(|&(k, v)| attr(k, v)).collect(),
                    dropped_attributes_count: 0,
                })
                .collect(),
            dropped_events_count: 0,
            links: if self.extra == 7 {
                vec![Link {
                    trace_id: trace_id(0),
                    span_id: span_id(1),
                    trace_state: "l=1".into(),
                    attributes: vec![attr(1, 0)],
                    dropped_attributes_count: 0,
                    flags: 1,
                }]
            } else {
                Vec::new()
            },
            dropped_links_count: 0,
            status: Status {
                code: status,
                message: if status == StatusCode::Error {
                    "boom".into()
                } else {
                    String::new()
                },
            },
            resource: w.resources[self.res as usize].clone(),
            scope: w.scopes[self.scope as usize].clone(),
        }
    }
}

const LOG_BODIES: usize = 9;
const BODY_NEEDLES: [&str; 12] = [
    "refused", "REFUSED", "full", "ärger", "ÄRGER", "", "msg", "42", "nul", "zzz", "\"msg\"", "true",
];

fn log_body(i: u8) -> AnyValue {
    match i as usize % LOG_BODIES {
        0 => "Connection refused to DB".into(),
        1 => "user login OK".into(),
        2 => "Disk FULL on /var".into(),
        3 => "ÄRGER über alles".into(),
        4 => "".into(),
        5 => AnyValue::Map(vec![KeyValue::new("msg", "structured refused")]),
        6 => AnyValue::Int(42),
        7 => AnyValue::Empty,
        _ => AnyValue::Array(vec![AnyValue::Bool(true), AnyValue::Str("Full".into())]),
    }
}

#[derive(Debug, Clone)]
struct LogSpec {
    /// 0 means "unset": the observed time is the record's time.
    time: u8,
    observed: u8,
    severity: u8,
    body: u8,
    attrs: Vec<(u8, u8)>,
    trace: Option<(u8, u8)>,
    res: u8,
    scope: u8,
    event_name: u8,
    measure: Option<f64>,
}

fn log_spec() -> impl Strategy<Value = LogSpec> {
    (
        (0..SLOTS as u8, 0..SLOTS as u8, 0..=24u8, 0..LOG_BODIES as u8),
        prop::collection::vec((0..7u8, 0..6u8), 0..4),
        prop::option::of((0..TRACES as u8, 0..SPAN_IDS)),
        (0..4u8, 0..2u8, 0..3u8, measure()),
    )
        .prop_map(
            |((time, observed, severity, body), attrs, trace, (res, scope, event_name, measure))| LogSpec {
                time,
                observed,
                severity,
                body,
                attrs,
                trace,
                res,
                scope,
                event_name,
                measure,
            },
        )
}

impl LogSpec {
    fn build(&self, w: &World) -> LogRecord {
        LogRecord {
            time_unix_nano: if self.time == 0 {
                0
            } else {
                T0 + self.time as u64 * STEP
            },
            observed_time_unix_nano: T0 + self.observed as u64 * STEP + 3,
            severity_number: self.severity as i32,
            severity_text: ["", "INFO", "warn"][self.severity as usize % 3].into(),
            body: log_body(self.body),
            attributes: self
                .attrs
                .iter()
                .map(|&(k, v)| label(k, v))
                .chain(self.measure.map(|m| KeyValue::new("measure", m)))
                .collect(),
            dropped_attributes_count: 0,
            flags: self.event_name as u32 % 2,
            trace_id: self.trace.map(|(t, _)| trace_id(t)),
            span_id: self.trace.map(|(_, s)| span_id(s)),
            event_name: ["", "login", "db.error"][self.event_name as usize].into(),
            resource: w.resources[self.res as usize].clone(),
            scope: w.scopes[self.scope as usize].clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct MetricSpec {
    metric: u8,
    time: u8,
    value: u8,
    attrs: Vec<(u8, u8)>,
    res: u8,
    /// An arbitrary gauge value.
    measure: Option<f64>,
}

fn metric_spec() -> impl Strategy<Value = MetricSpec> {
    (
        0..3u8,
        0..SLOTS as u8,
        0..6u8,
        prop::collection::vec((0..7u8, 0..6u8), 0..3),
        0..4u8,
        measure(),
    )
        .prop_map(|(metric, time, value, attrs, res, measure)| MetricSpec {
            metric,
            time,
            value,
            attrs,
            res,
            measure,
        })
}

impl MetricSpec {
    fn build(&self, w: &World) -> MetricPoint {
        let desc = w.metrics[self.metric as usize].clone();
        let value = match desc.kind {
            MetricKind::Sum { .. } => PointValue::Number(Some(Number::Int(self.value as i64 * 10))),
            _ if self.measure.is_some() => PointValue::Number(self.measure.map(Number::Double)),
            _ if self.value == 5 => PointValue::Number(None),
            _ => PointValue::Number(Some(Number::Double(self.value as f64 * 0.25))),
        };
        MetricPoint {
            metric: desc,
            attributes: self.attrs.iter().map(|&(k, v)| label(k, v)).collect(),
            start_time_unix_nano: if self.value.is_multiple_of(2) { T0 } else { 0 },
            time_unix_nano: T0 + self.time as u64 * STEP,
            flags: 0,
            exemplars: if self.value == 4 {
                vec![Exemplar {
                    filtered_attributes: vec![KeyValue::new("user", "u1")],
                    time_unix_nano: T0 + 1,
                    value: Some(Number::Double(self.measure.unwrap_or(2.5))),
                    span_id: Some(span_id(1)),
                    trace_id: Some(trace_id(0)),
                }]
            } else {
                Vec::new()
            },
            value,
            resource: w.resources[self.res as usize].clone(),
            scope: w.scopes[0].clone(),
        }
    }
}

/// One step of a scenario.
#[derive(Debug, Clone)]
enum Step {
    Spans(Vec<SpanSpec>),
    Logs(Vec<LogSpec>),
    Metrics(Vec<MetricSpec>),
    /// The previous batch again (a client retry), identical.
    Retry,
    Flush,
    Compact,
    /// close() and open again.
    Reopen,
    /// Drop without close (the hot tier comes back from the WAL) and open.
    Crash,
}

fn control_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Flush),
        1 => Just(Step::Retry),
        1 => Just(Step::Compact),
        1 => Just(Step::Reopen),
        1 => Just(Step::Crash),
    ]
}

/// Batches of `data` interleaved with control steps.
fn scenario(data: impl Strategy<Value = Step>) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec((data, prop::option::weighted(0.6, control_step())), 1..8).prop_map(|v| {
        v.into_iter()
            .flat_map(|(d, c)| std::iter::once(d).chain(c))
            .collect::<Vec<_>>()
    })
}

/// Engine tuning that exercises more code paths with little data: tiny
/// pages and row groups, partial compactions, automatic freezes.
#[derive(Debug, Clone)]
struct Tuning {
    page_rows: usize,
    row_group_rows: usize,
    max_part_rows: u64,
    fanout: usize,
    hot_max_bytes: usize,
}

fn tuning() -> impl Strategy<Value = Tuning> {
    (
        prop::sample::select(vec![1usize, 3, 1024]),
        prop::sample::select(vec![2usize, 5, 128 * 1024]),
        prop::sample::select(vec![3u64, 12, 1_000_000]),
        2..5usize,
        prop::sample::select(vec![6_000usize, 64 << 20]),
    )
        .prop_map(
            |(page_rows, row_group_rows, max_part_rows, fanout, hot_max_bytes)| Tuning {
                page_rows,
                row_group_rows,
                max_part_rows,
                fanout,
                hot_max_bytes,
            },
        )
}

// -------------------------------------------------------------- harness

fn options(dir: &Path, t: &Tuning) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.durability = Durability::None;
    o.writer.page_rows = t.page_rows;
    o.writer.row_group_rows = t.row_group_rows;
    o.compaction.max_part_rows = t.max_part_rows;
    o.compaction.fanout = t.fanout;
    o.hot_max_bytes = t.hot_max_bytes;
    o
}

/// What was ingested, in order.
#[derive(Default)]
struct Ingested {
    spans: Vec<Span>,
    logs: Vec<LogRecord>,
    metrics: Vec<MetricPoint>,
}

enum Batch {
    Spans(Vec<Span>),
    Logs(Vec<LogRecord>),
    Metrics(Vec<MetricPoint>),
}

/// Runs the steps against a fresh engine; returns it with what went in.
fn run(dir: &Path, t: &Tuning, steps: &[Step], w: &World) -> (Engine, Ingested) {
    let mut engine = Some(Engine::open(options(dir, t)).unwrap());
    let mut got = Ingested::default();
    let mut last: Option<Batch> = None;
    for step in steps {
        let e = engine.as_ref().unwrap();
        let batch = match step {
            Step::Spans(v) => Some(Batch::Spans(v.iter().map(|s| s.build(w)).collect())),
            Step::Logs(v) => Some(Batch::Logs(v.iter().map(|s| s.build(w)).collect())),
            Step::Metrics(v) => Some(Batch::Metrics(v.iter().map(|s| s.build(w)).collect())),
            Step::Retry => last.take(),
            Step::Flush => {
                e.flush().unwrap();
                None
            }
            Step::Compact => {
                e.compact().unwrap();
                None
            }
            Step::Reopen => {
                engine.take().unwrap().close().unwrap();
                engine = Some(Engine::open(options(dir, t)).unwrap());
                None
            }
            Step::Crash => {
                drop(engine.take());
                engine = Some(Engine::open(options(dir, t)).unwrap());
                None
            }
        };
        let e = engine.as_ref().unwrap();
        if let Some(b) = batch {
            let (n, report) = match &b {
                Batch::Spans(v) => {
                    got.spans.extend(v.iter().cloned());
                    (v.len(), e.ingest_spans(v.clone()).unwrap())
                }
                Batch::Logs(v) => {
                    got.logs.extend(v.iter().cloned());
                    (v.len(), e.ingest_logs(v.clone()).unwrap())
                }
                Batch::Metrics(v) => {
                    got.metrics.extend(v.iter().cloned());
                    (v.len(), e.ingest_metrics(v.clone()).unwrap())
                }
            };
            assert_eq!(report.accepted, n as u64, "{report:?}");
            assert_eq!(report.rejected, 0, "{report:?}");
            last = Some(b);
        }
    }
    (engine.unwrap(), got)
}

// ------------------------------------------------------------ the model

/// Typed equality: doubles by value or by bits (NaN finds NaN), the rest by value.
fn typed_eq(a: &AnyValue, b: &AnyValue) -> bool {
    match (a, b) {
        (AnyValue::Double(x), AnyValue::Double(y)) => x == y || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn attr_hit(f: &AttrFilter, attrs: &[KeyValue]) -> bool {
    attrs.iter().any(|kv| {
        kv.key == f.key
            && match &f.predicate {
                AttrPredicate::Exists => true,
                AttrPredicate::Eq(v) => typed_eq(&kv.value, v),
                AttrPredicate::AnyOf(vs) => vs.iter().any(|v| typed_eq(&kv.value, v)),
            }
    })
}

fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

fn in_window(t: u64, w: Window) -> bool {
    t >= w.start && t < w.end
}

/// The last ingested version of every span.
fn latest_spans(all: &[Span]) -> Vec<Span> {
    let mut by_key: HashMap<(TraceId, SpanId), Span> = HashMap::new();
    for s in all {
        by_key.insert((s.trace_id, s.span_id), s.clone());
    }
    by_key.into_values().collect()
}

fn naive_span_match(q: &SpanQuery, s: &Span) -> bool {
    let d = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
    q.service.as_deref().is_none_or(|v| s.service_name() == v)
        && q.name.as_deref().is_none_or(|v| s.name == v)
        && q.name_contains.as_deref().is_none_or(|v| contains_ci(&s.name, v))
        && q.kind.is_none_or(|k| s.kind == k)
        && q.status.is_none_or(|c| s.status.code == c)
        && q.min_duration_ns.is_none_or(|m| d >= m)
        && q.max_duration_ns.is_none_or(|m| d <= m)
        && in_window(s.start_time_unix_nano, q.window)
        && q.trace_id.is_none_or(|t| s.trace_id == t)
        && (!q.root_only || s.parent_span_id.is_none())
        && q.text.as_ref().is_none_or(|t| skein_engine::text::matches(t, s, None))
        && q.attributes.iter().all(|f| match f.scope {
            AttrScope::Record => attr_hit(f, &s.attributes),
            AttrScope::Resource => attr_hit(f, &s.resource.attributes),
            AttrScope::Event => s.events.iter().any(|e| attr_hit(f, &e.attributes)),
        })
}

/// Spans newest first: (start, trace_id, span_id) descending.
fn sort_spans(v: &mut [Span]) {
    v.sort_by(|a, b| {
        (b.start_time_unix_nano, b.trace_id, b.span_id).cmp(&(a.start_time_unix_nano, a.trace_id, a.span_id))
    });
}

/// Distinct records by content key, newest first by (time, key).
fn distinct_newest_first<R: Record>(all: &[R]) -> Vec<R> {
    let mut by_key: BTreeMap<(u64, RecordKey), R> = BTreeMap::new();
    for r in all {
        by_key.insert((r.time(), r.key()), r.clone());
    }
    by_key.into_values().rev().collect()
}

fn naive_log_match(q: &LogQuery, l: &LogRecord) -> bool {
    let body = match &l.body {
        AnyValue::Str(s) => s.clone(),
        other => skein_model::plain::any_value_to_plain_json(other).to_string(),
    };
    q.service.as_deref().is_none_or(|v| l.service_name() == v)
        && q.min_severity.is_none_or(|m| l.severity_number >= m)
        && q.trace_id.is_none_or(|t| l.trace_id == Some(t))
        && q.span_id.is_none_or(|s| l.span_id == Some(s))
        && in_window(l.effective_time(), q.window)
        && q.body_contains.as_deref().is_none_or(|b| contains_ci(&body, b))
        && q.text.as_ref().is_none_or(|t| skein_engine::text::matches(t, l, None))
        && q.attributes.iter().all(|f| match f.scope {
            AttrScope::Record | AttrScope::Event => attr_hit(f, &l.attributes),
            AttrScope::Resource => attr_hit(f, &l.resource.attributes),
        })
}

fn naive_metric_match(q: &MetricQuery, p: &MetricPoint) -> bool {
    q.service.as_deref().is_none_or(|v| p.service_name() == v)
        && q.name.as_deref().is_none_or(|v| p.metric.name == v)
        && in_window(p.time_unix_nano, q.window)
        && q.attributes.iter().all(|f| match f.scope {
            AttrScope::Record | AttrScope::Event => attr_hit(f, &p.attributes),
            AttrScope::Resource => attr_hit(f, &p.resource.attributes),
        })
}

// ------------------------------------------------------------- queries

#[derive(Debug, Clone)]
struct FilterSpec {
    scope: u8,
    /// 0..7: an attribute of the `attr` domain; 7: a resource key; 8: a key
    /// nothing has.
    key: u8,
    value: u8,
    /// 0: equality, 1: exists, 2: any of the value and an alternative.
    predicate: u8,
    alternative: u8,
}

fn filter_spec() -> impl Strategy<Value = FilterSpec> {
    (
        0..3u8,
        0..9u8,
        0..6u8,
        prop::sample::select(vec![0u8, 0, 0, 1, 1, 2]),
        0..7u8,
    )
        .prop_map(|(scope, key, value, predicate, alternative)| FilterSpec {
            scope,
            key,
            value,
            predicate,
            alternative,
        })
}

impl FilterSpec {
    fn build(&self) -> AttrFilter {
        let scope = [AttrScope::Record, AttrScope::Resource, AttrScope::Event][self.scope as usize];
        let kv = match self.key {
            0..7 => attr(self.key, self.value),
            7 => [
                KeyValue::new("env", "prod"),
                KeyValue::new("tier", 1i64),
                KeyValue::new("tier", "1"),
                KeyValue::new("service.name", "svc-b"),
                KeyValue::new("env", "dev"),
                KeyValue::new("ratio", f64::NAN),
            ][self.value as usize]
                .clone(),
            _ => KeyValue::new("missing", "x"),
        };
        match self.predicate {
            0 => AttrFilter::eq(scope, kv.key, kv.value),
            1 => AttrFilter::exists(scope, kv.key),
            _ => {
                // The same key's value in another type or another value
                // (the alternatives of `attr`), or a long unindexed string.
                let alt = match self.alternative {
                    6 => AnyValue::Str(payload()),
                    a => attr(a, self.value.wrapping_add(1)).value,
                };
                AttrFilter {
                    scope,
                    key: kv.key,
                    predicate: AttrPredicate::AnyOf(vec![kv.value, alt]),
                }
            }
        }
    }
}

/// A time bound near the data: a little before, inside or after it.
fn bound() -> impl Strategy<Value = u64> {
    (0..SLOTS + 4, prop::sample::select(vec![0u64, 1, STEP - 1])).prop_map(|(k, j)| T0 + k * STEP + j - 2 * STEP)
}

fn opt<T: std::fmt::Debug + Clone>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(0.15, s)
}

fn span_query() -> impl Strategy<Value = SpanQuery> {
    (
        (
            opt(0..SERVICES.len()),
            opt(0..SPAN_NAMES.len() + 1),
            opt(0..NEEDLES.len()),
            opt(0..6i32),
            opt(0..3i32),
        ),
        (
            opt(0..DURATIONS.len()),
            opt(0..DURATIONS.len()),
            opt(bound()),
            opt(bound()),
            opt(0..=TRACES as u8),
            prop::bool::weighted(0.15),
        ),
        prop::collection::vec(filter_spec(), 0..3),
        1..10usize,
        prop::option::weighted(0.3, 0..TEXT_QUERIES.len()),
    )
        .prop_map(
            |(
                (service, name, contains, kind, status),
                (min_d, max_d, start, end, trace, root_only),
                f,
                limit,
                text,
            )| {
                SpanQuery {
                    service: service.map(|i| SERVICES[i].to_string()),
                    name: name.map(|i| SPAN_NAMES.get(i).copied().unwrap_or("nope").to_string()),
                    name_contains: contains.map(|i| NEEDLES[i].to_string()),
                    kind: kind.and_then(SpanKind::from_i32),
                    status: status.and_then(StatusCode::from_i32),
                    min_duration_ns: min_d.map(|i| DURATIONS[i]),
                    max_duration_ns: max_d.map(|i| DURATIONS[i]),
                    window: Window::from_bounds(start, end),
                    trace_id: trace.map(trace_id),
                    root_only,
                    attributes: f.iter().map(FilterSpec::build).collect(),
                    limit,
                    cursor: None,
                    text: text.map(text_query),
                    payload_text: None,
                }
            },
        )
}

fn log_query() -> impl Strategy<Value = LogQuery> {
    (
        (
            opt(0..SERVICES.len()),
            opt(-1..27i32),
            opt(0..=TRACES as u8),
            opt(0..SPAN_IDS),
            opt(0..BODY_NEEDLES.len()),
        ),
        (opt(bound()), opt(bound())),
        prop::collection::vec(filter_spec(), 0..3),
        1..10usize,
        prop::option::weighted(0.3, 0..TEXT_QUERIES.len()),
    )
        .prop_map(
            |((service, sev, trace, span, body), (start, end), f, limit, text)| LogQuery {
                service: service.map(|i| SERVICES[i].to_string()),
                min_severity: sev,
                trace_id: trace.map(trace_id),
                span_id: span.map(span_id),
                body_contains: body.map(|i| BODY_NEEDLES[i].to_string()),
                attributes: f.iter().map(FilterSpec::build).collect(),
                window: Window::from_bounds(start, end),
                limit,
                cursor: None,
                text: text.map(text_query),
                payload_text: None,
            },
        )
}

fn metric_query() -> impl Strategy<Value = MetricQuery> {
    (
        opt(0..4usize),
        opt(0..SERVICES.len()),
        prop::collection::vec(filter_spec(), 0..3),
        (opt(bound()), opt(bound())),
        1..10usize,
    )
        .prop_map(|(name, service, f, (start, end), limit)| MetricQuery {
            name: name.map(|i| ["http.requests", "cpu.usage", "queue.depth", "nope"][i].to_string()),
            service: service.map(|i| SERVICES[i].to_string()),
            attributes: f.iter().map(FilterSpec::build).collect(),
            window: Window::from_bounds(start, end),
            limit,
            cursor: None,
        })
}

/// A query built from a stored record: a random subset of its fields, so
/// that the answer holds at least that record.
#[derive(Debug, Clone)]
struct Derived {
    pick: usize,
    /// Which fields to copy (one bit each).
    mask: u16,
    limit: usize,
}

fn derived() -> impl Strategy<Value = Derived> {
    (any::<usize>(), any::<u16>(), 1..6usize).prop_map(|(pick, mask, limit)| Derived { pick, mask, limit })
}

impl Derived {
    fn has(&self, bit: u16) -> bool {
        self.mask & (1 << bit) != 0
    }

    /// A case-changed piece of `text`, to look for case-insensitively.
    fn piece(&self, text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let from = (self.pick / 7) % (chars.len() + 1);
        let to = (from + 1 + (self.pick / 11) % 6).min(chars.len());
        chars[from..to].iter().collect::<String>().to_uppercase()
    }

    fn attr_filter(&self, scope: AttrScope, attrs: &[KeyValue]) -> Option<AttrFilter> {
        let kv = attrs.get((self.pick / 13) % attrs.len().max(1))?;
        Some(if self.has(15) {
            AttrFilter::exists(scope, kv.key.clone())
        } else {
            AttrFilter::eq(scope, kv.key.clone(), kv.value.clone())
        })
    }

    fn window(&self, t: u64) -> Window {
        let lo = (self.pick / 17 % 3) as u64 * STEP;
        let hi = (self.pick / 19 % 3) as u64 * STEP + 1;
        Window::from_bounds(
            self.has(10).then(|| t.saturating_sub(lo)),
            self.has(11).then_some(t + hi),
        )
    }

    fn span_query(&self, latest: &[Span]) -> Option<SpanQuery> {
        let s = latest.get(self.pick % latest.len().max(1))?;
        let d = s.duration_ns();
        let window = self.window(s.start_time_unix_nano);
        let event_attrs: Vec<KeyValue> = s.events.iter().flat_map(|e| e.attributes.clone()).collect();
        Some(SpanQuery {
            service: self.has(0).then(|| s.service_name().to_string()),
            name: self.has(1).then(|| s.name.clone()),
            name_contains: self.has(2).then(|| self.piece(&s.name)),
            kind: self.has(3).then_some(s.kind),
            status: self.has(4).then_some(s.status.code),
            min_duration_ns: self.has(5).then_some(d),
            max_duration_ns: self.has(6).then_some(d),
            window,
            trace_id: self.has(7).then_some(s.trace_id),
            root_only: self.has(8) && s.parent_span_id.is_none(),
            attributes: [
                self.has(9).then(|| self.attr_filter(AttrScope::Record, &s.attributes)),
                self.has(12)
                    .then(|| self.attr_filter(AttrScope::Resource, &s.resource.attributes)),
                self.has(13).then(|| self.attr_filter(AttrScope::Event, &event_attrs)),
            ]
            .into_iter()
            .flatten()
            .flatten()
            .collect(),
            limit: self.limit,
            cursor: None,
            text: None,
            payload_text: None,
        })
    }

    fn log_query(&self, logs: &[LogRecord]) -> Option<LogQuery> {
        let l = logs.get(self.pick % logs.len().max(1))?;
        let window = self.window(l.effective_time());
        let body = match &l.body {
            AnyValue::Str(s) => s.clone(),
            other => skein_model::plain::any_value_to_plain_json(other).to_string(),
        };
        Some(LogQuery {
            service: self.has(0).then(|| l.service_name().to_string()),
            min_severity: self.has(1).then_some(l.severity_number - (self.pick % 3) as i32),
            trace_id: if self.has(2) { l.trace_id } else { None },
            span_id: if self.has(3) { l.span_id } else { None },
            body_contains: self.has(4).then(|| self.piece(&body)),
            attributes: [
                self.has(5).then(|| self.attr_filter(AttrScope::Record, &l.attributes)),
                self.has(6)
                    .then(|| self.attr_filter(AttrScope::Resource, &l.resource.attributes)),
            ]
            .into_iter()
            .flatten()
            .flatten()
            .collect(),
            window,
            limit: self.limit,
            cursor: None,
            text: None,
            payload_text: None,
        })
    }

    fn metric_query(&self, points: &[MetricPoint]) -> Option<MetricQuery> {
        let p = points.get(self.pick % points.len().max(1))?;
        let window = self.window(p.time_unix_nano);
        Some(MetricQuery {
            name: self.has(0).then(|| p.metric.name.clone()),
            service: self.has(1).then(|| p.service_name().to_string()),
            attributes: [
                self.has(2).then(|| self.attr_filter(AttrScope::Record, &p.attributes)),
                self.has(3)
                    .then(|| self.attr_filter(AttrScope::Resource, &p.resource.attributes)),
            ]
            .into_iter()
            .flatten()
            .flatten()
            .collect(),
            window,
            limit: self.limit,
            cursor: None,
        })
    }
}

/// Follows `next_cursor` to the end; returns the concatenated pages. Checks
/// every page is within its limit and that cursors move strictly back.
fn paginate<R>(
    limit: usize,
    mut page: impl FnMut(Option<Cursor>) -> skein_engine::SearchResult<R>,
    time_key: impl Fn(&R) -> (u64, RecordKey),
) -> Result<Vec<Arc<R>>, TestCaseError> {
    let mut all = Vec::new();
    let mut cursor = None;
    for _ in 0..1000 {
        let r = page(cursor);
        prop_assert!(r.records.len() <= limit, "page of {} > limit {limit}", r.records.len());
        if let Some(next) = r.next_cursor {
            prop_assert!(!r.records.is_empty(), "a cursor after an empty page");
            let last = time_key(r.records.last().unwrap());
            prop_assert_eq!((next.time, next.key), last, "the cursor is the last record returned");
            prop_assert_eq!(r.records.len(), limit, "a cursor after a short page");
            if let Some(prev) = cursor {
                prop_assert!((next.time, next.key) < (prev.time, prev.key), "the cursor moved back");
            }
        }
        all.extend(r.records);
        cursor = r.next_cursor;
        if cursor.is_none() {
            return Ok(all);
        }
    }
    Err(TestCaseError::fail("pagination did not end"))
}

fn span_ids(v: &[Span]) -> Vec<String> {
    v.iter()
        .map(|s| {
            format!(
                "{}:{}@{}",
                &s.trace_id.to_hex()[..8],
                s.span_id.to_hex(),
                s.start_time_unix_nano as i128 - T0 as i128
            )
        })
        .collect()
}

fn unwrap_arcs<R: Clone>(v: Vec<Arc<R>>) -> Vec<R> {
    v.into_iter().map(|r| (*r).clone()).collect()
}

fn check_span_queries(e: &Engine, latest: &[Span], queries: &[SpanQuery]) -> Result<(), TestCaseError> {
    for q in queries {
        let mut want: Vec<Span> = latest.iter().filter(|s| naive_span_match(q, s)).cloned().collect();
        sort_spans(&mut want);
        let got = paginate(
            q.limit,
            |cursor| e.search_spans(&SpanQuery { cursor, ..q.clone() }).unwrap(),
            |s| (s.time(), s.key()),
        )?;
        let got = unwrap_arcs(got);
        prop_assert_eq!(span_ids(&got), span_ids(&want), "query {:?}", q);
        prop_assert_eq!(got, want, "query {:?}", q);
    }
    Ok(())
}

fn check_traces(e: &Engine, latest: &[Span]) -> Result<(), TestCaseError> {
    for t in 0..=TRACES as u8 {
        let tid = trace_id(t);
        let mut want: Vec<Span> = latest.iter().filter(|s| s.trace_id == tid).cloned().collect();
        want.sort_by_key(|s| (s.start_time_unix_nano, s.span_id));
        let got = unwrap_arcs(e.get_trace(tid).unwrap().spans);
        prop_assert_eq!(span_ids(&got), span_ids(&want), "trace {}", t);
        prop_assert_eq!(got, want, "trace {}", t);
    }
    Ok(())
}

fn span_batch() -> impl Strategy<Value = Step> {
    prop::collection::vec(span_spec(), 1..16).prop_map(Step::Spans)
}

fn log_or_metric_batch() -> impl Strategy<Value = Step> {
    prop_oneof![
        prop::collection::vec(log_spec(), 1..16).prop_map(Step::Logs),
        prop::collection::vec(metric_spec(), 1..16).prop_map(Step::Metrics),
    ]
}

// ------------------------------------------------------------ properties

proptest! {
    #![proptest_config(config())]

    /// Span search and trace lookup agree with the model, page by page.
    #[test]
    fn span_search_matches_the_model(
        t in tuning(),
        steps in scenario(span_batch()),
        queries in prop::collection::vec(span_query(), 12),
        derived in prop::collection::vec(derived(), 12),
    ) {
        let w = world();
        let dir = tempfile::tempdir().unwrap();
        let (e, got) = run(dir.path(), &t, &steps, &w);
        let latest = latest_spans(&got.spans);
        // Everything, then the random queries.
        let everything = SpanQuery { limit: 7, ..Default::default() };
        check_span_queries(&e, &latest, std::slice::from_ref(&everything))?;
        check_span_queries(&e, &latest, &queries)?;
        let derived: Vec<SpanQuery> = derived.iter().filter_map(|d| d.span_query(&latest)).collect();
        check_span_queries(&e, &latest, &derived)?;
        check_traces(&e, &latest)?;
    }

    /// Log and metric search agree with the model; identical records are one.
    #[test]
    fn log_and_metric_search_match_the_model(
        t in tuning(),
        steps in scenario(log_or_metric_batch()),
        log_queries in prop::collection::vec(log_query(), 8),
        metric_queries in prop::collection::vec(metric_query(), 8),
        derived in prop::collection::vec(derived(), 8),
    ) {
        let w = world();
        let dir = tempfile::tempdir().unwrap();
        let (e, got) = run(dir.path(), &t, &steps, &w);
        let logs = distinct_newest_first(&got.logs);
        let points = distinct_newest_first(&got.metrics);
        let all_logs = LogQuery { limit: 5, ..Default::default() };
        let derived_logs: Vec<LogQuery> = derived.iter().filter_map(|d| d.log_query(&logs)).collect();
        for q in std::iter::once(&all_logs).chain(&log_queries).chain(&derived_logs) {
            let want: Vec<LogRecord> = logs.iter().filter(|l| naive_log_match(q, l)).cloned().collect();
            let got = paginate(
                q.limit,
                |cursor| e.search_logs(&LogQuery { cursor, ..q.clone() }).unwrap(),
                |l| (l.time(), l.key()),
            )?;
            prop_assert_eq!(unwrap_arcs(got), want.clone(), "query {:?}", q);
            // Visiting every match (the severity histogram's path) finds
            // the same records; one stored in two sources is seen in both.
            let mut visited = Vec::new();
            e.visit_logs(q, &mut |l| visited.push(l.clone())).unwrap();
            prop_assert_eq!(distinct_newest_first(&visited), want, "visit_logs {:?}", q);
        }
        let all_points = MetricQuery { limit: 5, ..Default::default() };
        let derived_points: Vec<MetricQuery> = derived.iter().filter_map(|d| d.metric_query(&points)).collect();
        for q in std::iter::once(&all_points).chain(&metric_queries).chain(&derived_points) {
            let want: Vec<MetricPoint> = points.iter().filter(|p| naive_metric_match(q, p)).cloned().collect();
            let got = paginate(
                q.limit,
                |cursor| e.search_metrics(&MetricQuery { cursor, ..q.clone() }).unwrap(),
                |p| (p.time(), p.key()),
            )?;
            prop_assert_eq!(unwrap_arcs(got), want, "query {:?}", q);
        }
    }

    /// Per-service span and error counts are exact; percentiles are within
    /// the sketch's 1% (plus slack for rounding) of the nearest-rank ones.
    #[test]
    fn service_aggregates_match_the_model(
        t in tuning(),
        steps in scenario(span_batch()),
        windows in prop::collection::vec((bound(), bound()), 8),
    ) {
        let w = world();
        let dir = tempfile::tempdir().unwrap();
        let (e, got) = run(dir.path(), &t, &steps, &w);
        let latest = latest_spans(&got.spans);
        let windows = std::iter::once(Window::ALL)
            .chain(windows.into_iter().map(|(a, b)| Window::new(a.min(b), a.max(b))));
        for win in windows {
            check_services(&e, &latest, win)?;
        }
    }
}

fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn check_services(e: &Engine, latest: &[Span], win: Window) -> Result<(), TestCaseError> {
    let mut by_service: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for s in latest.iter().filter(|s| win.contains(s.start_time_unix_nano)) {
        by_service.entry(s.service_name()).or_default().push(s);
    }
    let mut by_op: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for s in latest.iter().filter(|s| win.contains(s.start_time_unix_nano)) {
        let e = by_op.entry((s.service_name(), &s.name)).or_default();
        e.0 += 1;
        e.1 += s.is_error() as u64;
    }
    let (ops, _) = e.operations(None, win).unwrap();
    let ops: BTreeMap<(&str, &str), (u64, u64)> = ops
        .iter()
        .map(|o| ((o.service.as_str(), o.name.as_str()), (o.spans, o.errors)))
        .collect();
    prop_assert_eq!(ops, by_op, "operations (spans, errors) in {:?}", win);
    let (got, _) = e.services(win).unwrap();
    let got_names: Vec<&str> = got.iter().map(|s| s.service.as_str()).collect();
    let want_names: Vec<&str> = by_service.keys().copied().collect();
    prop_assert_eq!(got_names, want_names, "services in {:?}", win);
    for svc in &got {
        let spans = &by_service[svc.service.as_str()];
        let ctx = format!("{} in {:?}", svc.service, win);
        prop_assert_eq!(svc.spans, spans.len() as u64, "spans of {}", ctx);
        let errors = spans.iter().filter(|s| s.status.code == StatusCode::Error).count() as u64;
        prop_assert_eq!(svc.errors, errors, "errors of {}", ctx);
        let traces: HashSet<TraceId> = spans.iter().map(|s| s.trace_id).collect();
        prop_assert!(
            svc.traces >= traces.len() as u64 && svc.traces <= svc.spans,
            "traces of {}: {} for {} distinct",
            ctx,
            svc.traces,
            traces.len()
        );
        let mut d: Vec<u64> = spans.iter().map(|s| s.duration_ns()).collect();
        d.sort_unstable();
        prop_assert_eq!(svc.max_ns, *d.last().unwrap(), "max of {}", ctx);
        for (q, got) in [(0.5, svc.p50_ns), (0.95, svc.p95_ns), (0.99, svc.p99_ns)] {
            let want = nearest_rank(&d, q) as f64;
            prop_assert!(
                (got as f64 - want).abs() <= want * 0.011,
                "p{} of {}: {} vs exact {}",
                q * 100.0,
                ctx,
                got,
                want
            );
        }
    }
    Ok(())
}

// ------------------------------------------------------------ regressions

fn plain_options(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.durability = Durability::None;
    o
}

fn one_span(w: &World) -> Span {
    SpanSpec {
        trace: 0,
        span: 0,
        parent: None,
        name: 0,
        kind: 0,
        status: 2,
        start: 5,
        dur: 3,
        res: 0,
        scope: 0,
        attrs: vec![(1, 0)],
        events: Vec::new(),
        extra: 0,
        measure: None,
    }
    .build(w)
}

/// Found by `span_search_matches_the_model`: after a clean close, the
/// reopened WAL listed its (empty) current segment twice, and the first
/// flush failed deleting it a second time.
#[test]
fn flush_after_a_clean_reopen_succeeds() {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(plain_options(dir.path())).unwrap();
    e.ingest_spans(vec![one_span(&w)]).unwrap();
    e.close().unwrap();
    drop(e);
    for round in 0..3 {
        let e = Engine::open(plain_options(dir.path())).unwrap();
        let mut s = one_span(&w);
        s.span_id = span_id(round + 1);
        e.ingest_spans(vec![s]).unwrap();
        e.flush()
            .unwrap_or_else(|err| panic!("flush after reopen {round}: {err}"));
        assert_eq!(e.stats().spans, round as u64 + 2);
        e.close().unwrap();
    }
    let e = Engine::open(plain_options(dir.path())).unwrap();
    assert_eq!(e.stats().spans, 4);
    assert_eq!(e.stats().wal_segments, 1, "one live segment");
}

/// Found by `log_and_metric_search_match_the_model`: an `Event`-scope filter
/// on logs and metric points means their own attributes (as `matches` says),
/// but the index looked for event postings and found none.
#[test]
fn event_scope_filters_on_logs_and_metrics_use_their_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(plain_options(dir.path())).unwrap();
    let logs = testdata::logs(10);
    let points = testdata::metric_points(10);
    e.ingest_logs(logs.clone()).unwrap();
    e.ingest_metrics(points.clone()).unwrap();
    for flushed in [false, true] {
        for scope in [AttrScope::Record, AttrScope::Event] {
            let q = LogQuery {
                attributes: vec![AttrFilter::eq(scope, "n", 3i64)],
                limit: 100,
                ..Default::default()
            };
            assert_eq!(
                e.search_logs(&q).unwrap().records.len(),
                1,
                "{scope:?} flushed={flushed}"
            );
            let q = MetricQuery {
                attributes: vec![AttrFilter::exists(scope, "host")],
                limit: 100,
                ..Default::default()
            };
            assert_eq!(
                e.search_metrics(&q).unwrap().records.len(),
                10,
                "{scope:?} flushed={flushed}"
            );
        }
        e.flush().unwrap();
    }
}

/// Found by `log_and_metric_search_match_the_model`: a log with an empty
/// body matched `body_contains: "nul"` (its text is JSON `null`) in the hot
/// tier, and no longer once flushed (the part prefilter rejected it).
#[test]
fn empty_log_bodies_match_the_same_before_and_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(plain_options(dir.path())).unwrap();
    let mut logs = testdata::logs(3);
    logs[0].body = AnyValue::Empty;
    e.ingest_logs(logs).unwrap();
    for needle in ["nul", ""] {
        let q = LogQuery {
            body_contains: Some(needle.into()),
            limit: 10,
            ..Default::default()
        };
        let hot = e.search_logs(&q).unwrap().records.len();
        e.flush().unwrap();
        let parts = e.search_logs(&q).unwrap().records.len();
        assert_eq!(hot, parts, "needle {needle:?}");
    }
}

/// Found by `service_aggregates_match_the_model`: a span ingested again after
/// a flush (a client retry, or a corrected version) was counted once per
/// copy by the aggregations, while searches return only the newest.
#[test]
fn aggregates_count_a_reingested_span_once() {
    let w = world();
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(plain_options(dir.path())).unwrap();
    let span = one_span(&w);
    let other = Span {
        span_id: span_id(7),
        ..span.clone()
    };
    e.ingest_spans(vec![span.clone(), other]).unwrap();
    e.flush().unwrap();
    // The identical retry: in the hot tier, then in a second part.
    e.ingest_spans(vec![span.clone()]).unwrap();
    let count = |win: Window| -> (u64, u64) {
        let (s, _) = e.services(win).unwrap();
        (s.iter().map(|s| s.spans).sum(), s.iter().map(|s| s.errors).sum())
    };
    let all = Window::ALL;
    let around = Window::new(span.start_time_unix_nano, span.start_time_unix_nano + 1);
    assert_eq!(count(all), (2, 2), "hot copy of a flushed span");
    assert_eq!(count(around), (2, 2), "a window straddling nothing, covering the part");
    e.flush().unwrap();
    assert_eq!(count(all), (2, 2), "two parts");
    // A corrected version moves out of the window: the old one no longer counts.
    let moved = Span {
        start_time_unix_nano: span.start_time_unix_nano + 50 * STEP,
        end_time_unix_nano: span.end_time_unix_nano + 50 * STEP,
        status: Status::default(),
        ..span.clone()
    };
    e.ingest_spans(vec![moved]).unwrap();
    assert_eq!(count(all), (2, 1));
    assert_eq!(count(around), (1, 1));
    let (summary, _) = e.summary(all, None).unwrap();
    assert_eq!((summary.spans, summary.error_spans), (2, 1));
    let (ops, _) = e.operations(None, around).unwrap();
    assert_eq!(ops.iter().map(|o| o.spans).sum::<u64>(), 1);
    e.flush().unwrap();
    e.compact().unwrap();
    assert_eq!(count(all), (2, 1), "after compaction");
    assert_eq!(count(around), (1, 1), "after compaction");
}

/// Parts larger than a time-mark stride and an attribute too diverse to
/// index: the search paths that small random data never reaches.
#[test]
fn large_parts_with_unindexed_keys_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(plain_options(dir.path())).unwrap();
    let corpus = skein_model::corpus::Corpus::with_shape(1_300, 10, 3, 7, testdata::END_NS);
    let mut all: Vec<Span> = corpus.spans(0..1_300);
    for (i, s) in all.iter_mut().enumerate() {
        s.attributes.push(KeyValue::new("req.id", i as i64));
    }
    // 13,000 spans in one part: "req.id" has too many values to index.
    e.ingest_spans(all.clone()).unwrap();
    e.flush().unwrap();
    // Re-ingest every 97th span, renamed and moved, in a second part and the hot tier.
    let mut again: Vec<Span> = all.iter().step_by(97).cloned().collect();
    for (i, s) in again.iter_mut().enumerate() {
        s.name = format!("again {i}");
        s.start_time_unix_nano -= 1_000;
        s.end_time_unix_nano -= 1_000;
    }
    let (a, b) = again.split_at(again.len() / 2);
    e.ingest_spans(a.to_vec()).unwrap();
    e.flush().unwrap();
    e.ingest_spans(b.to_vec()).unwrap();
    let mut ingested = all;
    ingested.extend(again);
    let latest = latest_spans(&ingested);
    let mid = corpus.trace_start(650);
    let queries = [
        SpanQuery {
            attributes: vec![AttrFilter::eq(AttrScope::Record, "req.id", 4_321i64)],
            limit: 5,
            ..Default::default()
        },
        SpanQuery {
            attributes: vec![AttrFilter::eq(AttrScope::Record, "benchmark.group", "group-3")],
            window: Window::new(mid, corpus.trace_start(900)),
            limit: 97,
            ..Default::default()
        },
        SpanQuery {
            name_contains: Some("AGAIN".into()),
            limit: 10,
            ..Default::default()
        },
        SpanQuery {
            window: Window::new(0, mid),
            limit: 1_000,
            ..Default::default()
        },
    ];
    check_span_queries(&e, &latest, &queries).unwrap();
    for win in [Window::ALL, Window::new(mid, u64::MAX)] {
        check_services(&e, &latest, win).unwrap();
    }
    // The big part could not narrow "req.id" = 4321 by postings: it scanned
    // (which is what this test is about); a big part with the value indexed
    // would have examined one row.
    let r = e.search_spans(&queries[0]).unwrap();
    assert_eq!(r.records.len(), 1);
    assert!(
        r.explain
            .sources
            .iter()
            .any(|s| s.kind == "part" && s.rows_examined > 1),
        "{:#?}",
        r.explain
    );
}
