//! Recording admin actions into the audit log (`audit`): the middleware of
//! the API router that logs every request to an admin route, allowed or
//! refused, and `record` for actions that are not requests (a token
//! reload).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use crate::app::App;
use crate::audit::{Entry, Summary};
use crate::auth::{Scope, required_scope, tokens};

/// Appends off the async threads; a failure is logged and counted (the
/// action itself already happened).
pub async fn record(app: &Arc<App>, e: Entry) {
    let app2 = app.clone();
    let r = tokio::task::spawn_blocking(move || app2.audit.append(&e)).await;
    let err = match r {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    app.metrics.audit_failure();
    tracing::error!("audit log {}: {err}", app.audit.path().display());
}

/// The middleware of the API router (outside the token check, so refused
/// attempts are logged too): records every request to an admin route.
pub async fn middleware(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if required_scope(req.method(), req.uri().path(), app.config.metrics_public) != Some(Scope::Admin) {
        return next.run(req).await;
    }
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let token = app.tokens().and_then(|set| {
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(tokens::bearer)
            .and_then(|s| set.find(s).map(|t| (t.name.clone(), t.tenant.clone())))
    });
    let (who, token_tenant) = token.unzip();
    // The token's tenant, or else the one a trusted gateway named.
    let tenant = token_tenant.flatten().map(|t| t.to_string()).or_else(|| {
        app.config
            .tenant_header
            .as_deref()
            .and_then(|name| req.headers().get(name))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let action = format!("{} {}", req.method(), req.uri().path());
    let resp = next.run(req).await;
    let status = resp.status();
    let outcome = if status.is_success() {
        "ok"
    } else if matches!(status.as_u16(), 401 | 403 | 429) {
        "refused"
    } else {
        "error"
    };
    let mut e = Entry::now(action, outcome);
    e.who = who;
    e.tenant = tenant;
    e.client = client;
    e.status = Some(status.as_u16());
    if let Some(Summary(s)) = resp.extensions().get::<Summary>() {
        e.summary = s.clone();
    }
    record(&app, e).await;
    resp
}
