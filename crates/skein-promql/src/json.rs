//! Results in the Prometheus HTTP API's JSON: timestamps as seconds (a
//! number), values as strings formatted as Go's `FormatFloat(v, 'f', -1)`
//! ("NaN", "+Inf", "-Inf" spelled as Prometheus spells them).

use serde_json::{Map, Value as Json, json};

use crate::eval::Value;
use crate::format_float;
use crate::{Error, Labels, Series};

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

fn matrix(series: &[Series]) -> Json {
    Json::Array(
        series
            .iter()
            .map(|s| {
                json!({
                    "metric": labels(&s.labels),
                    "values": s.samples.iter().map(|(t, v)| point(*t, *v)).collect::<Vec<_>>(),
                })
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
            "result": v.iter().map(|s| json!({"metric": labels(&s.labels), "value": point(t, s.value)})).collect::<Vec<_>>(),
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
