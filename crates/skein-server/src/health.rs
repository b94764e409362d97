//! Liveness, readiness and self-metrics endpoints, served on the API and
//! OTLP/HTTP ports.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::app::{App, NotReady};
use crate::tenancy::Tenant;

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
    let (status, body) = readiness(app.ready());
    (status, Json(body)).into_response()
}

/// The answer of `/readyz`: 200 `{"status": "ready"}`; 200 `{"status":
/// "degraded", "message", "faults"}` when only faults that leave writes
/// working are in force (a damaged payload); or 503 with the status, a
/// message, and for a faulted engine the faults themselves (kind, message,
/// since when, how many failures) for tools to act on.
fn readiness(ready: Result<Vec<skein_engine::Fault>, NotReady>) -> (StatusCode, Value) {
    match ready {
        Ok(faults) if faults.is_empty() => (StatusCode::OK, json!({"status": "ready"})),
        Ok(faults) => (
            StatusCode::OK,
            json!({"status": "degraded", "message": crate::app::fault_line(&faults),
                   "faults": serde_json::to_value(&faults).unwrap_or(Value::Null)}),
        ),
        Err(nr) => {
            let mut body = json!({"status": nr.status(), "message": nr.message()});
            if let NotReady::Faulted(faults) = &nr {
                body["faults"] = serde_json::to_value(faults).unwrap_or(Value::Null);
            }
            (StatusCode::SERVICE_UNAVAILABLE, body)
        }
    }
}

/// Self-metrics of the caller's space (a tenant's token sees its tenant's
/// engine; the home space's callers see the home engine and how many
/// tenant spaces are open).
async fn metrics(State(app): State<Arc<App>>, tenant: Tenant) -> Response {
    let spaces = app.spaces();
    let space = spaces.iter().find(|s| s.tenant == tenant);
    let stats = match space {
        Some(s) => {
            let e = s.engine.clone();
            tokio::task::spawn_blocking(move || e.stats()).await.ok()
        }
        None => None,
    };
    let mut text = app.metrics.render(
        stats.as_ref(),
        app.admission.in_flight_bytes(),
        app.admission.max_bytes(),
        space.map_or(0, |s| s.sql_running()),
    );
    if tenant == Tenant::HOME {
        let open = spaces.iter().filter(|s| s.tenant != Tenant::HOME).count();
        text.push_str(&format!(
            "# HELP skein_tenants_open Tenant spaces open (each its own engine).\n# TYPE skein_tenants_open gauge\nskein_tenants_open {open}\n"
        ));
    }
    let mut r = text.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    use skein_engine::{Fault, FaultKind};

    use super::*;

    #[test]
    fn a_faulted_engine_is_not_ready_and_says_why() {
        let (status, body) = readiness(Ok(Vec::new()));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!({"status": "ready"}));

        // A damaged payload degrades the engine: still ready for writes.
        let damaged = vec![Fault {
            kind: FaultKind::Payload,
            message: "corrupt payload blake3:ab in pack 3: its bytes do not hash to its name".into(),
            since_unix_nano: 5,
            failures: 1,
        }];
        let (status, body) = readiness(Ok(damaged));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["status"], "degraded");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("degraded: payload (1 failure): corrupt payload"),
            "{body}"
        );
        assert_eq!(body["faults"][0]["kind"], "payload");

        let (status, body) = readiness(Err(NotReady::Starting));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "starting");
        assert!(body.get("faults").is_none());

        let faults = vec![
            Fault {
                kind: FaultKind::Wal,
                message: "write and fsync of /d/wal/1.wal: No space left on device (os error 28)".into(),
                since_unix_nano: 7,
                failures: 1,
            },
            Fault {
                kind: FaultKind::Flush,
                message: "create /d/parts/spans/3.tmp:\nNot a directory".into(),
                since_unix_nano: 9,
                failures: 4,
            },
        ];
        let (status, body) = readiness(Err(NotReady::Faulted(faults)));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "faulted");
        assert_eq!(
            body["message"],
            "faulted: wal (1 failure): write and fsync of /d/wal/1.wal: No space left on device (os error 28); \
             flush (4 failures): create /d/parts/spans/3.tmp: Not a directory"
        );
        assert_eq!(body["faults"][0]["kind"], "wal");
        assert_eq!(body["faults"][1]["kind"], "flush");
        assert_eq!(body["faults"][1]["failures"], 4);
        assert_eq!(body["faults"][1]["since_unix_nano"], 9);
    }
}
