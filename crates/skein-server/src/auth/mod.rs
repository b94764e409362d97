//! Who may call what: bearer tokens with scopes, checked on every HTTP
//! surface (one middleware) and on OTLP/gRPC (an interceptor).
//!
//! Without tokens the server is open, which it allows only on loopback
//! addresses unless `--allow-unauthenticated` says otherwise
//! ([`check_exposure`]). `/healthz` and `/readyz` stay open; `/metrics`
//! needs `read` unless `--metrics-public`.

pub mod limiter;
pub mod tokens;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use self::limiter::FailureLimiter;
pub use self::tokens::{Scope, Token, TokenSet};
use crate::app::App;

/// The scope a request needs, `None` for the open endpoints.
pub fn required_scope(method: &Method, path: &str, metrics_public: bool) -> Option<Scope> {
    match path {
        "/healthz" | "/readyz" => None,
        "/metrics" if metrics_public => None,
        "/v1/traces" | "/v1/logs" | "/v1/metrics" => Some(Scope::Ingest),
        "/api/v1/spans" | "/api/v1/scores" if method == Method::POST => Some(Scope::Ingest),
        _ => Some(Scope::Read),
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or one that is not known: 401 / UNAUTHENTICATED.
    Unauthenticated,
    /// A known token without the scope: 403 / PERMISSION_DENIED.
    Forbidden(Scope),
    /// Too many failed attempts from this address lately: 429.
    Throttled,
}

impl Refusal {
    pub fn message(&self) -> String {
        match self {
            Refusal::Unauthenticated => {
                "a valid bearer token is required (Authorization: Bearer TOKEN; the CLI's --token)".into()
            }
            Refusal::Forbidden(s) => format!("this token lacks the {} scope", s.as_str()),
            Refusal::Throttled => "too many failed authentication attempts from this address; retry later".into(),
        }
    }
}

/// Checks a presented `Authorization` value for `scope` (`None`: open).
/// Failures count against `client` in the limiter and in `/metrics`.
pub fn authorize(
    app: &App,
    scope: Option<Scope>,
    authorization: Option<&str>,
    client: Option<IpAddr>,
) -> Result<Option<Token>, Refusal> {
    let (Some(set), Some(scope)) = (app.tokens(), scope) else {
        return Ok(None);
    };
    if client.is_some_and(|ip| app.auth_failures.throttled(ip)) {
        return Err(Refusal::Throttled);
    }
    let token = authorization.and_then(tokens::bearer).and_then(|s| set.find(s));
    let refusal = match token {
        Some(t) if t.allows(scope) => return Ok(Some(t.clone())),
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
    if req.method() != Method::GET || path.starts_with("/api/") || path == "/mcp" {
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

/// Refuses to serve an address other than loopback without tokens, unless
/// told to.
pub fn check_exposure(
    addrs: &[(SocketAddr, &str)],
    have_tokens: bool,
    allow_unauthenticated: bool,
) -> Result<(), String> {
    if have_tokens || allow_unauthenticated {
        return Ok(());
    }
    match addrs.iter().find(|(a, _)| !a.ip().is_loopback()) {
        Some((a, flag)) => Err(format!(
            "{flag} {a} is reachable from other machines and no tokens are set: give --auth-tokens FILE (or SKEIN_AUTH_TOKENS), or --allow-unauthenticated to serve it open"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_by_route() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(required_scope(&get, "/healthz", false), None);
        assert_eq!(required_scope(&get, "/readyz", false), None);
        assert_eq!(required_scope(&get, "/metrics", false), Some(Scope::Read));
        assert_eq!(required_scope(&get, "/metrics", true), None);
        assert_eq!(required_scope(&post, "/v1/traces", false), Some(Scope::Ingest));
        assert_eq!(required_scope(&post, "/api/v1/spans", false), Some(Scope::Ingest));
        assert_eq!(required_scope(&get, "/api/v1/spans", false), Some(Scope::Read));
        assert_eq!(required_scope(&post, "/api/v1/scores", false), Some(Scope::Ingest));
        assert_eq!(required_scope(&get, "/api/v1/scores", false), Some(Scope::Read));
        assert_eq!(required_scope(&post, "/mcp", false), Some(Scope::Read));
        assert_eq!(required_scope(&get, "/", false), Some(Scope::Read));
    }

    #[test]
    fn exposure() {
        let lo: SocketAddr = "127.0.0.1:7700".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:4318".parse().unwrap();
        assert!(check_exposure(&[(lo, "--api-addr")], false, false).is_ok());
        let e = check_exposure(&[(lo, "--api-addr"), (any, "--otlp-http-addr")], false, false).unwrap_err();
        assert!(e.contains("--otlp-http-addr 0.0.0.0:4318"), "{e}");
        assert!(check_exposure(&[(any, "--otlp-http-addr")], true, false).is_ok());
        assert!(check_exposure(&[(any, "--otlp-http-addr")], false, true).is_ok());
    }
}
