//! OTLP/HTTP: `POST /v1/traces`, `/v1/logs`, `/v1/metrics`, binary protobuf
//! or JSON, optionally gzip, answered as the OTLP spec says (the response in
//! the request's encoding; partial success with counts and a message; a
//! `google.rpc.Status` body on errors; 503 + `Retry-After` under load and
//! when the engine cannot store). Admission, body and storing are the
//! shared front door's (`http_ingest`).

use std::borrow::Cow;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prost::Message;
use skein_model::otlp::Decoded;

use crate::app::App;
use crate::body::{self, Encoding};
use crate::http_ingest;
use crate::ingest::{IngestError, Logs, Metrics, OtlpSignal, Traces};
use crate::tenancy::Tenant;

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
const PERMISSION_DENIED: i32 = 7;
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

/// The OTLP answer to a refused request, in the request's encoding.
fn refusal(e: &IngestError, enc: Encoding) -> Response {
    let (status, code, message): (StatusCode, i32, Cow<'_, str>) = match e {
        IngestError::NotReady(nr) => (StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, nr.message()),
        IngestError::Overloaded => (
            StatusCode::SERVICE_UNAVAILABLE,
            RESOURCE_EXHAUSTED,
            "ingest is at capacity (in-flight request bytes); retry after the indicated delay".into(),
        ),
        IngestError::Body(b) => (b.status(), INVALID_ARGUMENT, b.message().into()),
        IngestError::Malformed(m) => (StatusCode::BAD_REQUEST, INVALID_ARGUMENT, m.into()),
        IngestError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, m.into()),
        IngestError::DiskFull(m) => (StatusCode::SERVICE_UNAVAILABLE, RESOURCE_EXHAUSTED, m.into()),
        IngestError::ReadOnly(m) => (StatusCode::FORBIDDEN, PERMISSION_DENIED, m.into()),
        IngestError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, m.into()),
    };
    error_response(status, code, &message, enc)
}

/// Decodes a request body of `enc` and converts it to records.
fn decode<S: OtlpSignal>(enc: Encoding, bytes: &[u8]) -> Result<Decoded<S::Record>, String> {
    let request = match enc {
        Encoding::Protobuf => S::Request::decode(bytes).map_err(|e| {
            format!(
                "invalid protobuf {}: {e}",
                std::any::type_name::<S::Request>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("request")
            )
        })?,
        Encoding::Json => S::decode_json(bytes).map_err(|e| format!("invalid OTLP/JSON: {e}"))?,
    };
    Ok(S::convert(request))
}

async fn export<S: OtlpSignal>(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Errors before the type is known answer in protobuf (the default
    // encoding of OTLP/HTTP).
    let enc = match body::encoding(&headers) {
        Ok(e) => e,
        Err(e) => {
            let e = IngestError::Body(e);
            e.count(&app);
            return refusal(&e, Encoding::Protobuf);
        }
    };
    let protocol = match enc {
        Encoding::Protobuf => "http_protobuf",
        Encoding::Json => "http_json",
    };
    let stored =
        match http_ingest::receive::<S>(&app, &tenant, &headers, body, protocol, move |b| decode::<S>(enc, b)).await {
            Ok(s) => s,
            Err(e) => return refusal(&e, enc),
        };
    if stored.nothing_valid() {
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

#[cfg(test)]
mod tests {
    use skein_model::corpus::Corpus;
    use skein_model::otlp::spans_to_otlp;

    use super::*;
    use crate::http_ingest::tests::{app_with_engine, rejected};

    /// A store the engine refuses (here: closed; the binary's tests fail
    /// its WAL and its flushes) is a 503 UNAVAILABLE with Retry-After, not
    /// a 500, in either encoding.
    #[tokio::test]
    async fn a_store_the_engine_refuses_is_503_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let (app, engine) = app_with_engine(dir.path());
        engine.close().unwrap();
        let request = spans_to_otlp(&Corpus::with_shape(1, 2, 1, 1, 1_700_000_000_000_000_000).spans(0..1));
        for enc in [Encoding::Protobuf, Encoding::Json] {
            let bytes = match enc {
                Encoding::Protobuf => request.encode_to_vec(),
                Encoding::Json => serde_json::to_vec(&request).unwrap(),
            };
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(enc.content_type()));
            let r = export::<Traces>(State(app.clone()), Tenant::HOME, headers, Body::from(bytes)).await;
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "{enc:?}");
            assert_eq!(r.headers()[header::RETRY_AFTER], "1");
            assert_eq!(r.headers()[header::CONTENT_TYPE], enc.content_type());
            let body = axum::body::to_bytes(r.into_body(), usize::MAX).await.unwrap();
            let status = match enc {
                Encoding::Protobuf => RpcStatus::decode(body.as_ref()).unwrap(),
                Encoding::Json => {
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    RpcStatus {
                        code: v["code"].as_i64().unwrap() as i32,
                        message: v["message"].as_str().unwrap().to_string(),
                    }
                }
            };
            assert_eq!(status.code, UNAVAILABLE, "{enc:?}");
            assert_eq!(status.message, "storing failed: the engine is shutting down");
        }
        let m = app.metrics.render(None, 0, 1, 0);
        assert!(
            m.contains("skein_rejected_requests_total{reason=\"unavailable\"} 2\n"),
            "{m}"
        );
        assert!(!rejected(&app, "internal"));
    }
}
