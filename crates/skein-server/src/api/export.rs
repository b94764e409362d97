//! `GET /api/v1/export`: every span or log matching a search, as NDJSON,
//! streamed a page at a time with bounded memory whatever its size. The
//! last line is `{"export_complete": true, "count": N}`, so a client can
//! tell a complete export from a cut one (an error mid-way ends the stream
//! with an `{"error": …}` line instead).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use skein_engine::Engine;
use tokio::sync::mpsc::Sender;

use super::handlers::{Q, inline_payloads, log_query, span_query, with_payloads};
use super::params::Params;
use super::{ApiError, views};
use crate::app::App;
use crate::tenancy::Tenant;

/// Records fetched (and held) at a time.
const PAGE: usize = 1000;
/// Pages in flight between the engine and a slow client: the whole of the
/// export's memory.
const PAGES_IN_FLIGHT: usize = 4;

enum What {
    Spans(skein_engine::SpanQuery),
    Logs(skein_engine::LogQuery),
}

pub async fn export(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> Result<Response, ApiError> {
    let mut p = Params::new(q);
    let signal = p.get("signal").unwrap_or_else(|| "spans".into());
    // `limit` caps the whole export here, not a page.
    let cap = p
        .take("limit")
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_param("limit", "must be a number"))
        })
        .transpose()?;
    let what = match signal.as_str() {
        "spans" => What::Spans(span_query(&mut p)?),
        "logs" => What::Logs(log_query(&mut p)?),
        _ => return Err(ApiError::bad_param("signal", "must be spans or logs")),
    };
    let inline = inline_payloads(&mut p)?;
    p.finish()?;
    let engine = super::space(&app, &tenant).await?.engine.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(PAGES_IN_FLIGHT);
    tokio::task::spawn_blocking(move || {
        let cap = cap.unwrap_or(u64::MAX);
        let outcome = match what {
            What::Spans(mut q) => {
                q.limit = PAGE;
                stream(&tx, cap, &engine, |e, buf, room| {
                    let r = e.search_spans(&q)?;
                    let spans = with_payloads(e, inline, r.records)?;
                    for s in spans.iter().take(room) {
                        line(buf, &views::SpanJson { span: s, depth: None })?;
                    }
                    q.cursor = r.next_cursor;
                    Ok((spans.len().min(room), q.cursor.is_some()))
                })
            }
            What::Logs(mut q) => {
                q.limit = PAGE;
                stream(&tx, cap, &engine, |e, buf, room| {
                    let r = e.search_logs(&q)?;
                    let logs = with_payloads(e, inline, r.records)?;
                    for l in logs.iter().take(room) {
                        line(buf, &views::log(l))?;
                    }
                    q.cursor = r.next_cursor;
                    Ok((logs.len().min(room), q.cursor.is_some()))
                })
            }
        };
        let last = match outcome {
            Ok(Some(count)) => json!({"export_complete": true, "count": count}),
            // The client went away: nobody to tell.
            Ok(None) => return,
            Err(e) => json!({"error": {"code": e.code, "message": e.message}}),
        };
        let _ = tx.blocking_send(Ok(Bytes::from(format!("{last}\n"))));
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// Sends pages from `next` (which writes at most `room` records to the
/// buffer and says how many, and whether more follow) until it has no more
/// or `cap` records went out: `Some(count)`, or `None` when the client
/// stopped reading.
fn stream(
    tx: &Sender<Result<Bytes, std::io::Error>>,
    cap: u64,
    engine: &Engine,
    mut next: impl FnMut(&Engine, &mut Vec<u8>, usize) -> Result<(usize, bool), ApiError>,
) -> Result<Option<u64>, ApiError> {
    let mut count = 0u64;
    loop {
        let mut buf = Vec::with_capacity(PAGE * 512);
        let room = usize::try_from(cap - count).unwrap_or(usize::MAX);
        let (written, more) = next(engine, &mut buf, room)?;
        count += written as u64;
        if !buf.is_empty() && tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
            return Ok(None);
        }
        if !more || count == cap {
            return Ok(Some(count));
        }
    }
}

/// Appends `v` as one NDJSON line.
fn line<T: serde::Serialize>(buf: &mut Vec<u8>, v: &T) -> Result<(), ApiError> {
    serde_json::to_writer(&mut *buf, v).map_err(|e| ApiError::internal(e.to_string()))?;
    buf.push(b'\n');
    Ok(())
}
