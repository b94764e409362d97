//! Liveness, readiness and self-metrics endpoints, served on the API and
//! OTLP/HTTP ports.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::app::App;

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    match app.ready() {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(nr) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": match nr {
                crate::app::NotReady::Starting => "starting",
                crate::app::NotReady::ShuttingDown => "shutting_down",
            }, "message": nr.message()})),
        )
            .into_response(),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let stats = match app.engine_any() {
        Some(e) => {
            let e = e.clone();
            tokio::task::spawn_blocking(move || e.stats()).await.ok()
        }
        None => None,
    };
    let text = app.metrics.render(
        stats.as_ref(),
        app.admission.in_flight_bytes(),
        app.admission.max_bytes(),
    );
    let mut r = text.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}
