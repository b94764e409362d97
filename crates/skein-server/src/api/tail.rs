//! `GET /api/v1/tail`: new spans and logs as server-sent events, as they are
//! stored. Events are `span` or `log` with the same JSON as the search
//! endpoints; a `lagged` event says how many were skipped when the client
//! reads slower than data arrives (the stream never blocks ingest).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use skein_model::StatusCode;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::ApiError;
use super::params::Params;
use super::views;
use crate::app::{App, Arrival};
use crate::tenancy::Tenant;

#[derive(Clone)]
struct Filter {
    service: Option<String>,
    status: Option<StatusCode>,
    spans: bool,
    logs: bool,
    min_severity: Option<i32>,
}

impl Filter {
    fn event(&self, a: &Arrival) -> Option<Event> {
        match a {
            Arrival::Span(s) if self.spans => {
                if self.service.as_deref().is_some_and(|v| v != s.service_name())
                    || self.status.is_some_and(|c| c != s.status.code)
                {
                    return None;
                }
                Some(Event::default().event("span").data(views::span(s).to_string()))
            }
            Arrival::Log(l) if self.logs => {
                if self.service.as_deref().is_some_and(|v| v != l.service_name())
                    || self.min_severity.is_some_and(|m| l.severity_number < m)
                    || self.status == Some(StatusCode::Error) && l.severity_number < 17
                {
                    return None;
                }
                Some(Event::default().event("log").data(views::log(l).to_string()))
            }
            _ => None,
        }
    }
}

pub async fn tail(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Query<Vec<(String, String)>>) -> Response {
    let space = match super::space(&app, &tenant).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    match build(&space, q) {
        Ok(sse) => sse.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The tail of one space: only records stored in it.
fn build(
    space: &crate::tenancy::Space,
    q: Vec<(String, String)>,
) -> Result<Sse<impl futures::Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    let mut p = Params::new(q);
    let signal = p.get("signal").unwrap_or_else(|| "all".into());
    let (spans, logs) = match signal.as_str() {
        "all" => (true, true),
        "spans" => (true, false),
        "logs" => (false, true),
        _ => return Err(ApiError::bad_param("signal", "must be spans, logs or all")),
    };
    let filter = Filter {
        service: p.get("service"),
        status: p.parse("status", |v| {
            StatusCode::parse(v).ok_or_else(|| "must be unset, ok or error".to_string())
        })?,
        spans,
        logs,
        min_severity: p.parse("severity", |v| {
            skein_model::log::parse_severity(v).ok_or_else(|| "must be a severity name or 0-24".to_string())
        })?,
    };
    p.finish()?;
    let rx = space.arrivals.subscribe();
    let stream = BroadcastStream::new(rx).filter_map(move |item| {
        let f = filter.clone();
        async move {
            match item {
                Ok(a) => f.event(&a).map(Ok),
                Err(BroadcastStreamRecvError::Lagged(n)) => Some(Ok(Event::default()
                    .event("lagged")
                    .data(format!("{{\"skipped\":{n}}}")))),
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
