//! `POST /api/v1/spans`: the simple JSON span API on the API port.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::App;
use crate::body;
use crate::ingest::{self, Traces};

pub fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let mut r = (status, Json(json!({"error": {"code": code, "message": message}}))).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    r
}

pub async fn post_spans(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let engine = match app.engine() {
        Ok(e) => e.clone(),
        Err(nr) => return error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", nr.message()),
    };
    let limit = app.config.max_body_bytes;
    let announced = body::content_length(&headers).unwrap_or(64 << 10).min(limit);
    let Some(mut ticket) = app.admission.try_admit(announced) else {
        body::drain(body, limit).await;
        app.metrics.rejected_requests.add("reason=\"overloaded\"", 1);
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "ingest is at capacity; retry shortly",
        );
    };
    let bytes = match body::read(&headers, body, limit).await {
        Ok(b) => b,
        Err(e) => {
            let status = match e {
                body::BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                body::BodyError::Malformed(_) => StatusCode::BAD_REQUEST,
                body::BodyError::UnsupportedType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            };
            return error(status, "bad_request", e.message());
        }
    };
    if bytes.len() > announced && !app.admission.try_grow(&mut ticket, bytes.len() - announced) {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "ingest is at capacity; retry shortly",
        );
    }
    let app2 = app.clone();
    let result = tokio::task::spawn_blocking(move || {
        let _ticket = ticket;
        let decoded = crate::json_api::parse(&bytes).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
        ingest::store::<Traces>(&app2, &engine, decoded, "json_api", bytes.len())
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("storing failed: {e}")))
    })
    .await;
    match result {
        Ok(Ok(s)) => {
            let status = if s.accepted == 0 && s.rejected > 0 {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            };
            let errors: Vec<&str> = if s.message.is_empty() {
                Vec::new()
            } else {
                vec![s.message.as_str()]
            };
            (
                status,
                Json(json!({"accepted": s.accepted, "rejected": s.rejected, "errors": errors})),
            )
                .into_response()
        }
        Ok(Err((status, msg))) => error(
            status,
            if status == StatusCode::BAD_REQUEST {
                "bad_request"
            } else {
                "internal"
            },
            &msg,
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &e.to_string()),
    }
}
