//! Results in the Prometheus HTTP API's JSON: timestamps as seconds (a
//! number), values as strings formatted as Go's `FormatFloat(v, 'f', -1)`
//! ("NaN", "+Inf", "-Inf" spelled as Prometheus spells them).

use serde_json::{Map, Value as Json, json};

use crate::eval::Value;
use crate::format_float;
use crate::{Error, FloatHistogram, Labels, Series};

pub fn labels(l: &Labels) -> Json {
    Json::Object(
        l.pairs()
            .iter()
            .map(|(k, v)| (k.clone(), Json::String(v.clone())))
            .collect::<Map<_, _>>(),
    )
}

fn ts(t: i64) -> Json {
    json!(t as f64 / 1000.0)
}

fn point(t: i64, v: f64) -> Json {
    json!([ts(t), format_float(v)])
}

/// A native histogram: its count, sum and non-empty buckets as
/// `[boundary rule, lower, upper, count]`.
pub fn histogram(h: &FloatHistogram) -> Json {
    let buckets: Vec<Json> = h
        .buckets()
        .iter()
        .filter(|b| b.count != 0.0)
        .map(|b| {
            json!([
                b.boundary_rule(),
                format_float(b.lower),
                format_float(b.upper),
                format_float(b.count)
            ])
        })
        .collect();
    json!({"count": format_float(h.count), "sum": format_float(h.sum), "buckets": buckets})
}

fn histogram_point(t: i64, h: &FloatHistogram) -> Json {
    json!([ts(t), histogram(h)])
}

fn matrix(series: &[Series]) -> Json {
    Json::Array(
        series
            .iter()
            .map(|s| {
                let mut o = Map::new();
                o.insert("metric".into(), labels(&s.labels));
                // Each key only when the series has samples of its kind,
                // as Prometheus answers.
                if !s.samples.is_empty() || s.histograms.is_empty() {
                    let values = s.samples.iter().map(|(t, v)| point(*t, *v)).collect();
                    o.insert("values".into(), Json::Array(values));
                }
                if !s.histograms.is_empty() {
                    let hs = s.histograms.iter().map(|(t, h)| histogram_point(*t, h)).collect();
                    o.insert("histograms".into(), Json::Array(hs));
                }
                Json::Object(o)
            })
            .collect(),
    )
}

/// `data` of an instant query's answer at `t`.
pub fn instant_data(v: &Value, t: i64) -> Json {
    match v {
        Value::Scalar(x) => json!({"resultType": "scalar", "result": point(t, *x)}),
        Value::String(s) => json!({"resultType": "string", "result": [ts(t), s]}),
        Value::Vector(v) => json!({
            "resultType": "vector",
            "result": v.iter().map(|s| match &s.histogram {
                Some(h) => json!({"metric": labels(&s.labels), "histogram": histogram_point(t, h)}),
                None => json!({"metric": labels(&s.labels), "value": point(t, s.value)}),
            }).collect::<Vec<_>>(),
        }),
        Value::Matrix { series, .. } => json!({"resultType": "matrix", "result": matrix(series)}),
    }
}

/// `data` of a range query's answer.
pub fn range_data(series: &[Series]) -> Json {
    json!({"resultType": "matrix", "result": matrix(series)})
}

pub fn success(data: Json) -> Json {
    json!({"status": "success", "data": data})
}

pub fn error(e: &Error) -> Json {
    json!({"status": "error", "errorType": e.error_type(), "error": e.message()})
}

/// The HTTP status of an error, as Prometheus answers it.
pub fn status(e: &Error) -> u16 {
    match e {
        Error::BadData(_) => 400,
        Error::Execution(_) => 422,
        Error::Internal(_) => 500,
    }
}
