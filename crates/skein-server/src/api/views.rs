//! The JSON shapes of the API: stable, documented in docs/api.md, and the
//! same ones the CLI prints.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};
use skein_model::log::severity_band;
use skein_model::metric::{MetricKind, Number, PointValue};
use skein_model::plain::{PlainAttrs, any_value_to_plain_json, attrs_to_plain_json};
use skein_model::{LogRecord, MetricPoint, Span};

fn opt_str(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { Value::from(s) }
}

pub fn span(s: &Span) -> Value {
    serde_json::to_value(SpanJson { span: s, depth: None }).unwrap_or(Value::Null)
}

/// A span as the API prints it. Serialized straight from the span (no
/// `Value` in between, which cost more than the search itself for a page
/// of results), with keys in sorted order, so the text is exactly that of
/// the equivalent `serde_json::Value`.
pub struct SpanJson<'a> {
    pub span: &'a Span,
    /// Depth in its trace's tree, in trace views.
    pub depth: Option<usize>,
}

impl Serialize for SpanJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.span;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("attributes", &PlainAttrs(&s.attributes))?;
        if let Some(depth) = self.depth {
            m.serialize_entry("depth", &depth)?;
        }
        m.serialize_entry("duration_ns", &s.duration_ns())?;
        m.serialize_entry("end_time_unix_nano", &s.end_time_unix_nano)?;
        m.serialize_entry("events", &Each(&s.events, EventJson))?;
        m.serialize_entry("kind", s.kind.as_str())?;
        m.serialize_entry("links", &Each(&s.links, LinkJson))?;
        if let Some(llm) = super::llm_views::llm_of(s) {
            m.serialize_entry("llm", &llm)?;
        }
        m.serialize_entry("name", &s.name)?;
        m.serialize_entry("parent_span_id", &s.parent_span_id.map(|p| p.to_hex()))?;
        m.serialize_entry("resource", &PlainAttrs(&s.resource.attributes))?;
        m.serialize_entry("scope", &ScopeJson(&s.scope))?;
        m.serialize_entry("service", s.service_name())?;
        m.serialize_entry("span_id", &s.span_id.to_hex())?;
        m.serialize_entry("start_time_unix_nano", &s.start_time_unix_nano)?;
        m.serialize_entry("status", &StatusJson(&s.status))?;
        m.serialize_entry("trace_id", &s.trace_id.to_hex())?;
        if !s.trace_state.is_empty() {
            m.serialize_entry("trace_state", &s.trace_state)?;
        }
        m.end()
    }
}

/// `s` or null when empty.
fn nonempty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

struct StatusJson<'a>(&'a skein_model::Status);

impl Serialize for StatusJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(2))?;
        m.serialize_entry("code", self.0.code.as_str())?;
        m.serialize_entry("message", &nonempty(&self.0.message))?;
        m.end()
    }
}

struct ScopeJson<'a>(&'a skein_model::Scope);

impl Serialize for ScopeJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(2))?;
        m.serialize_entry("name", &self.0.name)?;
        m.serialize_entry("version", &nonempty(&self.0.version))?;
        m.end()
    }
}

struct EventJson<'a>(&'a skein_model::span::Event);

impl Serialize for EventJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(3))?;
        m.serialize_entry("attributes", &PlainAttrs(&self.0.attributes))?;
        m.serialize_entry("name", &self.0.name)?;
        m.serialize_entry("time_unix_nano", &self.0.time_unix_nano)?;
        m.end()
    }
}

/// A JSON array of `items`, each through `view`.
struct Each<'a, T, V>(&'a [T], fn(&'a T) -> V);

impl<'a, T, V: Serialize> Serialize for Each<'a, T, V> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&(self.1)(item))?;
        }
        seq.end()
    }
}

struct LinkJson<'a>(&'a skein_model::span::Link);

impl Serialize for LinkJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(3))?;
        m.serialize_entry("attributes", &PlainAttrs(&self.0.attributes))?;
        m.serialize_entry("span_id", &self.0.span_id.to_hex())?;
        m.serialize_entry("trace_id", &self.0.trace_id.to_hex())?;
        m.end()
    }
}

pub fn log(l: &LogRecord) -> Value {
    json!({
        "time_unix_nano": l.effective_time(),
        "observed_time_unix_nano": l.observed_time_unix_nano,
        "service": l.service_name(),
        "severity_number": l.severity_number,
        "severity_text": opt_str(&l.severity_text),
        "severity": severity_band(l.severity_number),
        "body": any_value_to_plain_json(&l.body),
        "attributes": attrs_to_plain_json(&l.attributes),
        "resource": attrs_to_plain_json(&l.resource.attributes),
        "trace_id": l.trace_id.map(|t| Value::from(t.to_hex())).unwrap_or(Value::Null),
        "span_id": l.span_id.map(|s| Value::from(s.to_hex())).unwrap_or(Value::Null),
        "event_name": opt_str(&l.event_name),
        "scope": {"name": l.scope.name, "version": opt_str(&l.scope.version)},
    })
}

fn number(n: &Option<Number>) -> Value {
    match n {
        Some(Number::Int(i)) => Value::from(*i),
        Some(Number::Double(d)) => skein_model::json::double_json(*d),
        None => Value::Null,
    }
}

fn temporality_json(t: skein_model::metric::Temporality) -> Value {
    format!("{t:?}").to_lowercase().into()
}

pub fn metric_point(p: &MetricPoint) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), p.metric.name.as_str().into());
    m.insert("type".into(), p.metric.kind.as_str().into());
    m.insert("unit".into(), opt_str(&p.metric.unit));
    m.insert("description".into(), opt_str(&p.metric.description));
    m.insert("service".into(), p.service_name().into());
    m.insert("time_unix_nano".into(), p.time_unix_nano.into());
    m.insert("start_time_unix_nano".into(), p.start_time_unix_nano.into());
    m.insert("attributes".into(), Value::Object(attrs_to_plain_json(&p.attributes)));
    m.insert(
        "resource".into(),
        Value::Object(attrs_to_plain_json(&p.resource.attributes)),
    );
    match p.metric.kind {
        MetricKind::Sum { monotonic, temporality } => {
            m.insert("monotonic".into(), monotonic.into());
            m.insert("temporality".into(), temporality_json(temporality));
        }
        // Bucket counts mean nothing without it: since the start, or since the last point.
        MetricKind::Histogram { temporality } | MetricKind::ExponentialHistogram { temporality } => {
            m.insert("temporality".into(), temporality_json(temporality));
        }
        MetricKind::Gauge | MetricKind::Summary => {}
    }
    let d = skein_model::json::double_json;
    match &p.value {
        PointValue::Number(n) => {
            m.insert("value".into(), number(n));
        }
        PointValue::Histogram(h) => {
            m.insert("count".into(), h.count.into());
            m.insert("sum".into(), h.sum.map(d).unwrap_or(Value::Null));
            m.insert("min".into(), h.min.map(d).unwrap_or(Value::Null));
            m.insert("max".into(), h.max.map(d).unwrap_or(Value::Null));
            m.insert("bucket_counts".into(), h.bucket_counts.clone().into());
            m.insert(
                "explicit_bounds".into(),
                Value::Array(h.explicit_bounds.iter().map(|b| d(*b)).collect()),
            );
        }
        PointValue::ExponentialHistogram(h) => {
            m.insert("count".into(), h.count.into());
            m.insert("sum".into(), h.sum.map(d).unwrap_or(Value::Null));
            m.insert("scale".into(), h.scale.into());
            m.insert("zero_count".into(), h.zero_count.into());
            let b = |b: &Option<skein_model::metric::ExpBuckets>| {
                b.as_ref()
                    .map(|b| json!({"offset": b.offset, "bucket_counts": b.bucket_counts}))
                    .unwrap_or(Value::Null)
            };
            m.insert("positive".into(), b(&h.positive));
            m.insert("negative".into(), b(&h.negative));
        }
        PointValue::Summary(s) => {
            m.insert("count".into(), s.count.into());
            m.insert("sum".into(), d(s.sum));
            m.insert(
                "quantiles".into(),
                Value::Array(
                    s.quantiles
                        .iter()
                        .map(|(q, v)| json!({"quantile": d(*q), "value": d(*v)}))
                        .collect(),
                ),
            );
        }
    }
    Value::Object(m)
}

/// A trace as a tree: spans in depth-first order (children by start time),
/// each with its `depth`; spans whose parent is missing are roots too.
pub fn trace(trace_id: &str, spans: &[Arc<Span>]) -> Value {
    serde_json::to_value(TraceJson::new(trace_id, spans)).unwrap_or(Value::Null)
}

/// A trace as the API prints it: its spans in tree order (depth first,
/// siblings by start time) with their depth, and a summary. Serialized
/// straight from the spans, keys sorted (see [`SpanJson`]).
pub struct TraceJson<'a> {
    trace_id: &'a str,
    spans: &'a [Arc<Span>],
    /// (index into `spans`, depth) in tree order.
    ordered: Vec<(usize, usize)>,
    root: Option<usize>,
    with_spans: bool,
    /// The engine's explain, when asked for.
    pub explain: Option<Value>,
}

impl<'a> TraceJson<'a> {
    pub fn new(trace_id: &'a str, spans: &'a [Arc<Span>]) -> Self {
        let ids: HashSet<u64> = spans.iter().map(|s| s.span_id.as_u64()).collect();
        let mut children: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut roots = Vec::new();
        for (i, s) in spans.iter().enumerate() {
            match s.parent_span_id {
                Some(p) if ids.contains(&p.as_u64()) && p != s.span_id => {
                    children.entry(p.as_u64()).or_default().push(i)
                }
                _ => roots.push(i),
            }
        }
        let by_start = |v: &mut Vec<usize>| v.sort_by_key(|&i| (spans[i].start_time_unix_nano, spans[i].span_id));
        by_start(&mut roots);
        for v in children.values_mut() {
            by_start(v);
        }
        let mut ordered = Vec::with_capacity(spans.len());
        let mut seen = HashSet::new();
        let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&i| (i, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            if !seen.insert(i) {
                continue;
            }
            ordered.push((i, depth));
            if let Some(kids) = children.get(&spans[i].span_id.as_u64()) {
                for &k in kids.iter().rev() {
                    stack.push((k, depth + 1));
                }
            }
        }
        // Cycles (a malformed trace) leave spans unvisited: list them as roots.
        for i in 0..spans.len() {
            if !seen.contains(&i) {
                ordered.push((i, 0));
            }
        }
        TraceJson {
            trace_id,
            spans,
            ordered,
            root: roots.first().copied(),
            with_spans: true,
            explain: None,
        }
    }
}

impl Serialize for TraceJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let spans = self.spans;
        let start = spans.iter().map(|s| s.start_time_unix_nano).min().unwrap_or(0);
        let end = spans.iter().map(|s| s.end_time_unix_nano).max().unwrap_or(0);
        let services: BTreeSet<&str> = spans.iter().map(|s| s.service_name()).collect();
        let root = self.root.map(|i| {
            let r = &spans[i];
            json!({"span_id": r.span_id.to_hex(), "service": r.service_name(), "name": r.name, "duration_ns": r.duration_ns()})
        });
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("duration_ns", &end.saturating_sub(start))?;
        m.serialize_entry("end_time_unix_nano", &end)?;
        m.serialize_entry("error_count", &spans.iter().filter(|s| s.is_error()).count())?;
        if let Some(explain) = &self.explain {
            m.serialize_entry("explain", explain)?;
        }
        m.serialize_entry("root", &root)?;
        m.serialize_entry("services", &services)?;
        m.serialize_entry("span_count", &spans.len())?;
        if self.with_spans {
            m.serialize_entry("spans", &TreeOrder(self))?;
        }
        m.serialize_entry("start_time_unix_nano", &start)?;
        m.serialize_entry("trace_id", self.trace_id)?;
        m.end()
    }
}

struct TreeOrder<'a>(&'a TraceJson<'a>);

impl Serialize for TreeOrder<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(Some(self.0.ordered.len()))?;
        for &(i, depth) in &self.0.ordered {
            seq.serialize_element(&SpanJson {
                span: &self.0.spans[i],
                depth: Some(depth),
            })?;
        }
        seq.end()
    }
}

/// A page of span search results, keys sorted (see [`SpanJson`]).
pub struct SpansPage<'a> {
    pub spans: &'a [Arc<Span>],
    pub next_cursor: Option<String>,
    pub explain: Option<Value>,
}

impl Serialize for SpansPage<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(None)?;
        if let Some(explain) = &self.explain {
            m.serialize_entry("explain", explain)?;
        }
        m.serialize_entry("next_cursor", &self.next_cursor)?;
        m.serialize_entry("spans", &Each(self.spans, |s| SpanJson { span: s, depth: None }))?;
        m.end()
    }
}

/// A one-line summary of a trace, for trace lists.
pub fn trace_summary(spans: &[Arc<Span>]) -> Value {
    let id = spans.first().map(|s| s.trace_id.to_hex()).unwrap_or_default();
    let view = TraceJson {
        with_spans: false,
        ..TraceJson::new(&id, spans)
    };
    serde_json::to_value(view).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use skein_model::{AnyValue, KeyValue};

    use super::*;

    fn variety() -> Vec<Arc<Span>> {
        let corpus = skein_model::corpus::Corpus::with_shape(20, 10, 3, 10, 1_767_225_600_000_000_000);
        let mut spans = corpus.spans(0..20);
        let weird = vec![
            KeyValue::new("z", 1i64),
            KeyValue::new("a", "x"),
            KeyValue::new("a", "dup"),
            KeyValue {
                key: "d".into(),
                value: AnyValue::Double(f64::NAN),
            },
            KeyValue {
                key: "e".into(),
                value: AnyValue::Double(f64::INFINITY),
            },
            KeyValue {
                key: "f".into(),
                value: AnyValue::Double(f64::NEG_INFINITY),
            },
            KeyValue {
                key: "g".into(),
                value: AnyValue::Double(1.0),
            },
            KeyValue {
                key: "g2".into(),
                value: AnyValue::Double(-0.0),
            },
            KeyValue {
                key: "h".into(),
                value: AnyValue::Bytes(vec![0, 255, 3]),
            },
            KeyValue {
                key: "i".into(),
                value: AnyValue::Empty,
            },
            KeyValue {
                key: "j".into(),
                value: AnyValue::Bool(true),
            },
            KeyValue {
                key: "k".into(),
                value: AnyValue::Array(vec![
                    AnyValue::Int(1),
                    AnyValue::Str("s\"q".into()),
                    AnyValue::Map(vec![KeyValue::new("y", 2i64), KeyValue::new("b", 3i64)]),
                ]),
            },
            KeyValue {
                key: "é ünï".into(),
                value: AnyValue::Map(vec![KeyValue::new("m", "n"), KeyValue::new("m", "o")]),
            },
        ];
        for (i, s) in spans.iter_mut().enumerate() {
            if i % 3 == 0 {
                s.attributes.extend(weird.clone());
            }
            if i % 4 == 0 {
                s.trace_state = "k=v".into();
                s.status.message = "bad".into();
            }
            if i % 5 == 0 {
                s.events.push(skein_model::Event {
                    time_unix_nano: 5,
                    name: "ev".into(),
                    attributes: weird.clone(),
                    dropped_attributes_count: 0,
                });
                s.links.push(skein_model::Link {
                    trace_id: s.trace_id,
                    span_id: s.span_id,
                    trace_state: String::new(),
                    attributes: weird.clone(),
                    dropped_attributes_count: 0,
                    flags: 0,
                });
            }
        }
        // A cycle.
        let (a, b) = (spans[0].span_id, spans[1].span_id);
        spans[0].parent_span_id = Some(b);
        spans[1].parent_span_id = Some(a);
        spans.into_iter().map(Arc::new).collect()
    }

    /// The direct serializers print exactly what their `Value` (whose maps
    /// are sorted by key) prints: same keys, same order, same numbers.
    #[test]
    fn direct_serialization_prints_what_its_value_prints() {
        let spans = variety();
        let same = |direct: String, v: Value| assert_eq!(direct, serde_json::to_string(&v).unwrap());
        for s in &spans {
            let view = SpanJson {
                span: s,
                depth: Some(2),
            };
            same(
                serde_json::to_string(&view).unwrap(),
                serde_json::to_value(&view).unwrap(),
            );
        }
        for chunk in spans.chunks(10) {
            let id = chunk[0].trace_id.to_hex();
            let mut view = TraceJson::new(&id, chunk);
            view.explain = Some(json!({"b": 1, "a": [2]}));
            same(
                serde_json::to_string(&view).unwrap(),
                serde_json::to_value(&view).unwrap(),
            );
            let page = SpansPage {
                spans: chunk,
                next_cursor: Some("c".into()),
                explain: Some(json!({"z": 0})),
            };
            same(
                serde_json::to_string(&page).unwrap(),
                serde_json::to_value(&page).unwrap(),
            );
        }
        // The awkward values print as the API documents them.
        let text = serde_json::to_string(&span(&spans[0])).unwrap();
        for want in [
            r#""d":"NaN""#,
            r#""e":"Infinity""#,
            r#""a":"x""#,
            r#""h":"AP8D""#,
            r#""i":null"#,
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }
}
