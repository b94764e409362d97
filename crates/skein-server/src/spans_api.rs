//! `POST /api/v1/spans`: the simple JSON span API on the API port. Admission,
//! body and storing are the shared front door's (`http_ingest`); this route
//! parses its own format and answers in the API's JSON.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::App;
use crate::http_ingest;
use crate::ingest::{IngestError, Traces};
use crate::tenancy::Tenant;

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

/// The API's answer to a refused request.
fn refusal(e: &IngestError) -> Response {
    match e {
        IngestError::NotReady(nr) => error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", &nr.message()),
        IngestError::Overloaded => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "ingest is at capacity; retry shortly",
        ),
        IngestError::Body(b) => error(b.status(), "bad_request", b.message()),
        IngestError::Malformed(m) => error(StatusCode::BAD_REQUEST, "bad_request", m),
        IngestError::Unavailable(m) => error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", m),
        IngestError::DiskFull(m) => error(StatusCode::SERVICE_UNAVAILABLE, "disk_full", m),
        IngestError::ReadOnly(m) => error(StatusCode::FORBIDDEN, "read_only", m),
        IngestError::Internal(m) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", m),
    }
}

pub async fn post_spans(State(app): State<Arc<App>>, tenant: Tenant, headers: HeaderMap, body: Body) -> Response {
    let parse = |b: &[u8]| crate::json_api::parse(b).map_err(|e| e.to_string());
    let s = match http_ingest::receive::<Traces>(&app, &tenant, &headers, body, "json_api", parse).await {
        Ok(s) => s,
        Err(e) => return refusal(&e),
    };
    let status = if s.nothing_valid() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_ingest::tests::{app_with_engine, rejected};

    #[tokio::test]
    async fn a_store_the_engine_refuses_is_503_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let (app, engine) = app_with_engine(dir.path());
        engine.close().unwrap();
        let span = r#"[{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
            "name": "GET /cart", "service": "checkout", "start_time_unix_nano": 1700000000000000000,
            "duration_ns": 1000}]"#;
        let r = post_spans(State(app.clone()), Tenant::HOME, HeaderMap::new(), Body::from(span)).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[axum::http::header::RETRY_AFTER], "1");
        let body = axum::body::to_bytes(r.into_body(), usize::MAX).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            json!({"error": {"code": "unavailable", "message": "storing failed: the engine is shutting down"}})
        );
        assert!(rejected(&app, "unavailable"));
    }
}
