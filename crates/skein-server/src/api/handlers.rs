//! Handlers of the query endpoints.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use serde_json::{Value, json};
use skein_engine::{Cursor, Engine, LogQuery, MetricQuery, SpanQuery, TextQuery, Window};
use skein_model::{SpanKind, StatusCode, TraceId};

use super::params::{Params, now_ns, parse_duration};
use super::{ApiError, ApiResult, JsonBytes, blocking, blocking_bytes, inline_bytes, to_json_bytes, views};
use crate::app::App;
use crate::tenancy::Tenant;

pub(super) type Q = Query<Vec<(String, String)>>;

fn trace_id(s: &str) -> Result<TraceId, ApiError> {
    TraceId::from_hex(s).map_err(|e| ApiError::bad_request(&e.to_string()))
}

fn cursor(p: &mut Params) -> Result<Option<Cursor>, ApiError> {
    p.parse("cursor", |v| v.parse::<Cursor>())
}

pub(super) fn with_explain(mut v: Value, explain: bool, e: &skein_engine::Explain) -> Value {
    if let Some(x) = explain_value(explain, e) {
        v["explain"] = x;
    }
    v
}

fn explain_value(explain: bool, e: &skein_engine::Explain) -> Option<Value> {
    explain.then(|| serde_json::to_value(e).unwrap_or(Value::Null))
}

pub(super) fn span_query(p: &mut Params) -> Result<SpanQuery, ApiError> {
    let window = p.window()?.unwrap_or_default();
    Ok(SpanQuery {
        service: p.get("service"),
        name: p.get("name"),
        name_contains: p.get("name_contains"),
        kind: p.parse("kind", |v| {
            SpanKind::parse(v).ok_or_else(|| "must be internal, server, client, producer or consumer".to_string())
        })?,
        status: p.parse("status", |v| {
            StatusCode::parse(v).ok_or_else(|| "must be unset, ok or error".to_string())
        })?,
        min_duration_ns: p.parse("min_duration", parse_duration)?.map(|d| d.as_nanos() as u64),
        max_duration_ns: p.parse("max_duration", parse_duration)?.map(|d| d.as_nanos() as u64),
        window,
        trace_id: p.parse("trace_id", |v| TraceId::from_hex(v).map_err(|e| e.to_string()))?,
        root_only: p.flag("root")?,
        attributes: p.attributes(),
        text: text_param(p)?,
        limit: p.limit(100, 10_000)?,
        cursor: cursor(p)?,
        payload_text: None,
    })
}

/// `text=`: a full-text query (words, "phrases", prefix*, AND/OR/NOT,
/// body:/name:/message:/payload:). A syntax error names its position.
fn text_param(p: &mut Params) -> Result<Option<TextQuery>, ApiError> {
    p.parse("text", |v| TextQuery::parse(v).map_err(|e| e.to_string()))
}

/// Each record's JSON with the `highlights` of `text` on it.
fn with_highlights<R: skein_engine::TextRecord>(
    e: &Engine,
    text: Option<&TextQuery>,
    records: &[Arc<R>],
    mut views: Vec<Value>,
) -> Vec<Value> {
    if let Some(q) = text {
        for (v, r) in views.iter_mut().zip(records) {
            v["highlights"] = serde_json::to_value(e.text_highlights(q, &**r)).unwrap_or(Value::Null);
        }
    }
    views
}

/// `payloads=ref` (the default: big values as `{"$payload", "bytes",
/// "preview"}` references) or `payloads=inline` (the values themselves).
pub(super) fn inline_payloads(p: &mut Params) -> Result<bool, ApiError> {
    match p.get("payloads").as_deref() {
        None | Some("ref") => Ok(false),
        Some("inline") => Ok(true),
        Some(_) => Err(ApiError::bad_param("payloads", "must be ref or inline")),
    }
}

/// `records`, with their payloads put back when `inline` is set.
pub(super) fn with_payloads<R: skein_engine::Record>(
    e: &Engine,
    inline: bool,
    records: Vec<Arc<R>>,
) -> Result<Vec<Arc<R>>, ApiError> {
    if !inline {
        return Ok(records);
    }
    records.iter().map(|r| Ok(Arc::new(e.inline_payloads(&**r)?))).collect()
}

/// Traces of at most this many stored span versions are looked up on the
/// I/O thread (see [`super::inline_bytes`]): decoding them takes a fraction
/// of a millisecond (0.2 ms for 10 spans from a compacted part here).
/// Bigger ones go to the blocking pool, so a huge trace never stalls the
/// other connections of its thread.
const INLINE_TRACE_ROWS: usize = 128;

pub async fn get_trace(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    Path(id): Path<String>,
    Query(q): Q,
) -> Result<JsonBytes, ApiError> {
    let tid = trace_id(&id)?;
    let mut p = Params::new(q);
    let format = p.get("format").unwrap_or_else(|| "skein".into());
    let explain = p.flag("explain")?;
    let inline = inline_payloads(&mut p)?;
    p.finish()?;
    if format != "skein" && format != "otlp" {
        return Err(ApiError::bad_param("format", "must be skein or otlp"));
    }
    let lookup = move |e: &Engine| {
        let mut t = e.get_trace(tid)?;
        if t.spans.is_empty() {
            return Err(ApiError::not_found(format!("trace {id} not found")));
        }
        t.spans = with_payloads(e, inline, t.spans)?;
        if format == "otlp" {
            let spans: Vec<skein_model::Span> = t.spans.iter().map(|s| (**s).clone()).collect();
            let v = super::otlp_json::trace_request(&skein_model::otlp::spans_to_otlp(&spans))
                .map_err(|e| ApiError::internal(e.to_string()))?;
            return to_json_bytes(&with_explain(v, explain, &t.explain));
        }
        let hex = tid.to_hex();
        let mut view = views::TraceJson::new(&hex, &t.spans);
        view.explain = explain_value(explain, &t.explain);
        to_json_bytes(&view)
    };
    let space = super::space(&app, &tenant).await?;
    if space.engine.trace_rows_upper_bound(tid) <= INLINE_TRACE_ROWS {
        inline_bytes(&app, &space.engine, "trace", lookup)
    } else {
        blocking_bytes(&app, &tenant, "trace", lookup).await
    }
}

/// Traces with at least one span matching the filters, newest first.
pub async fn list_traces(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let query = span_query(&mut p)?;
    let explain = p.flag("explain")?;
    p.finish()?;
    let want = query.limit;
    blocking(&app, &tenant, "traces", move |e| {
        let mut ids: Vec<TraceId> = Vec::new();
        let mut seen = HashSet::new();
        // A trace with a matching span newer than the cursor was listed on
        // an earlier page: it must not be listed again.
        let resumed_at = query.cursor.map(|c| (c.time, c.key));
        let listed_before = |t: TraceId| -> Result<bool, ApiError> {
            let Some(at) = resumed_at else { return Ok(false) };
            let mut probe = query.clone();
            probe.trace_id = Some(t);
            probe.cursor = None;
            probe.limit = 1;
            Ok(e.search_spans(&probe)?.records.first().is_some_and(|s| {
                let key = skein_engine::RecordKey {
                    hi: s.trace_id.as_u128(),
                    lo: s.span_id.as_u64(),
                };
                (s.start_time_unix_nano, key) >= at
            }))
        };
        let mut query = query.clone();
        query.limit = (want * 4).max(100);
        // The cursor after the last listed trace, offered only once one more
        // trace is known to follow (no empty last page).
        let mut candidate = None;
        let mut next = None;
        let mut last_explain: Option<skein_engine::Explain>;
        'pages: loop {
            let r = e.search_spans(&query)?;
            for s in &r.records {
                if seen.insert(s.trace_id) && !listed_before(s.trace_id)? {
                    if ids.len() == want {
                        next = candidate;
                        last_explain = Some(r.explain);
                        break 'pages;
                    }
                    ids.push(s.trace_id);
                    if ids.len() == want {
                        candidate = Some(Cursor {
                            time: s.start_time_unix_nano,
                            key: skein_engine::RecordKey {
                                hi: s.trace_id.as_u128(),
                                lo: s.span_id.as_u64(),
                            },
                        });
                    }
                }
            }
            last_explain = Some(r.explain);
            match r.next_cursor {
                Some(c) => query.cursor = Some(c),
                None => break,
            }
        }
        let traces: Vec<Value> = ids
            .iter()
            .map(|t| e.get_trace(*t).map(|r| views::trace_summary(&r.spans)))
            .collect::<Result<_, _>>()?;
        let mut v = json!({"traces": traces, "next_cursor": next.map(|c: Cursor| c.to_string())});
        if let Some(ex) = last_explain {
            v = with_explain(v, explain, &ex);
        }
        Ok(v)
    })
    .await
}

pub async fn search_spans(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> Result<JsonBytes, ApiError> {
    let mut p = Params::new(q);
    let query = span_query(&mut p)?;
    let explain = p.flag("explain")?;
    let inline = inline_payloads(&mut p)?;
    p.finish()?;
    blocking_bytes(&app, &tenant, "spans", move |e| {
        let r = e.search_spans(&query)?;
        let spans = with_payloads(e, inline, r.records)?;
        let page = views::SpansPage {
            spans: &spans,
            next_cursor: r.next_cursor.map(|c| c.to_string()),
            explain: explain_value(explain, &r.explain),
        };
        if let Some(text) = &query.text {
            // Each span with its highlights.
            let mut v = serde_json::to_value(&page).map_err(|e| ApiError::internal(e.to_string()))?;
            if let Some(Value::Array(views)) = v.get_mut("spans").map(Value::take) {
                v["spans"] = with_highlights(e, Some(text), &spans, views).into();
            }
            return to_json_bytes(&v);
        }
        to_json_bytes(&views::SpansPage {
            spans: &spans,
            next_cursor: page.next_cursor,
            explain: page.explain,
        })
    })
    .await
}

pub(super) fn log_query(p: &mut Params) -> Result<LogQuery, ApiError> {
    let window = p.window()?.unwrap_or_default();
    Ok(LogQuery {
        window,
        limit: p.limit(100, 10_000)?,
        cursor: cursor(p)?,
        ..log_filters(p)?
    })
}

/// A log search's filters (`service`, `severity`, `trace_id`, `span_id`,
/// `body_contains` or `q`, attributes, `text`): its window, limit and
/// cursor left to the caller.
pub(super) fn log_filters(p: &mut Params) -> Result<LogQuery, ApiError> {
    Ok(LogQuery {
        service: p.get("service"),
        min_severity: p.parse("severity", |v| {
            skein_model::log::parse_severity(v)
                .ok_or_else(|| "must be trace, debug, info, warn, error, fatal or 0-24".to_string())
        })?,
        trace_id: p.parse("trace_id", |v| TraceId::from_hex(v).map_err(|e| e.to_string()))?,
        span_id: p.parse("span_id", |v| {
            skein_model::SpanId::from_hex(v).map_err(|e| e.to_string())
        })?,
        body_contains: p.get("body_contains").or(p.get("q")),
        attributes: p.attributes(),
        text: text_param(p)?,
        ..Default::default()
    })
}

pub async fn search_logs(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let query = log_query(&mut p)?;
    let explain = p.flag("explain")?;
    let inline = inline_payloads(&mut p)?;
    p.finish()?;
    blocking(&app, &tenant, "logs", move |e| {
        let r = e.search_logs(&query)?;
        let logs = with_payloads(e, inline, r.records)?;
        let views = logs.iter().map(|l| views::log(l)).collect();
        let v = json!({
            "logs": with_highlights(e, query.text.as_ref(), &logs, views),
            "next_cursor": r.next_cursor.map(|c| c.to_string()),
        });
        Ok(with_explain(v, explain, &r.explain))
    })
    .await
}

pub async fn search_metrics(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let window = p.window()?.unwrap_or_default();
    let query = MetricQuery {
        name: p.get("name"),
        service: p.get("service"),
        attributes: p.attributes(),
        window,
        limit: p.limit(100, 10_000)?,
        cursor: cursor(&mut p)?,
    };
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "metrics", move |e| {
        let r = e.search_metrics(&query)?;
        let v = json!({
            "points": r.records.iter().map(|m| views::metric_point(m)).collect::<Vec<_>>(),
            "next_cursor": r.next_cursor.map(|c| c.to_string()),
        });
        Ok(with_explain(v, explain, &r.explain))
    })
    .await
}

pub(super) fn window_param(p: &mut Params, default_last: Option<&str>) -> Result<Window, ApiError> {
    if let Some(w) = p.window()? {
        return Ok(w);
    }
    if let Some(d) = default_last {
        let now = now_ns();
        let d = parse_duration(d).map_err(ApiError::internal)?;
        return Ok(Window::new(now.saturating_sub(d.as_nanos() as u64), now));
    }
    Ok(Window::ALL)
}

pub(super) fn window_json(w: Window) -> Value {
    json!({
        "start_unix_nano": w.start,
        "end_unix_nano": if w.end == u64::MAX { Value::Null } else { w.end.into() },
    })
}

pub async fn services(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "services", move |e| {
        let (s, ex) = e.services(w)?;
        Ok(with_explain(
            json!({"window": window_json(w), "services": s}),
            explain,
            &ex,
        ))
    })
    .await
}

pub async fn operations(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    Path(service): Path<String>,
    Query(q): Q,
) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "operations", move |e| {
        let (ops, ex) = e.operations(Some(&service), w)?;
        Ok(with_explain(
            json!({"service": service, "window": window_json(w), "operations": ops}),
            explain,
            &ex,
        ))
    })
    .await
}

/// `summary` diagnoses at most the last day of its window, and lists this
/// many findings.
const SUMMARY_LOOKBACK_NS: u64 = 86_400_000_000_000;
const SUMMARY_FINDINGS: usize = 3;

pub async fn summary(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, Some("1h"))?;
    let service = p.get("service");
    let explain = p.flag("explain")?;
    // `findings=false` leaves the diagnosis out: the UI's overview asks
    // for it separately, and it is most of the answer's cost.
    let findings = p.flag_or("findings", true)?;
    p.finish()?;
    blocking(&app, &tenant, "summary", move |e| {
        let (s, ex) = e.summary(w, service.as_deref())?;
        let mut v = serde_json::to_value(&s).map_err(|e| ApiError::internal(e.to_string()))?;
        v["window"] = window_json(w);
        // The top findings of a diagnosis over the window (its last day at
        // most): what changed, and why.
        let end = w.end.min(now_ns());
        let lookback = Window::new(w.start.max(end.saturating_sub(SUMMARY_LOOKBACK_NS)), end);
        if !findings {
            // Absent rather than empty: nothing was looked for.
        } else if lookback.start < lookback.end {
            let (d, _) = e.diagnose(&skein_engine::DiagnoseRequest {
                window: lookback,
                split_at: None,
                service,
                limit: SUMMARY_FINDINGS,
                explain: false,
            })?;
            v["findings"] = serde_json::to_value(&d.findings).map_err(|e| ApiError::internal(e.to_string()))?;
        } else {
            v["findings"] = json!([]);
        }
        Ok(with_explain(v, explain, &ex))
    })
    .await
}

/// The longest look-back a diagnosis takes.
const MAX_LOOKBACK: std::time::Duration = std::time::Duration::from_secs(31 * 86_400);
/// How far past the server's clock `until` may be (clock skew).
const FUTURE_SLACK_NS: u64 = 60_000_000_000;

pub async fn anomalies(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let lookback = p.parse("lookback", parse_duration)?;
    let last = p.parse("last", parse_duration)?;
    let baseline = p.parse("baseline", parse_duration)?;
    let now = now_ns();
    let until = p.parse("until", super::params::parse_time)?.unwrap_or(now);
    let service = p.get("service");
    let limit = p.limit(10, 100)?;
    let explain = p.flag("explain")?;
    p.finish()?;
    if until > now.saturating_add(FUTURE_SLACK_NS) {
        return Err(ApiError::bad_request(
            "until is in the future: nothing can be known about it yet",
        ));
    }
    let positive = |name: &str, d: std::time::Duration| -> Result<u64, ApiError> {
        if d.is_zero() {
            return Err(ApiError::bad_request(&format!("{name} must be longer than zero")));
        }
        if d > MAX_LOOKBACK {
            return Err(ApiError::bad_request(&format!(
                "{name} is longer than the 31 days a diagnosis looks back"
            )));
        }
        Ok(d.as_nanos() as u64)
    };
    let fixed = last.is_some() || baseline.is_some();
    if fixed && lookback.is_some() {
        return Err(ApiError::bad_request(
            "lookback searches for the change point; last/baseline fix it: give one or the other",
        ));
    }
    let (window, split_at) = if fixed {
        let last = positive("last", last.unwrap_or(std::time::Duration::from_secs(300)))?;
        let baseline = positive("baseline", baseline.unwrap_or(std::time::Duration::from_secs(1800)))?;
        let split = until.saturating_sub(last);
        (Window::new(split.saturating_sub(baseline), until), Some(split))
    } else {
        let lookback = positive("lookback", lookback.unwrap_or(std::time::Duration::from_secs(3600)))?;
        (Window::new(until.saturating_sub(lookback), until), None)
    };
    let req = skein_engine::DiagnoseRequest {
        window,
        split_at,
        service,
        limit,
        explain,
    };
    blocking(&app, &tenant, "anomalies", move |e| {
        let (d, ex) = e.diagnose(&req)?;
        let mut v = serde_json::to_value(&d).map_err(|e| ApiError::internal(e.to_string()))?;
        v["window"] = window_json(d.window);
        v["mode"] = json!(if split_at.is_some() {
            "fixed_split"
        } else {
            "change_detection"
        });
        if let Some(split) = split_at {
            v["baseline"] = window_json(Window::new(window.start, split));
            v["current"] = window_json(Window::new(split, window.end));
        }
        Ok(with_explain(v, explain, &ex))
    })
    .await
}

/// Metric points around a trace are looked for this far outside its span
/// (metrics are usually exported every 10–60 s).
const CORRELATE_MARGIN_NS: u64 = 60_000_000_000;

pub async fn correlate(State(app): State<Arc<App>>, tenant: Tenant, Path(id): Path<String>, Query(q): Q) -> ApiResult {
    let tid = trace_id(&id)?;
    let mut p = Params::new(q);
    let inline = inline_payloads(&mut p)?;
    p.finish()?;
    blocking(&app, &tenant, "correlate", move |e: &Engine| {
        let mut t = e.get_trace(tid)?;
        if t.spans.is_empty() {
            return Err(ApiError::not_found(format!("trace {id} not found")));
        }
        t.spans = with_payloads(e, inline, t.spans)?;
        let logs = with_payloads(e, inline, e.trace_logs(tid)?)?;
        let start = t.spans.iter().map(|s| s.start_time_unix_nano).min().unwrap_or(0);
        let end = t.spans.iter().map(|s| s.end_time_unix_nano).max().unwrap_or(0);
        let services: std::collections::BTreeSet<String> =
            t.spans.iter().map(|s| s.service_name().to_string()).collect();
        let w = Window::new(
            start.saturating_sub(CORRELATE_MARGIN_NS),
            end.saturating_add(CORRELATE_MARGIN_NS),
        );
        let mut metrics = Vec::new();
        for svc in &services {
            let r = e.search_metrics(&MetricQuery {
                service: Some(svc.clone()),
                window: w,
                limit: 1000,
                ..Default::default()
            })?;
            metrics.extend(r.records.iter().map(|m| views::metric_point(m)));
        }
        Ok(json!({
            "trace": views::trace(&tid.to_hex(), &t.spans),
            "logs": logs.iter().map(|l| views::log(l)).collect::<Vec<_>>(),
            "metrics": metrics,
            "metrics_window": window_json(w),
        }))
    })
    .await
}

pub async fn stats(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    Params::new(q).finish()?;
    let uptime = app.metrics.started.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0);
    let data_dir = app.config.data_dir.display().to_string();
    blocking(&app, &tenant, "stats", move |e| {
        let s = e.stats();
        let mut v = serde_json::to_value(&s).map_err(|e| ApiError::internal(e.to_string()))?;
        v["uptime_seconds"] = uptime.into();
        v["resident_memory_bytes"] = crate::metrics::resident_bytes().into();
        v["bytes_on_disk"] = (s.part_bytes + s.wal_bytes + s.payloads.payload_bytes).into();
        v["records"] = (s.spans + s.logs + s.metric_points).into();
        v["data_dir"] = data_dir.into();
        v["retention_policy"] = e.options().retention.to_string().into();
        v["disk_free_bytes"] = s.retention.disk_free_bytes.into();
        v["min_free_disk_bytes"] = s.retention.min_free_disk_bytes.into();
        v["version"] = env!("CARGO_PKG_VERSION").into();
        Ok(v)
    })
    .await
}
