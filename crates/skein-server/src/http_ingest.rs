//! The one front door of HTTP ingest, shared by OTLP/HTTP (`/v1/*`) and the
//! JSON span API (`POST /api/v1/spans`): admit → read the body → grow the
//! budget to the body's real size → decode and store on a blocking thread.
//! A refusal is one [`IngestError`], counted here; each route answers it in
//! its own format.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::HeaderMap;
use skein_model::otlp::Decoded;

use crate::app::App;
use crate::body;
use crate::ingest::{self, IngestError, OtlpSignal, Stored};
use crate::tenancy::Tenant;

/// What a request is charged before its body is read when it announces no
/// length (a chunked upload); the ticket grows once the size is known.
const UNANNOUNCED_BYTES: usize = 64 << 10;

/// Receives one ingest request: `decode` turns the body into records (on
/// the blocking thread, with the body's admission ticket held), `protocol`
/// labels the ingest metrics.
pub async fn receive<S: OtlpSignal>(
    app: &Arc<App>,
    tenant: &Tenant,
    headers: &HeaderMap,
    body: Body,
    protocol: &'static str,
    decode: impl FnOnce(&[u8]) -> Result<Decoded<S::Record>, String> + Send + 'static,
) -> Result<Stored, IngestError> {
    let started = Instant::now();
    let outcome = admit_and_store::<S>(app, tenant, headers, body, protocol, decode).await;
    ingest::account(app, started, &outcome);
    outcome
}

async fn admit_and_store<S: OtlpSignal>(
    app: &Arc<App>,
    tenant: &Tenant,
    headers: &HeaderMap,
    body: Body,
    protocol: &'static str,
    decode: impl FnOnce(&[u8]) -> Result<Decoded<S::Record>, String> + Send + 'static,
) -> Result<Stored, IngestError> {
    let space = app.space(tenant).await?;
    let limit = app.config.max_body_bytes;
    // Charged before the body is read, so a flood is refused before its
    // bodies are buffered; a body longer than announced grows the ticket.
    let announced = body::content_length(headers).unwrap_or(UNANNOUNCED_BYTES).min(limit);
    let Some(mut ticket) = app.admission.try_admit(announced) else {
        body::drain(body, limit).await;
        return Err(IngestError::Overloaded);
    };
    let bytes = body::read(headers, body, limit).await.map_err(IngestError::Body)?;
    if bytes.len() > announced && !app.admission.try_grow(&mut ticket, bytes.len() - announced) {
        return Err(IngestError::Overloaded);
    }
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        // Held until the records are stored: decoding is where a request's
        // memory peaks.
        let _ticket = ticket;
        let decoded = decode(&bytes).map_err(IngestError::Malformed)?;
        ingest::store::<S>(&app, &space, decoded, protocol, bytes.len()).map_err(IngestError::storing)
    })
    .await
    .map_err(|e| IngestError::Internal(e.to_string()))?
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{HeaderMap, HeaderValue, header};
    use skein_engine::{Engine, EngineOptions};

    use super::*;
    use crate::config::ServerConfig;
    use crate::ingest::Traces;

    /// An app over a fresh engine in `dir`, with a small body limit and
    /// admission budget.
    pub(crate) fn app_with_engine(dir: &std::path::Path) -> (Arc<App>, Arc<Engine>) {
        let mut config = ServerConfig::new(dir.to_path_buf());
        config.max_body_bytes = 64 << 10;
        config.max_inflight_bytes = 64 << 10;
        let app = Arc::new(App::new(config));
        let mut opts = EngineOptions::new(dir);
        opts.background = false;
        let engine = Arc::new(Engine::open(opts).expect("engine opens"));
        app.set_engine(engine.clone(), EngineOptions::new(dir));
        (app, engine)
    }

    pub(crate) fn rejected(app: &App, reason: &str) -> bool {
        let text = app.metrics.render(None, 0, 1, 0);
        text.contains(&format!("skein_rejected_requests_total{{reason=\"{reason}\"}} 1\n"))
    }

    fn json_headers(len: Option<usize>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(n) = len {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        h
    }

    const SPAN: &str = r#"[{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
        "name": "GET /cart", "service": "checkout", "start_time_unix_nano": 1700000000000000000,
        "duration_ns": 1000}]"#;

    async fn send(app: &Arc<App>, headers: &HeaderMap, body: &'static str) -> Result<Stored, IngestError> {
        receive::<Traces>(app, &Tenant::HOME, headers, Body::from(body), "json_api", |b| {
            crate::json_api::parse(b).map_err(|e| e.to_string())
        })
        .await
    }

    /// What the engine refuses as sent is the client's to fix (400), what
    /// a retry may fix is 503, anything else 500.
    #[test]
    fn store_failures_are_classified_by_who_can_fix_them() {
        let too_big = skein_engine::Error::Invalid("batch exceeds the WAL frame limit".into());
        assert!(matches!(IngestError::storing(too_big), IngestError::Malformed(_)));
        let wal = skein_engine::Error::WalFailed {
            reason: "disk full".into(),
        };
        assert!(matches!(IngestError::storing(wal), IngestError::Unavailable(_)));
        let other = skein_engine::Error::Other("surprise".into());
        assert!(matches!(IngestError::storing(other), IngestError::Internal(_)));
    }

    #[tokio::test]
    async fn each_refusal_is_typed_and_counted_by_reason() {
        let dir = tempfile::tempdir().unwrap();
        // Not ready: no engine yet.
        let starting = Arc::new(App::new(ServerConfig::new(dir.path().join("none"))));
        let e = send(&starting, &json_headers(None), SPAN).await.unwrap_err();
        assert!(matches!(e, IngestError::NotReady(_)), "{e:?}");
        assert!(rejected(&starting, "not_ready"));

        let (app, engine) = app_with_engine(&dir.path().join("data"));
        let stored = send(&app, &json_headers(None), SPAN).await.unwrap();
        assert_eq!((stored.accepted, stored.rejected), (1, 0));

        // Body: more than the limit.
        let big: &'static str = Box::leak(" ".repeat(65 << 10).into_boxed_str());
        let e = send(&app, &json_headers(None), big).await.unwrap_err();
        assert!(matches!(e, IngestError::Body(body::BodyError::TooLarge(_))), "{e:?}");
        assert!(rejected(&app, "too_large"));

        // Malformed: not the route's format.
        let e = send(&app, &json_headers(None), "{\"spans\": 3}").await.unwrap_err();
        assert!(
            matches!(&e, IngestError::Malformed(m) if m.contains("array of spans")),
            "{e:?}"
        );
        assert!(rejected(&app, "malformed"));

        // Overloaded: the budget is held by another request.
        let held = app.admission.try_admit(64 << 10).unwrap();
        let e = send(&app, &json_headers(Some(SPAN.len())), SPAN).await.unwrap_err();
        assert!(matches!(e, IngestError::Overloaded), "{e:?}");
        assert!(rejected(&app, "overloaded"));
        drop(held);

        // Unavailable: the engine refuses writes (closed here; a failed WAL
        // or failing flushes answer the same, see the binary's tests).
        engine.close().unwrap();
        let e = send(&app, &json_headers(None), SPAN).await.unwrap_err();
        assert!(
            matches!(&e, IngestError::Unavailable(m) if m.starts_with("storing failed: ")),
            "{e:?}"
        );
        assert!(rejected(&app, "unavailable"));
        assert_eq!(app.admission.in_flight_bytes(), 0, "every ticket was given back");
    }
}
