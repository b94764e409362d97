//! The Prometheus series an OTLP metric point stands for, per the
//! OpenTelemetry "Prometheus and OpenMetrics compatibility" specification
//! (OTLP → Prometheus):
//!
//! - the name: invalid characters replaced by `_`, the unit appended as a
//!   word (`s` → `_seconds`, `By` → `_bytes`, `m/s` →
//!   `_meters_per_second`, `1` on a gauge → `_ratio`; `{…}` annotations
//!   dropped) unless the name ends with it, `_total` appended to monotonic
//!   sums;
//! - histograms as `_bucket{le}` (cumulative), `_sum`, `_count`; summaries
//!   as `{quantile}`, `_sum`, `_count`;
//! - labels: the point's attributes (keys sanitized; keys that collide
//!   joined with `;` in key order), `job` from `service.namespace/` +
//!   `service.name`, `instance` from `service.instance.id`,
//!   `otel_scope_name`/`otel_scope_version` from the scope; the other
//!   resource attributes on a `target_info` series instead;
//! - a point flagged "no recorded value" is a staleness marker.
//!
//! A valid Prometheus name or label key is kept as it is, so a sample that
//! came in by remote write (a gauge named by its `__name__`, without a
//! unit, `job`/`instance` kept as `service.name`/`service.instance.id`) is
//! read back under its own labels.
//!
//! - exponential histograms as native histograms under the metric's name
//!   ([`native_histogram`]; a scale finer than 8 coarsened to 8).
//!
//! Not exposed: delta-temporality sums and histograms (Prometheus has no
//! deltas), exponential histograms of a scale below -4 (Prometheus has no
//! such schema).

use skein_model::metric::{Number, Temporality};
use skein_model::{AnyValue, KeyValue, MetricDesc, MetricKind, MetricPoint, PointValue};

use crate::{FloatHistogram, Labels, NAME, STALE_NAN_BITS, format_float};

fn valid_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch == '_' || ch == ':' || ch.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch == ':' || ch.is_ascii_alphanumeric())
}

fn valid_label_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch == '_' || ch.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

/// A metric name with invalid characters replaced by `_` (a valid one
/// unchanged).
pub fn sanitize_name(s: &str) -> String {
    if valid_metric_name(s) {
        return s.to_string();
    }
    let mut out: String = s
        .chars()
        .map(|c| {
            if c == ':' || c == '_' || c.is_ascii_alphanumeric() {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A label key with invalid characters replaced by `_`, `key_` before a
/// leading digit (a valid one unchanged).
pub fn sanitize_label(s: &str) -> String {
    if valid_label_name(s) {
        return s.to_string();
    }
    let out: String = s
        .chars()
        .map(|c| if c == '_' || c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        format!("key_{out}")
    } else {
        out
    }
}

fn unit_word(u: &str) -> Option<&'static str> {
    Some(match u {
        "d" => "days",
        "h" => "hours",
        "min" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" => "microseconds",
        "ns" => "nanoseconds",
        "By" => "bytes",
        "KiBy" => "kibibytes",
        "MiBy" => "mebibytes",
        "GiBy" => "gibibytes",
        "TiBy" => "tebibytes",
        "KBy" => "kilobytes",
        "MBy" => "megabytes",
        "GBy" => "gigabytes",
        "TBy" => "terabytes",
        "m" => "meters",
        "V" => "volts",
        "A" => "amperes",
        "J" => "joules",
        "W" => "watts",
        "g" => "grams",
        "Cel" => "celsius",
        "Hz" => "hertz",
        "%" => "percent",
        _ => return None,
    })
}

fn per_word(u: &str) -> Option<&'static str> {
    Some(match u {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "mo" => "month",
        "y" => "year",
        _ => return None,
    })
}

/// The unit as a name suffix (`""`: none).
pub fn unit_suffix(unit: &str, kind: &MetricKind) -> String {
    // Annotations (`{requests}`) carry no unit.
    let mut u = String::new();
    let mut depth = 0;
    for c in unit.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            _ if depth == 0 => u.push(c),
            _ => {}
        }
    }
    let u = u.trim();
    if u == "1" {
        return if matches!(kind, MetricKind::Gauge) {
            "ratio".into()
        } else {
            String::new()
        };
    }
    let (main, per) = match u.split_once('/') {
        Some((m, p)) => (m.trim(), p.trim()),
        None => (u, ""),
    };
    let word = |s: &str, f: fn(&str) -> Option<&'static str>| -> String {
        match f(s) {
            Some(w) => w.to_string(),
            None => sanitize_label(s).trim_matches('_').to_string(),
        }
    };
    let main = if main.is_empty() || main == "1" {
        String::new()
    } else {
        word(main, unit_word)
    };
    let per = if per.is_empty() {
        String::new()
    } else {
        word(per, per_word)
    };
    match (main.is_empty(), per.is_empty()) {
        (_, true) => main,
        (true, false) => format!("per_{per}"),
        (false, false) => format!("{main}_per_{per}"),
    }
}

/// How Prometheus sees a metric: its (base) name and type, or `None` when
/// it is not exposed.
pub fn prometheus_metric(desc: &MetricDesc) -> Option<(String, &'static str)> {
    let mut name = sanitize_name(&desc.name);
    let counter = matches!(desc.kind, MetricKind::Sum { monotonic: true, .. });
    if counter && name.len() > "_total".len() && name.ends_with("_total") {
        name.truncate(name.len() - "_total".len());
    }
    let suffix = unit_suffix(&desc.unit, &desc.kind);
    if !suffix.is_empty() && !name.ends_with(&suffix) {
        name = format!("{name}_{suffix}");
    }
    let kind = match desc.kind {
        MetricKind::Gauge => "gauge",
        MetricKind::Sum {
            temporality: Temporality::Delta,
            ..
        } => return None,
        MetricKind::Sum { monotonic: true, .. } => {
            if !name.ends_with("_total") {
                name.push_str("_total");
            }
            "counter"
        }
        MetricKind::Sum { .. } => "gauge",
        MetricKind::Histogram {
            temporality: Temporality::Delta,
        } => return None,
        MetricKind::Histogram { .. } => "histogram",
        MetricKind::Summary => "summary",
        MetricKind::ExponentialHistogram {
            temporality: Temporality::Delta,
        } => return None,
        // A native histogram, under the metric's own name.
        MetricKind::ExponentialHistogram { .. } => "histogram",
    };
    Some((name, kind))
}

/// Whether a point of OTLP metric `otlp_name` can appear under the
/// Prometheus name `prom_name` (every name derived from it starts with its
/// sanitized form): narrows a scan by name, never decides a match.
pub fn may_be_named(otlp_name: &str, prom_name: &str) -> bool {
    prom_name.starts_with(&sanitize_name(otlp_name))
}

/// The value of an attribute as a label value.
pub fn label_value(v: &AnyValue) -> String {
    match v {
        AnyValue::Empty => String::new(),
        AnyValue::Str(s) => s.clone(),
        AnyValue::Bool(b) => b.to_string(),
        AnyValue::Int(i) => i.to_string(),
        AnyValue::Double(d) => format_float(*d),
        other => serde_json::to_string(&skein_model_json(other)).unwrap_or_default(),
    }
}

fn skein_model_json(v: &AnyValue) -> serde_json::Value {
    match v {
        AnyValue::Empty => serde_json::Value::Null,
        AnyValue::Str(s) => serde_json::Value::String(s.clone()),
        AnyValue::Bool(b) => serde_json::Value::Bool(*b),
        AnyValue::Int(i) => serde_json::json!(i),
        AnyValue::Double(d) => serde_json::json!(d),
        AnyValue::Bytes(b) => serde_json::Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
        AnyValue::Array(a) => serde_json::Value::Array(a.iter().map(skein_model_json).collect()),
        AnyValue::Map(m) => serde_json::Value::Object(
            m.iter()
                .map(|kv| (kv.key.clone(), skein_model_json(&kv.value)))
                .collect(),
        ),
    }
}

fn find<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

/// Resource attributes that become `job` and `instance`.
const IDENTITY: [&str; 3] = ["service.name", "service.namespace", "service.instance.id"];

fn job_instance(p: &MetricPoint) -> (Option<String>, Option<String>) {
    let r = &p.resource.attributes;
    let job = find(r, "service.name").map(|n| match find(r, "service.namespace").map(label_value) {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", label_value(n)),
        _ => label_value(n),
    });
    (job, find(r, "service.instance.id").map(label_value))
}

/// Labels from attributes: sanitized keys, values of colliding keys joined
/// with `;` in the order of their original keys.
fn attribute_labels(attrs: &[KeyValue]) -> Vec<(String, String)> {
    let mut sorted: Vec<&KeyValue> = attrs.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let mut out: Vec<(String, String)> = Vec::with_capacity(sorted.len());
    for kv in sorted {
        let k = sanitize_label(&kv.key);
        let v = label_value(&kv.value);
        if let Some(e) = out.iter_mut().find(|(n, _)| *n == k) {
            e.1.push(';');
            e.1.push_str(&v);
        } else {
            out.push((k, v));
        }
    }
    out
}

/// The labels every series of this point carries (all but `__name__` and
/// `le`/`quantile`).
fn base_labels(p: &MetricPoint) -> Vec<(String, String)> {
    let mut l = attribute_labels(&p.attributes);
    if !p.scope.name.is_empty() {
        l.push(("otel_scope_name".into(), p.scope.name.clone()));
        if !p.scope.version.is_empty() {
            l.push(("otel_scope_version".into(), p.scope.version.clone()));
        }
    }
    let (job, instance) = job_instance(p);
    if let Some(j) = job {
        l.push(("job".into(), j));
    }
    if let Some(i) = instance {
        l.push(("instance".into(), i));
    }
    l
}

fn with(base: &[(String, String)], name: &str, extra: Option<(&str, String)>) -> Labels {
    let mut pairs: Vec<(String, String)> = base.to_vec();
    pairs.push((NAME.into(), name.into()));
    if let Some((k, v)) = extra {
        pairs.push((k.into(), v));
    }
    Labels::from_pairs(pairs)
}

/// The sample value of a number point (its one sample in [`samples`]): the
/// number, or the staleness marker for a point flagged "no recorded
/// value"; `None` for a point without a value, or not a number point.
pub fn number_value(p: &MetricPoint) -> Option<f64> {
    match &p.value {
        PointValue::Number(n) => number_sample(*n, p.flags),
        _ => None,
    }
}

/// [`number_value`] of a number point's value and flags.
pub fn number_sample(value: Option<Number>, flags: u32) -> Option<f64> {
    if flags & 1 != 0 {
        return Some(f64::from_bits(STALE_NAN_BITS));
    }
    value.map(|n| n.as_f64())
}

/// The Prometheus samples of one point: `(labels, value)`, at the point's
/// time.
pub fn samples(p: &MetricPoint) -> Vec<(Labels, f64)> {
    let Some((name, _)) = prometheus_metric(&p.metric) else {
        return Vec::new();
    };
    let base = base_labels(p);
    let stale = p.flags & 1 != 0;
    let v = |x: f64| if stale { f64::from_bits(STALE_NAN_BITS) } else { x };
    match &p.value {
        PointValue::Number(_) => match number_value(p) {
            Some(x) => vec![(with(&base, &name, None), x)],
            None => Vec::new(),
        },
        PointValue::Histogram(h) => {
            let mut out = Vec::with_capacity(h.bucket_counts.len() + 3);
            let mut cum = 0u64;
            for (i, bound) in h.explicit_bounds.iter().enumerate() {
                cum += h.bucket_counts.get(i).copied().unwrap_or(0);
                out.push((
                    with(&base, &format!("{name}_bucket"), Some(("le", format_float(*bound)))),
                    v(cum as f64),
                ));
            }
            out.push((
                with(&base, &format!("{name}_bucket"), Some(("le", "+Inf".into()))),
                v(h.count as f64),
            ));
            if let Some(s) = h.sum {
                out.push((with(&base, &format!("{name}_sum"), None), v(s)));
            }
            out.push((with(&base, &format!("{name}_count"), None), v(h.count as f64)));
            out
        }
        PointValue::Summary(s) => {
            let mut out: Vec<(Labels, f64)> = s
                .quantiles
                .iter()
                .map(|(q, x)| (with(&base, &name, Some(("quantile", format_float(*q)))), v(*x)))
                .collect();
            out.push((with(&base, &format!("{name}_sum"), None), v(s.sum)));
            out.push((with(&base, &format!("{name}_count"), None), v(s.count as f64)));
            out
        }
        PointValue::ExponentialHistogram(_) => Vec::new(),
    }
}

/// The native histogram sample of an exponential histogram point: its
/// labels, and the histogram (`None`: the point is a staleness marker).
/// `None` for any other point, and for one Prometheus cannot hold.
pub fn native_histogram(p: &MetricPoint) -> Option<(Labels, Option<FloatHistogram>)> {
    let PointValue::ExponentialHistogram(h) = &p.value else {
        return None;
    };
    let (name, _) = prometheus_metric(&p.metric)?;
    let h = FloatHistogram::from_otlp(h)?;
    let labels = with(&base_labels(p), &name, None);
    let stale = p.flags & 1 != 0;
    Some((labels, (!stale).then_some(h)))
}

/// The `target_info` series of the point's resource: `job`, `instance`
/// and every other resource attribute; `None` when there are no others.
pub fn target_info(p: &MetricPoint) -> Option<Labels> {
    let others: Vec<KeyValue> = p
        .resource
        .attributes
        .iter()
        .filter(|kv| !IDENTITY.contains(&kv.key.as_str()))
        .cloned()
        .collect();
    if others.is_empty() {
        return None;
    }
    let mut l = attribute_labels(&others);
    let (job, instance) = job_instance(p);
    if let Some(j) = job {
        l.push(("job".into(), j));
    }
    if let Some(i) = instance {
        l.push(("instance".into(), i));
    }
    l.push((NAME.into(), "target_info".into()));
    Some(Labels::from_pairs(l))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skein_model::metric::HistogramValue;
    use skein_model::{Number, Resource};

    use super::*;

    fn point(name: &str, unit: &str, kind: MetricKind, value: PointValue) -> MetricPoint {
        MetricPoint {
            metric: Arc::new(MetricDesc {
                name: name.into(),
                unit: unit.into(),
                kind,
                ..Default::default()
            }),
            attributes: vec![KeyValue::new("http.method", "GET"), KeyValue::new("http_method", "x")],
            resource: Arc::new(Resource {
                attributes: vec![
                    KeyValue::new("service.name", "api"),
                    KeyValue::new("service.namespace", "shop"),
                    KeyValue::new("service.instance.id", "i-1"),
                    KeyValue::new("host.name", "h1"),
                ],
                ..Default::default()
            }),
            value,
            ..Default::default()
        }
    }

    #[test]
    fn names_get_units_and_total_as_the_spec_says() {
        let sum = MetricKind::Sum {
            temporality: Temporality::Cumulative,
            monotonic: true,
        };
        let p = |n, u, k| {
            prometheus_metric(&MetricDesc {
                name: n,
                unit: u,
                kind: k,
                ..Default::default()
            })
        };
        assert_eq!(
            p("http.server.duration".into(), "s".into(), MetricKind::Gauge)
                .unwrap()
                .0,
            "http_server_duration_seconds"
        );
        assert_eq!(
            p("requests".into(), "{request}".into(), sum).unwrap(),
            ("requests_total".into(), "counter")
        );
        assert_eq!(
            p("cpu.utilization".into(), "1".into(), MetricKind::Gauge).unwrap().0,
            "cpu_utilization_ratio"
        );
        assert_eq!(
            p("speed".into(), "m/s".into(), MetricKind::Gauge).unwrap().0,
            "speed_meters_per_second"
        );
        assert_eq!(
            p("io_bytes_total".into(), "By".into(), sum).unwrap().0,
            "io_bytes_total"
        );
        assert_eq!(
            p("mem_bytes".into(), "By".into(), MetricKind::Gauge).unwrap().0,
            "mem_bytes"
        );
        assert_eq!(
            p("foo__bar:x".into(), "".into(), MetricKind::Gauge).unwrap().0,
            "foo__bar:x"
        );
        assert!(may_be_named(
            "http.server.duration",
            "http_server_duration_seconds_bucket"
        ));
        assert!(!may_be_named(
            "http.client.duration",
            "http_server_duration_seconds_bucket"
        ));
        assert_eq!(sanitize_label("0day"), "key_0day");
    }

    #[test]
    fn a_histogram_is_buckets_sum_and_count_with_job_and_instance() {
        let h = point(
            "latency",
            "ms",
            MetricKind::Histogram {
                temporality: Temporality::Cumulative,
            },
            PointValue::Histogram(HistogramValue {
                count: 6,
                sum: Some(42.5),
                bucket_counts: vec![1, 2, 3],
                explicit_bounds: vec![10.0, 100.0],
                ..Default::default()
            }),
        );
        let s = samples(&h);
        let names: Vec<String> = s
            .iter()
            .map(|(l, v)| format!("{}{{le={}}}={v}", l.get(NAME).unwrap(), l.get("le").unwrap_or("")))
            .collect();
        assert_eq!(
            names,
            [
                "latency_milliseconds_bucket{le=10}=1",
                "latency_milliseconds_bucket{le=100}=3",
                "latency_milliseconds_bucket{le=+Inf}=6",
                "latency_milliseconds_sum{le=}=42.5",
                "latency_milliseconds_count{le=}=6"
            ]
        );
        let l = &s[0].0;
        assert_eq!(l.get("job"), Some("shop/api"));
        assert_eq!(l.get("instance"), Some("i-1"));
        assert_eq!(l.get("http_method"), Some("GET;x"));
        assert_eq!(l.get("host_name"), None);
        let ti = target_info(&h).unwrap();
        assert_eq!(ti.get("host_name"), Some("h1"));
        assert_eq!(ti.get("job"), Some("shop/api"));
    }

    #[test]
    fn no_recorded_value_is_a_staleness_marker() {
        let mut g = point("g", "", MetricKind::Gauge, PointValue::Number(Some(Number::Int(3))));
        g.flags = 1;
        assert!(crate::is_stale_nan(samples(&g)[0].1));
        let delta = point(
            "d",
            "",
            MetricKind::Sum {
                temporality: Temporality::Delta,
                monotonic: true,
            },
            PointValue::Number(Some(Number::Int(3))),
        );
        assert!(samples(&delta).is_empty());
    }
}
