//! The JSON shapes of the API: stable, documented in docs/api.md, and the
//! same ones the CLI prints.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use skein_model::json::{any_value_to_plain_json, attrs_to_plain_json};
use skein_model::log::severity_band;
use skein_model::metric::{MetricKind, Number, PointValue};
use skein_model::{LogRecord, MetricPoint, Span};

fn opt_str(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { Value::from(s) }
}

pub fn span(s: &Span) -> Value {
    let mut m = Map::new();
    m.insert("trace_id".into(), s.trace_id.to_hex().into());
    m.insert("span_id".into(), s.span_id.to_hex().into());
    m.insert(
        "parent_span_id".into(),
        s.parent_span_id.map(|p| Value::from(p.to_hex())).unwrap_or(Value::Null),
    );
    m.insert("service".into(), s.service_name().into());
    m.insert("name".into(), s.name.as_str().into());
    m.insert("kind".into(), s.kind.as_str().into());
    m.insert("start_time_unix_nano".into(), s.start_time_unix_nano.into());
    m.insert("end_time_unix_nano".into(), s.end_time_unix_nano.into());
    m.insert("duration_ns".into(), s.duration_ns().into());
    m.insert(
        "status".into(),
        json!({"code": s.status.code.as_str(), "message": opt_str(&s.status.message)}),
    );
    m.insert("attributes".into(), Value::Object(attrs_to_plain_json(&s.attributes)));
    m.insert(
        "resource".into(),
        Value::Object(attrs_to_plain_json(&s.resource.attributes)),
    );
    m.insert(
        "scope".into(),
        json!({"name": s.scope.name, "version": opt_str(&s.scope.version)}),
    );
    m.insert(
        "events".into(),
        Value::Array(
            s.events
                .iter()
                .map(|e| {
                    json!({"name": e.name, "time_unix_nano": e.time_unix_nano,
                           "attributes": attrs_to_plain_json(&e.attributes)})
                })
                .collect(),
        ),
    );
    m.insert(
        "links".into(),
        Value::Array(
            s.links
                .iter()
                .map(|l| {
                    json!({"trace_id": l.trace_id.to_hex(), "span_id": l.span_id.to_hex(),
                           "attributes": attrs_to_plain_json(&l.attributes)})
                })
                .collect(),
        ),
    );
    if !s.trace_state.is_empty() {
        m.insert("trace_state".into(), s.trace_state.as_str().into());
    }
    Value::Object(m)
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
    let ids: HashSet<u64> = spans.iter().map(|s| s.span_id.as_u64()).collect();
    let mut children: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        match s.parent_span_id {
            Some(p) if ids.contains(&p.as_u64()) && p != s.span_id => children.entry(p.as_u64()).or_default().push(i),
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
        let mut v = span(&spans[i]);
        v["depth"] = depth.into();
        ordered.push(v);
        if let Some(kids) = children.get(&spans[i].span_id.as_u64()) {
            for &k in kids.iter().rev() {
                stack.push((k, depth + 1));
            }
        }
    }
    // Cycles (a malformed trace) leave spans unvisited: list them as roots.
    for (i, s) in spans.iter().enumerate() {
        if !seen.contains(&i) {
            let mut v = span(s);
            v["depth"] = 0.into();
            ordered.push(v);
        }
    }
    let start = spans.iter().map(|s| s.start_time_unix_nano).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.end_time_unix_nano).max().unwrap_or(0);
    let services: BTreeSet<&str> = spans.iter().map(|s| s.service_name()).collect();
    let root = roots.first().map(|&i| {
        let r = &spans[i];
        json!({"span_id": r.span_id.to_hex(), "service": r.service_name(), "name": r.name, "duration_ns": r.duration_ns()})
    });
    json!({
        "trace_id": trace_id,
        "root": root,
        "start_time_unix_nano": start,
        "end_time_unix_nano": end,
        "duration_ns": end.saturating_sub(start),
        "span_count": spans.len(),
        "error_count": spans.iter().filter(|s| s.is_error()).count(),
        "services": services,
        "spans": ordered,
    })
}

/// A one-line summary of a trace, for trace lists.
pub fn trace_summary(spans: &[Arc<Span>]) -> Value {
    let mut v = trace(&spans.first().map(|s| s.trace_id.to_hex()).unwrap_or_default(), spans);
    if let Value::Object(m) = &mut v {
        m.remove("spans");
    }
    v
}
