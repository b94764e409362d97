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
use crate::tenancy::Tenant;

/// Checks a presented `Authorization` value for `scope` (`None`: open)
/// and names the request's tenant (see [`crate::auth::tenant_of`];
/// `tenant_header` is the value of `--tenant-header`'s header, if that is
/// enabled). Failures count against `client` in the limiter and in
/// `/metrics`.
pub fn authorize(
    app: &App,
    scope: Option<Scope>,
    authorization: Option<&str>,
    tenant_header: Option<&str>,
    client: Option<IpAddr>,
) -> Result<Tenant, Refusal> {
    let (Some(set), Some(scope)) = (app.tokens(), scope) else {
        return crate::auth::tenant_of(None, tenant_header).inspect_err(|r| app.metrics.auth_failure(r));
    };
    if client.is_some_and(|ip| app.auth_failures.throttled(ip)) {
        return Err(Refusal::Throttled);
    }
    let token = authorization.and_then(tokens::bearer).and_then(|s| set.find(s));
    let refusal = match token {
        Some(t) if t.allows(scope) => match crate::auth::tenant_of(Some(t), tenant_header) {
            Ok(tenant) => return Ok(tenant),
            Err(r) => r,
        },
        Some(_) => Refusal::Forbidden(scope),
        None => Refusal::Unauthenticated,
    };
    app.metrics.auth_failure(&refusal);
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
    let tenant_header = app
        .config
        .tenant_header
        .as_deref()
        .and_then(|name| req.headers().get(name))
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    match authorize(&app, scope, authorization, tenant_header, client) {
        Ok(tenant) => {
            let mut req = req;
            req.extensions_mut().insert(tenant);
            next.run(req).await
        }
        Err(r) => refusal_response(r),
    }
}

fn refusal_response(r: Refusal) -> Response {
    let (status, code) = match r {
        Refusal::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated"),
        Refusal::Forbidden(_) | Refusal::OtherTenant { .. } => (StatusCode::FORBIDDEN, "forbidden"),
        Refusal::BadTenant(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        Refusal::Throttled => (StatusCode::TOO_MANY_REQUESTS, "throttled"),
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
/// `ingest` scope (when tokens are set), and puts the call's [`Tenant`]
/// in its extensions.
pub fn grpc(app: Arc<App>) -> impl Fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |mut req: tonic::Request<()>| {
        let authorization = req.metadata().get("authorization").and_then(|v| v.to_str().ok());
        let tenant_header = app
            .config
            .tenant_header
            .as_deref()
            .and_then(|name| req.metadata().get(name.to_ascii_lowercase().as_str()))
            .map(|v| v.to_str().unwrap_or("\u{fffd}"));
        let client = req.remote_addr().map(|a| a.ip());
        match authorize(&app, Some(Scope::Ingest), authorization, tenant_header, client) {
            Ok(tenant) => {
                req.extensions_mut().insert(tenant);
                Ok(req)
            }
            Err(r @ Refusal::Unauthenticated) => Err(tonic::Status::unauthenticated(r.message())),
            Err(r @ (Refusal::Forbidden(_) | Refusal::OtherTenant { .. })) => {
                Err(tonic::Status::permission_denied(r.message()))
            }
            Err(r @ Refusal::BadTenant(_)) => Err(tonic::Status::invalid_argument(r.message())),
            Err(r @ Refusal::Throttled) => Err(tonic::Status::resource_exhausted(r.message())),
        }
    }
}

/// A request reaches a handler without a [`Tenant`] only through a router
/// without the gate (tests; MCP's in-process calls carry the MCP request's
/// tenant). That is the home space while the server is open, and an error
/// once tokens or a tenant header could have named another: a forgotten
/// tenant must never read the home space.
impl axum::extract::FromRequestParts<Arc<App>> for Tenant {
    type Rejection = crate::api::ApiError;

    async fn from_request_parts(parts: &mut http::request::Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Tenant>() {
            Some(t) => Ok(t.clone()),
            None if app.tokens().is_some() || app.config.tenant_header.is_some() => Err(
                crate::api::ApiError::internal("the request reached a handler without a tenant".into()),
            ),
            None => Ok(Tenant::HOME),
        }
    }
}
