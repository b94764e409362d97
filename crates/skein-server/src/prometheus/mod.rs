//! The Prometheus-compatible API under `/prometheus`, so Grafana (or any
//! Prometheus client) can use Skein as a Prometheus data source:
//!
//! - `api/v1/query`, `api/v1/query_range`: PromQL (see `skein-promql`);
//! - `api/v1/series`, `api/v1/labels`, `api/v1/label/{name}/values`,
//!   `api/v1/metadata`, `api/v1/status/buildinfo`;
//! - `api/v1/write`: remote write 1.0 intake ([`remote_write`]).
//!
//! Reads take GET parameters or a form POST, and answer in the Prometheus
//! HTTP API's JSON: `{"status": "success", "data": …}`, or
//! `{"status": "error", "errorType": …, "error": …}` with Prometheus's
//! status (400 `bad_data`, 422 `execution`, 500 `internal`, 503
//! `unavailable`).

pub(crate) mod label_cache;
pub mod remote_write;
pub mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use skein_engine::MetricQuery;
use skein_promql::eval::{self, Options};
use skein_promql::params::{parse_duration, parse_time};
use skein_promql::{Error, Labels, Matcher, SampleValue, json as pjson, naming};

use crate::app::App;
use crate::http_ingest;
use crate::ingest::{IngestError, Metrics};
use crate::tenancy::{Space, Tenant};
use source::EngineSource;

/// Every route, for the docs and the tests.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET, POST", "/prometheus/api/v1/query"),
    ("GET, POST", "/prometheus/api/v1/query_range"),
    ("GET, POST", "/prometheus/api/v1/series"),
    ("GET, POST", "/prometheus/api/v1/labels"),
    ("GET", "/prometheus/api/v1/label/{name}/values"),
    ("GET", "/prometheus/api/v1/metadata"),
    ("GET", "/prometheus/api/v1/status/buildinfo"),
    ("POST", "/prometheus/api/v1/write"),
];

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/prometheus/api/v1/query", get(query).post(query))
        .route("/prometheus/api/v1/query_range", get(query_range).post(query_range))
        .route("/prometheus/api/v1/series", get(series).post(series))
        .route("/prometheus/api/v1/labels", get(labels).post(labels))
        .route("/prometheus/api/v1/label/{name}/values", get(label_values))
        .route("/prometheus/api/v1/metadata", get(metadata))
        .route("/prometheus/api/v1/status/buildinfo", get(buildinfo))
        .route("/prometheus/api/v1/write", post(write))
}

/// The version reported to clients: the Prometheus API version Skein
/// answers like (Grafana picks its features by it).
const PROMETHEUS_VERSION: &str = "2.42.0";

fn error_response(e: &Error) -> Response {
    let status = StatusCode::from_u16(pjson::status(e)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(pjson::error(e))).into_response()
}

fn unavailable(message: String) -> Response {
    let mut r = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({"status": "error", "errorType": "unavailable", "error": message})),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    r
}

/// Request parameters from the query string and a form body, in order.
struct Params(Vec<(String, String)>);

impl Params {
    fn new(method: &Method, query: Option<String>, headers: &HeaderMap, body: &[u8]) -> Result<Params, Error> {
        let mut all: Vec<(String, String)> = match query {
            Some(q) => {
                serde_urlencoded::from_str(&q).map_err(|e| Error::BadData(format!("invalid query string: {e}")))?
            }
            None => Vec::new(),
        };
        if method == Method::POST && !body.is_empty() {
            let form = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
            if !form {
                return Err(Error::BadData(
                    "a POST must send its parameters as application/x-www-form-urlencoded".into(),
                ));
            }
            let parsed: Vec<(String, String)> =
                serde_urlencoded::from_bytes(body).map_err(|e| Error::BadData(format!("invalid form body: {e}")))?;
            all.extend(parsed);
        }
        Ok(Params(all))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn time(&self, name: &str) -> Result<Option<i64>, Error> {
        self.get(name).map(|v| parse_time(name, v)).transpose()
    }

    fn required_time(&self, name: &str) -> Result<i64, Error> {
        parse_time(name, self.get(name).unwrap_or(""))
    }

    fn options(&self) -> Result<Options, Error> {
        let mut o = Options::default();
        if let Some(v) = self.get("lookback_delta") {
            o.lookback_ms = parse_duration("lookback_delta", v)?;
            if o.lookback_ms <= 0 {
                o.lookback_ms = eval::DEFAULT_LOOKBACK_MS;
            }
        }
        Ok(o)
    }

    /// `match[]` selectors: each a series selector.
    fn selectors(&self) -> Result<Vec<Vec<Matcher>>, Error> {
        self.all("match[]")
            .iter()
            .map(|m| match eval::parse(m) {
                Ok(skein_promql::Expr::VectorSelector(vs)) => Ok(eval::selector_matchers(&vs)),
                Ok(_) => Err(Error::BadData(format!(
                    "invalid parameter \"match[]\": {m:?} is not a series selector"
                ))),
                Err(e) => Err(Error::BadData(format!(
                    "invalid parameter \"match[]\": {}",
                    e.message().trim_start_matches("invalid parameter \"query\": ")
                ))),
            })
            .collect()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs `f` on a blocking thread with the engine of `tenant`'s space; answers its data in the
/// success envelope, or its error.
async fn run<F>(app: &Arc<App>, tenant: &Tenant, endpoint: &'static str, f: F) -> Response
where
    F: FnOnce(&Space) -> Result<Value, Error> + Send + 'static,
{
    let space = match app.space(tenant).await {
        Ok(s) => s,
        Err(e) => return unavailable(e.message()),
    };
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || f(&space)).await;
    app.metrics.observe_query(endpoint, started.elapsed().as_secs_f64());
    match out {
        Ok(Ok(data)) => axum::Json(pjson::success(data)).into_response(),
        Ok(Err(e)) => error_response(&e),
        Err(e) => error_response(&Error::Internal(e.to_string())),
    }
}

fn params(method: &Method, q: RawQuery, headers: &HeaderMap, body: &Bytes) -> Result<Params, Error> {
    Params::new(method, q.0, headers, body)
}

async fn query(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = match params(&method, q, &headers, &body) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let (t, expr, opts) = match instant_params(&p) {
        Ok(x) => x,
        Err(e) => return error_response(&e),
    };
    run(&app, &tenant, "prometheus_query", move |e| {
        let v = eval::instant(&EngineSource::of(e), &expr, t, opts)?;
        Ok(pjson::instant_data(&v, t))
    })
    .await
}

async fn query_range(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = match params(&method, q, &headers, &body) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let (start, end, step, expr, opts) = match range_params(&p) {
        Ok(x) => x,
        Err(e) => return error_response(&e),
    };
    // Checked before the engine is asked, as Prometheus does.
    if end < start {
        return error_response(&Error::BadData("end timestamp must not be before start time".into()));
    }
    run(&app, &tenant, "prometheus_query_range", move |e| {
        let m = eval::range(&EngineSource::of(e), &expr, start, end, step, opts)?;
        Ok(pjson::range_data(&m))
    })
    .await
}

type InstantParams = (i64, skein_promql::Expr, Options);

fn instant_params(p: &Params) -> Result<InstantParams, Error> {
    let t = p.time("time")?.unwrap_or_else(now_ms);
    let expr = eval::parse(p.get("query").unwrap_or(""))?;
    Ok((t, expr, p.options()?))
}

type RangeParams = (i64, i64, i64, skein_promql::Expr, Options);

fn range_params(p: &Params) -> Result<RangeParams, Error> {
    let start = p.required_time("start")?;
    let end = p.required_time("end")?;
    let step = parse_duration("step", p.get("step").unwrap_or(""))?;
    let expr = eval::parse(p.get("query").unwrap_or(""))?;
    Ok((start, end, step, expr, p.options()?))
}

/// `start`/`end` of the metadata endpoints (default: all time).
fn span(p: &Params) -> Result<(i64, i64), Error> {
    Ok((
        p.time("start")?.unwrap_or(0),
        p.time("end")?.unwrap_or(i64::MAX / 2_000_000),
    ))
}

async fn series(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = match params(&method, q, &headers, &body) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let prepared = p.selectors().and_then(|sels| {
        if sels.is_empty() {
            return Err(Error::BadData("no match[] parameter provided".into()));
        }
        Ok((sels, span(&p)?))
    });
    let (sels, (start, end)) = match prepared {
        Ok(x) => x,
        Err(e) => return error_response(&e),
    };
    run(&app, &tenant, "prometheus_series", move |e| {
        let src = EngineSource::of(e);
        let mut set = BTreeSet::new();
        for m in &sels {
            let mut seen = 0;
            // Series are numbered in the order first seen.
            src.visit(m, start, end, &mut |i: usize, l: &Labels, _: i64, _: SampleValue| {
                if i == seen {
                    seen += 1;
                    set.insert(l.clone());
                }
            })
            .map_err(Error::Internal)?;
        }
        Ok(Value::Array(set.iter().map(pjson::labels).collect()))
    })
    .await
}

/// The label sets matching `match[]` (every series when none is given).
fn label_sets(
    e: &Space,
    sels: &[Vec<Matcher>],
    start: i64,
    end: i64,
    f: &mut dyn FnMut(&skein_promql::Labels),
) -> Result<(), Error> {
    let src = EngineSource::of(e);
    let any = vec![vec![]];
    for m in if sels.is_empty() { &any } else { sels } {
        let mut seen = 0;
        // Series are numbered in the order first seen.
        src.visit(m, start, end, &mut |i: usize, l: &Labels, _: i64, _: SampleValue| {
            if i == seen {
                seen += 1;
                f(l);
            }
        })
        .map_err(Error::Internal)?;
    }
    Ok(())
}

async fn labels(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = match params(&method, q, &headers, &body) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let prepared = p.selectors().and_then(|sels| Ok((sels, span(&p)?)));
    let (sels, (start, end)) = match prepared {
        Ok(x) => x,
        Err(e) => return error_response(&e),
    };
    run(&app, &tenant, "prometheus_labels", move |e| {
        let mut names = BTreeSet::new();
        label_sets(e, &sels, start, end, &mut |l| {
            for (k, _) in l.pairs() {
                if !names.contains(k) {
                    names.insert(k.clone());
                }
            }
        })?;
        Ok(json!(names))
    })
    .await
}

async fn label_values(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    Path(name): Path<String>,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
) -> Response {
    let p = match params(&method, q, &headers, &Bytes::new()) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let prepared = p.selectors().and_then(|sels| Ok((sels, span(&p)?)));
    let (sels, (start, end)) = match prepared {
        Ok(x) => x,
        Err(e) => return error_response(&e),
    };
    run(&app, &tenant, "prometheus_label_values", move |e| {
        let mut values = BTreeSet::new();
        label_sets(e, &sels, start, end, &mut |l| {
            if let Some(v) = l.get(&name)
                && !values.contains(v)
            {
                values.insert(v.to_string());
            }
        })?;
        Ok(json!(values))
    })
    .await
}

async fn metadata(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    method: Method,
    q: RawQuery,
    headers: HeaderMap,
) -> Response {
    let p = match params(&method, q, &headers, &Bytes::new()) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let metric = p.get("metric").map(str::to_string);
    let limit = match p.get("limit").map(|v| v.parse::<i64>()) {
        None => None,
        Some(Ok(n)) if n > 0 => Some(n as usize),
        Some(Ok(_)) => None,
        Some(Err(_)) => return error_response(&Error::BadData("invalid parameter \"limit\": not a number".into())),
    };
    run(&app, &tenant, "prometheus_metadata", move |space| {
        let e = &space.engine;
        let mut out: BTreeMap<String, Value> = BTreeMap::new();
        for m in e.metric_names(skein_engine::Window::default()) {
            // The newest point of each metric describes it.
            let r = e
                .search_metrics(&MetricQuery {
                    name: Some(m.name.clone()),
                    limit: 1,
                    ..Default::default()
                })
                .map_err(|e| Error::Internal(e.to_string()))?;
            let Some(point) = r.records.first() else { continue };
            let Some((name, kind)) = naming::prometheus_metric(&point.metric) else {
                continue;
            };
            if metric.as_ref().is_some_and(|want| *want != name) {
                continue;
            }
            let unit = naming::unit_suffix(&point.metric.unit, &point.metric.kind);
            out.entry(name)
                .or_insert_with(|| json!([{"type": kind, "help": point.metric.description, "unit": unit}]));
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
        }
        Ok(json!(out))
    })
    .await
}

async fn buildinfo() -> Response {
    axum::Json(pjson::success(json!({
        "version": PROMETHEUS_VERSION,
        "revision": concat!("skein-", env!("CARGO_PKG_VERSION")),
        "branch": "skein",
        "buildUser": "skein",
        "buildDate": "",
        "goVersion": "",
    })))
    .into_response()
}

/// `POST /prometheus/api/v1/write`: 204 when stored; 400 with the problem
/// as text when the body is not a snappy protobuf `WriteRequest` or a
/// series is invalid (nothing of that request is stored).
async fn write(State(app): State<Arc<App>>, tenant: Tenant, mut headers: HeaderMap, body: Body) -> Response {
    // The body is snappy whatever the header says; the shared front door
    // only knows gzip, so the header is not passed on.
    headers.remove(header::CONTENT_ENCODING);
    let limit = app.config.max_body_bytes;
    match http_ingest::receive::<Metrics>(&app, &tenant, &headers, body, "prometheus_remote_write", move |b| {
        remote_write::decode(b, limit)
    })
    .await
    {
        Ok(stored) if stored.nothing_valid() => (StatusCode::BAD_REQUEST, stored.message).into_response(),
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => {
            let (status, message) = match &e {
                IngestError::NotReady(nr) => (StatusCode::SERVICE_UNAVAILABLE, nr.message().to_string()),
                IngestError::Overloaded => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "ingest is at capacity (in-flight request bytes); retry later".to_string(),
                ),
                IngestError::Body(b) => (b.status(), b.message().to_string()),
                IngestError::Malformed(m) => (StatusCode::BAD_REQUEST, m.clone()),
                IngestError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m.clone()),
                // Prometheus retries a 5xx: it holds the samples until space returns.
                IngestError::DiskFull(m) => (StatusCode::SERVICE_UNAVAILABLE, m.clone()),
                IngestError::ReadOnly(m) => (StatusCode::FORBIDDEN, m.clone()),
                IngestError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m.clone()),
            };
            let mut r = (status, message).into_response();
            if status == StatusCode::SERVICE_UNAVAILABLE {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            }
            r
        }
    }
}
