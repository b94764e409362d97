//! Time series for charts: `/api/v1/series/services` (per service: spans,
//! errors and p95 per bucket), `/api/v1/series/logs` (log counts per
//! severity band per bucket, of the logs a search with the same filters
//! finds) and `/api/v1/metrics/names` (the metric
//! catalogue). The web UI's sparklines, severity histogram and metric
//! picker read them; they are as public as the rest of the API.

use std::sync::Arc;

use axum::extract::{Query, State};
use serde_json::{Value, json};
use skein_engine::{Buckets, LogQuery};

use super::handlers::{Q, log_filters, window_json, window_param, with_explain};
use super::params::Params;
use super::{ApiError, ApiResult, blocking};
use crate::app::App;
use crate::tenancy::Tenant;

/// Buckets per series unless `points=` says otherwise, and the most.
const DEFAULT_POINTS: usize = 60;
const MAX_POINTS: usize = 360;

fn points(p: &mut Params) -> Result<usize, ApiError> {
    let n = p
        .parse("points", |v| {
            v.parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_POINTS).contains(n))
                .ok_or_else(|| format!("must be a number from 1 to {MAX_POINTS}"))
        })?
        .unwrap_or(DEFAULT_POINTS);
    Ok(n)
}

/// The time axis: where each bucket starts, and how wide they are.
fn axis(b: Buckets) -> Value {
    json!({
        "window": window_json(b.window()),
        "step_ns": b.width_ns(),
        "times_unix_nano": (0..b.count).map(|i| b.start_of(i)).collect::<Vec<_>>(),
    })
}

pub async fn services(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, Some("1h"))?;
    let points = points(&mut p)?;
    let service = p.get("service");
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "series_services", move |e| {
        let (b, series, ex) = e.service_series(w, points, service.as_deref())?;
        let mut v = axis(b);
        v["services"] = serde_json::to_value(series).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(with_explain(v, explain, &ex))
    })
    .await
}

pub async fn logs(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let window = window_param(&mut p, Some("1h"))?;
    let points = points(&mut p)?;
    // The filters of a log search, so the histogram counts what the list
    // below it pages through.
    let q = LogQuery {
        window,
        ..log_filters(&mut p)?
    };
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "series_logs", move |e| {
        let (b, by, ex) = e.log_series(&q, points)?;
        let mut v = axis(b);
        v["severities"] = serde_json::to_value(by).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(with_explain(v, explain, &ex))
    })
    .await
}

pub async fn metric_names(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    p.finish()?;
    blocking(&app, &tenant, "metric_names", move |e| {
        Ok(json!({"window": window_json(w), "metrics": e.metric_names(w)}))
    })
    .await
}
