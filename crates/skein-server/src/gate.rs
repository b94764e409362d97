//! Enforces the tokens: the middleware of the HTTP routers and the
//! interceptor of the OTLP/gRPC services, both over [`authorize`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::App;
use crate::auth::{Refusal, Scope, limiter, required_scope, tokens};

/// Checks a presented `Authorization` value for `scope` (`None`: open).
/// Failures count against `client` in the limiter and in `/metrics`.
pub fn authorize(
    app: &App,
    scope: Option<Scope>,
    authorization: Option<&str>,
    client: Option<IpAddr>,
) -> Result<(), Refusal> {
    let (Some(set), Some(scope)) = (app.tokens(), scope) else {
        return Ok(());
    };
    if client.is_some_and(|ip| app.auth_failures.throttled(ip)) {
        return Err(Refusal::Throttled);
    }
    let token = authorization.and_then(tokens::bearer).and_then(|s| set.find(s));
    let refusal = match token {
        Some(t) if t.allows(scope) => return Ok(()),
        Some(_) => Refusal::Forbidden(scope),
        None => Refusal::Unauthenticated,
    };
    app.metrics.auth_failure(refusal);
    if refusal == Refusal::Unauthenticated
        && let Some(ip) = client
    {
        app.auth_failures.fail(ip);
    }
    Err(refusal)
}

/// Whether a request is for the web UI's shell or its files, which hold
/// no telemetry (the page then asks the API, with a token).
fn is_ui_shell(req: &Request) -> bool {
    let path = req.uri().path();
    if req.method() != Method::GET || path.starts_with("/api/") || path.starts_with("/prometheus/") || path == "/mcp" {
        return false;
    }
    path.starts_with("/ui/")
        || req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
}

/// The middleware of the HTTP routers.
pub async fn require(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let scope = if is_ui_shell(&req) {
        None
    } else {
        required_scope(req.method(), req.uri().path(), app.config.metrics_public)
    };
    let client = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let authorization = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match authorize(&app, scope, authorization, client) {
        Ok(_) => next.run(req).await,
        Err(r) => refusal_response(r),
    }
}

fn refusal_response(r: Refusal) -> Response {
    let status = match r {
        Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
        Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
        Refusal::Throttled => StatusCode::TOO_MANY_REQUESTS,
    };
    let code = match r {
        Refusal::Unauthenticated => "unauthenticated",
        Refusal::Forbidden(_) => "forbidden",
        Refusal::Throttled => "throttled",
    };
    // The API's error shape, so clients (the CLI, the UI) show the message.
    let body = serde_json::json!({"error": {"code": code, "message": r.message()}});
    let mut resp = (status, axum::Json(body)).into_response();
    if r == Refusal::Unauthenticated {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"skein\""),
        );
    }
    if r == Refusal::Throttled {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(limiter::WINDOW.as_secs()));
    }
    resp
}

/// Checks the `authorization` metadata of every OTLP/gRPC call for the
/// `ingest` scope (when tokens are set).
pub fn grpc(app: Arc<App>) -> impl Fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |req: tonic::Request<()>| {
        let authorization = req.metadata().get("authorization").and_then(|v| v.to_str().ok());
        let client = req.remote_addr().map(|a| a.ip());
        match authorize(&app, Some(Scope::Ingest), authorization, client) {
            Ok(_) => Ok(req),
            Err(r @ Refusal::Unauthenticated) => Err(tonic::Status::unauthenticated(r.message())),
            Err(r @ Refusal::Forbidden(_)) => Err(tonic::Status::permission_denied(r.message())),
            Err(r @ Refusal::Throttled) => Err(tonic::Status::resource_exhausted(r.message())),
        }
    }
}
