//! The REST query API under `/api/v1`: JSON objects in, JSON objects out,
//! errors as `{"error": {"code", "message"}}` with the right status, and
//! unknown parameters refused by name. `explain=true` adds the engine's
//! account of how it answered.

mod audit;
mod backups;
mod erasures;
mod export;
mod handlers;
mod llm;
pub mod llm_views;
pub mod openapi;
mod otlp_json;
pub mod params;
mod payloads;
mod scores;
mod series;
mod sql;
mod tail;
pub mod views;

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::app::App;
use crate::app::SpaceError;
use crate::tenancy::{Space, Tenant};

/// An API failure: an HTTP status, a stable code, a message for people.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: &str) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: message.to_string(),
        }
    }
    pub fn bad_param(name: &str, problem: &str) -> Self {
        ApiError::bad_request(&format!("parameter {name}: {problem}"))
    }
    pub fn not_found(message: String) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message,
        }
    }
    pub fn unavailable(message: &str) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unavailable",
            message: message.to_string(),
        }
    }
    pub fn internal(message: String) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message,
        }
    }
}

impl From<skein_engine::Error> for ApiError {
    fn from(e: skein_engine::Error) -> Self {
        if e.is_invalid_input() {
            ApiError::bad_request(&e.to_string())
        } else if e.is_read_only() {
            ApiError {
                status: StatusCode::FORBIDDEN,
                code: "read_only",
                message: e.to_string(),
            }
        } else if e.is_disk_full() {
            ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "disk_full",
                message: e.to_string(),
            }
        } else if e.is_unavailable() {
            // A WAL that refuses writes, failing background work, or a
            // closing engine: not the request's fault, and a retry later
            // may succeed (Retry-After is set for every 503).
            ApiError::unavailable(&e.to_string())
        } else {
            ApiError::internal(e.to_string())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (
            self.status,
            Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        r
    }
}

pub type ApiResult = Result<Json<Value>, ApiError>;

impl From<SpaceError> for ApiError {
    fn from(e: SpaceError) -> Self {
        match e {
            SpaceError::NotReady(nr) => ApiError::unavailable(&nr.message()),
            SpaceError::Open(m) => ApiError::internal(m),
        }
    }
}

/// The space a request reads and writes (its tenant's).
pub(crate) async fn space(app: &App, tenant: &Tenant) -> Result<Arc<Space>, ApiError> {
    Ok(app.space(tenant).await?)
}

/// Runs engine work on a blocking thread, over the engine of `tenant`'s
/// space, and records its latency.
pub(crate) async fn blocking<F>(app: &Arc<App>, tenant: &Tenant, endpoint: &'static str, f: F) -> ApiResult
where
    F: FnOnce(&skein_engine::Engine) -> Result<Value, ApiError> + Send + 'static,
{
    on_blocking_thread(app, tenant, endpoint, f).await.map(Json)
}

/// A JSON answer serialized already (on the blocking thread, straight from
/// the records, without a `Value` in between).
pub struct JsonBytes(pub Vec<u8>);

impl IntoResponse for JsonBytes {
    fn into_response(self) -> Response {
        ([(axum::http::header::CONTENT_TYPE, "application/json")], self.0).into_response()
    }
}

/// [`blocking`] for handlers that serialize their answer themselves.
pub(crate) async fn blocking_bytes<F>(
    app: &Arc<App>,
    tenant: &Tenant,
    endpoint: &'static str,
    f: F,
) -> Result<JsonBytes, ApiError>
where
    F: FnOnce(&skein_engine::Engine) -> Result<Vec<u8>, ApiError> + Send + 'static,
{
    on_blocking_thread(app, tenant, endpoint, f).await.map(JsonBytes)
}

async fn on_blocking_thread<T, F>(app: &Arc<App>, tenant: &Tenant, endpoint: &'static str, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&skein_engine::Engine) -> Result<T, ApiError> + Send + 'static,
{
    let engine = space(app, tenant).await?.engine.clone();
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || f(&engine))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    app.metrics.observe_query(endpoint, started.elapsed().as_secs_f64());
    out
}

/// [`blocking_bytes`] on the calling I/O thread, for engine work known to
/// be small (a fraction of a millisecond). Handing work to the blocking
/// pool wakes a parked thread and then the I/O thread again; on a virtual
/// machine those wake-ups were a fifth of the server's CPU per trace lookup
/// and 0.08 ms of its latency.
pub(crate) fn inline_bytes<F>(
    app: &Arc<App>,
    engine: &skein_engine::Engine,
    endpoint: &'static str,
    f: F,
) -> Result<JsonBytes, ApiError>
where
    F: FnOnce(&skein_engine::Engine) -> Result<Vec<u8>, ApiError>,
{
    let started = Instant::now();
    let out = f(engine);
    app.metrics.observe_query(endpoint, started.elapsed().as_secs_f64());
    out.map(JsonBytes)
}

/// Serializes an answer to JSON bytes.
pub(crate) fn to_json_bytes<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(v).map_err(|e| ApiError::internal(e.to_string()))
}

/// Every route of the API: (method, path). The OpenAPI document and the
/// router are both checked against this list.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/traces"),
    ("GET", "/api/v1/traces/{trace_id}"),
    ("GET", "/api/v1/spans"),
    ("POST", "/api/v1/spans"),
    ("GET", "/api/v1/logs"),
    ("GET", "/api/v1/metrics"),
    ("GET", "/api/v1/metrics/names"),
    ("GET", "/api/v1/series/services"),
    ("GET", "/api/v1/series/logs"),
    ("GET", "/api/v1/services"),
    ("GET", "/api/v1/services/{service}/operations"),
    ("GET", "/api/v1/summary"),
    ("GET", "/api/v1/anomalies"),
    ("GET", "/api/v1/correlate/{trace_id}"),
    ("GET", "/api/v1/stats"),
    ("POST", "/api/v1/backups"),
    ("GET", "/api/v1/llm/usage"),
    ("GET", "/api/v1/llm/tools"),
    ("GET", "/api/v1/sessions"),
    ("GET", "/api/v1/sessions/{id}"),
    ("GET", "/api/v1/export"),
    ("GET", "/api/v1/scores"),
    ("POST", "/api/v1/scores"),
    ("GET", "/api/v1/payloads/{ref}"),
    ("GET", "/api/v1/tail"),
    ("POST", "/api/v1/sql"),
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/audit"),
    ("POST", "/api/v1/erasures"),
    ("GET", "/api/v1/erasures/{id}"),
];

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/traces", get(handlers::list_traces))
        .route("/api/v1/traces/{trace_id}", get(handlers::get_trace))
        .route("/api/v1/spans", get(handlers::search_spans))
        .route("/api/v1/logs", get(handlers::search_logs))
        .route("/api/v1/metrics", get(handlers::search_metrics))
        .route("/api/v1/metrics/names", get(series::metric_names))
        .route("/api/v1/series/services", get(series::services))
        .route("/api/v1/series/logs", get(series::logs))
        .route("/api/v1/services", get(handlers::services))
        .route("/api/v1/services/{service}/operations", get(handlers::operations))
        .route("/api/v1/summary", get(handlers::summary))
        .route("/api/v1/anomalies", get(handlers::anomalies))
        .route("/api/v1/correlate/{trace_id}", get(handlers::correlate))
        .route("/api/v1/stats", get(handlers::stats))
        .route("/api/v1/backups", axum::routing::post(backups::create))
        .route("/api/v1/llm/usage", get(llm::usage))
        .route("/api/v1/llm/tools", get(llm::tools))
        .route("/api/v1/sessions", get(llm::sessions))
        .route("/api/v1/sessions/{id}", get(llm::session))
        .route("/api/v1/export", get(export::export))
        .route("/api/v1/scores", get(scores::list).post(scores::post))
        .route("/api/v1/payloads/{ref}", get(payloads::get_payload))
        .route("/api/v1/tail", get(tail::tail))
        .route("/api/v1/sql", axum::routing::post(sql::post))
        .route("/api/v1/openapi.json", get(openapi::document))
        .route("/api/v1/audit", get(audit::list))
        .route("/api/v1/erasures", axum::routing::post(erasures::post))
        .route("/api/v1/erasures/{id}", get(erasures::get))
        .fallback(|| async { ApiError::not_found("no such endpoint; see /api/v1/openapi.json".into()) })
}

#[cfg(test)]
mod tests {
    use skein_engine::{Error, FaultKind};

    use super::*;

    #[test]
    fn engine_errors_that_need_a_retry_are_503_unavailable() {
        let unavailable = [
            Error::WalFailed {
                reason: "write of /d/wal/1.wal: No space left on device (os error 28)".into(),
            },
            Error::Background {
                kind: FaultKind::Flush,
                reason: "create /d/parts/spans/1.tmp: Not a directory (os error 20)".into(),
            },
            Error::Closed,
        ];
        for e in unavailable {
            let text = e.to_string();
            let api = ApiError::from(e);
            assert_eq!(api.status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
            assert_eq!(api.code, "unavailable");
            assert_eq!(api.message, text);
            let r = api.into_response();
            assert_eq!(r.headers()[axum::http::header::RETRY_AFTER], "1");
        }
        let other = ApiError::from(Error::Other("boom".into()));
        assert_eq!(
            (other.status, other.code),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        );
        let invalid = ApiError::from(Error::Invalid("bad".into()));
        assert_eq!((invalid.status, invalid.code), (StatusCode::BAD_REQUEST, "bad_request"));
    }
}
