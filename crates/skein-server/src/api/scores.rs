//! `POST /api/v1/scores` (a judgement of a trace, span or session, stored
//! as a `gen_ai.evaluation.result` event without touching the span) and
//! `GET /api/v1/scores`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::extract::{Query, State};
use serde_json::{Value, json};
use skein_model::genai::score::{SOURCES, Score};
use skein_model::{AnyValue, SpanId, TraceId};

use super::handlers::Q;
use super::params::{Params, now_ns};
use super::{ApiError, ApiResult, blocking};
use crate::app::App;
use crate::tenancy::Tenant;

const FIELDS: &[&str] = &[
    "trace_id",
    "span_id",
    "session_id",
    "name",
    "value",
    "comment",
    "source",
];

/// A posted score, checked field by field.
struct NewScore {
    trace_id: TraceId,
    span_id: Option<SpanId>,
    session_id: Option<String>,
    name: String,
    value: AnyValue,
    comment: Option<String>,
    source: String,
}

fn field_error(field: &str, problem: &str) -> ApiError {
    ApiError::bad_request(&format!("field {field}: {problem}"))
}

fn parse(body: &Value) -> Result<NewScore, ApiError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ApiError::bad_request("a score is a JSON object"))?;
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(field_error(
            unknown,
            &format!("unknown field (known: {})", FIELDS.join(", ")),
        ));
    }
    let opt_str = |k: &str| -> Result<Option<String>, ApiError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(field_error(k, "must be a string")),
        }
    };
    let trace_id = opt_str("trace_id")?.ok_or_else(|| field_error("trace_id", "required (32 hex digits)"))?;
    let trace_id = TraceId::from_hex(&trace_id).map_err(|e| field_error("trace_id", &e.to_string()))?;
    let span_id = opt_str("span_id")?
        .map(|s| SpanId::from_hex(&s).map_err(|e| field_error("span_id", &e.to_string())))
        .transpose()?;
    let name = opt_str("name")?
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| field_error("name", "required, a non-empty string"))?;
    let value = match obj.get("value") {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() => AnyValue::Double(f),
            _ => return Err(field_error("value", "not a finite number")),
        },
        Some(Value::String(s)) => AnyValue::Str(s.clone()),
        Some(Value::Bool(b)) => AnyValue::Bool(*b),
        None | Some(Value::Null) => return Err(field_error("value", "required: a number, a string or a bool")),
        Some(_) => return Err(field_error("value", "must be a number, a string or a bool")),
    };
    let source = opt_str("source")?.unwrap_or_else(|| "api".into());
    if !SOURCES.contains(&source.as_str()) {
        return Err(field_error("source", &format!("must be one of {}", SOURCES.join(", "))));
    }
    Ok(NewScore {
        trace_id,
        span_id,
        session_id: opt_str("session_id")?,
        name,
        value,
        comment: opt_str("comment")?,
        source,
    })
}

/// A score id: the time and a counter, hashed with the score under a key
/// random to this process, so ids do not repeat across restarts either.
fn new_id(s: &NewScore, now: u64) -> String {
    use std::hash::BuildHasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEY: std::sync::LazyLock<std::hash::RandomState> = std::sync::LazyLock::new(std::hash::RandomState::new);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let h = KEY.hash_one((now, n, s.trace_id.as_u128(), &s.name));
    format!("{h:016x}")
}

pub async fn post(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q, Json(body): Json<Value>) -> ApiResult {
    let mut p = Params::new(q);
    let allow_unknown = p.flag("allow_unknown_trace")?;
    p.finish()?;
    let score = parse(&body)?;
    blocking(&app, &tenant, "scores_post", move |e| {
        if !allow_unknown && e.trace_rows_upper_bound(score.trace_id) == 0 {
            return Err(ApiError::not_found(format!(
                "trace {} not found (add ?allow_unknown_trace=true to score it anyway)",
                score.trace_id.to_hex()
            )));
        }
        let now = now_ns();
        let id = new_id(&score, now);
        let record = Score::record(
            &id,
            score.trace_id,
            score.span_id,
            score.session_id.as_deref(),
            &score.name,
            &score.value,
            score.comment.as_deref(),
            &score.source,
            now,
        );
        let report = e.ingest_logs(vec![record])?;
        if report.accepted != 1 {
            return Err(ApiError::bad_request(&report.errors.join("; ")));
        }
        Ok(json!({"id": id}))
    })
    .await
}

pub async fn list(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let trace_id = p.parse("trace_id", |v| TraceId::from_hex(v).map_err(|e| e.to_string()))?;
    let session_id = p.get("session_id");
    let name = p.get("name");
    let limit = p.limit(1000, 10_000)?;
    let w = super::handlers::window_param(&mut p, None)?;
    p.finish()?;
    blocking(&app, &tenant, "scores", move |e| {
        let scores = e.scores(trace_id, session_id.as_deref(), name.as_deref(), w, limit)?;
        Ok(json!({"scores": scores}))
    })
    .await
}
