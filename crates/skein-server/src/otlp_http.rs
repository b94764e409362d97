//! OTLP/HTTP: `POST /v1/traces`, `/v1/logs`, `/v1/metrics`, binary protobuf
//! or JSON, optionally gzip, answered as the OTLP spec says (the response in
//! the request's encoding; partial success with counts and a message; a
//! `google.rpc.Status` body on errors; 503 + `Retry-After` under load).

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prost::Message;

use crate::app::App;
use crate::body::{self, BodyError, Encoding};
use crate::ingest::{self, Logs, Metrics, OtlpSignal, Traces};

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/v1/traces", post(export::<Traces>))
        .route("/v1/logs", post(export::<Logs>))
        .route("/v1/metrics", post(export::<Metrics>))
}

/// `google.rpc.Status`, the OTLP/HTTP error body.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// gRPC code numbers used in error bodies.
const INVALID_ARGUMENT: i32 = 3;
const RESOURCE_EXHAUSTED: i32 = 8;
const INTERNAL: i32 = 13;
const UNAVAILABLE: i32 = 14;

pub fn error_response(status: StatusCode, code: i32, message: &str, enc: Encoding) -> Response {
    let body = RpcStatus {
        code,
        message: message.to_string(),
    };
    let bytes = match enc {
        Encoding::Protobuf => body.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&body).unwrap_or_default(),
    };
    let mut resp = (status, bytes).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(enc.content_type()));
    if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

fn body_error(app: &App, e: BodyError, enc: Encoding) -> Response {
    let (status, reason) = match e {
        BodyError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        BodyError::Malformed(_) => (StatusCode::BAD_REQUEST, "malformed"),
        BodyError::UnsupportedType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type"),
    };
    app.metrics.rejected_requests.add(&format!("reason=\"{reason}\""), 1);
    error_response(status, INVALID_ARGUMENT, e.message(), enc)
}

pub fn overloaded(app: &App, enc: Encoding) -> Response {
    app.metrics.rejected_requests.add("reason=\"overloaded\"", 1);
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        RESOURCE_EXHAUSTED,
        "ingest is at capacity (in-flight request bytes); retry after the indicated delay",
        enc,
    )
}

async fn export<S: OtlpSignal>(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    // Errors before the type is known answer in JSON only if asked for it.
    let enc = match body::encoding(&headers) {
        Ok(e) => e,
        Err(e) => return body_error(&app, e, Encoding::Protobuf),
    };
    let engine = match app.engine() {
        Ok(e) => e.clone(),
        Err(nr) => {
            app.metrics.rejected_requests.add("reason=\"not_ready\"", 1);
            return error_response(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, nr.message(), enc);
        }
    };
    let limit = app.config.max_body_bytes;
    let announced = body::content_length(&headers).unwrap_or(64 << 10).min(limit);
    let Some(mut ticket) = app.admission.try_admit(announced) else {
        body::drain(body, limit).await;
        return overloaded(&app, enc);
    };
    let bytes = match body::read(&headers, body, limit).await {
        Ok(b) => b,
        Err(e) => return body_error(&app, e, enc),
    };
    if bytes.len() > announced && !app.admission.try_grow(&mut ticket, bytes.len() - announced) {
        return overloaded(&app, enc);
    }
    let app2 = app.clone();
    let result = tokio::task::spawn_blocking(move || {
        let _ticket = ticket;
        let request = match enc {
            Encoding::Protobuf => S::Request::decode(bytes.as_ref()).map_err(|e| {
                format!(
                    "invalid protobuf {}: {e}",
                    std::any::type_name::<S::Request>()
                        .rsplit("::")
                        .next()
                        .unwrap_or("request")
                )
            }),
            Encoding::Json => S::decode_json(&bytes).map_err(|e| format!("invalid OTLP/JSON: {e}")),
        };
        let request = match request {
            Ok(r) => r,
            Err(msg) => return Err((StatusCode::BAD_REQUEST, INVALID_ARGUMENT, msg)),
        };
        let decoded = S::convert(request);
        let proto = match enc {
            Encoding::Protobuf => "http_protobuf",
            Encoding::Json => "http_json",
        };
        ingest::store::<S>(&app2, &engine, decoded, proto, bytes.len()).map_err(|e| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                INTERNAL,
                format!("storing failed: {e}"),
            )
        })
    })
    .await;
    let stored = match result {
        Ok(Ok(s)) => s,
        Ok(Err((status, code, msg))) => {
            app.metrics.rejected_requests.add(
                if status == StatusCode::BAD_REQUEST {
                    "reason=\"malformed\""
                } else {
                    "reason=\"internal\""
                },
                1,
            );
            return error_response(status, code, &msg, enc);
        }
        Err(e) => return error_response(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, &e.to_string(), enc),
    };
    app.metrics.ingest_latency.observe(started.elapsed().as_secs_f64());
    if stored.accepted == 0 && stored.rejected > 0 {
        // Nothing in the request was valid: a permanent error, not a
        // partial success.
        app.metrics.rejected_requests.add("reason=\"invalid_records\"", 1);
        return error_response(StatusCode::BAD_REQUEST, INVALID_ARGUMENT, &stored.message, enc);
    }
    let resp = S::response(stored.rejected, stored.message);
    let bytes = match enc {
        Encoding::Protobuf => resp.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&resp).unwrap_or_else(|_| b"{}".to_vec()),
    };
    let mut r = (StatusCode::OK, bytes).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(enc.content_type()));
    r
}
