//! `GET /api/v1/audit` (admin): the last entries of the audit log (see
//! `crate::audit`), oldest first.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use serde_json::json;

use super::handlers::Q;
use super::params::Params;
use super::{ApiError, ApiResult};
use crate::app::App;
use crate::tenancy::Tenant;

/// A tenant's admin sees the entries of its tenant only.
pub async fn list(State(app): State<Arc<App>>, tenant: Tenant, Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let limit = p.limit(100, 10_000)?;
    p.finish()?;
    let app2 = app.clone();
    let entries = tokio::task::spawn_blocking(move || match &tenant.0 {
        None => app2.audit.tail(limit),
        Some(id) => app2
            .audit
            .tail_where(limit, |e| e.tenant.as_deref() == Some(id.as_str())),
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| ApiError::internal(format!("reading the audit log {}: {e}", app.audit.path().display())))?;
    Ok(Json(json!({"entries": entries, "path": app.audit.path()})))
}
