//! `POST /api/v1/backups` (admin): a consistent backup of the data, taken
//! while ingest goes on, to an empty directory on the server's machine or
//! an `s3://BUCKET/PREFIX` reached with the server's `--s3-*` settings.
//! Answers when the backup is complete, with what it wrote. Each tenant's
//! space goes to `tenants/<name>` of the same place.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;

use skein_engine::backup::Location;

use super::{ApiError, ApiResult};
use crate::app::App;
use crate::tenancy::{Space, Tenant};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    /// A directory path, or `s3://BUCKET/PREFIX`.
    to: String,
}

pub async fn create(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    body: Result<Json<BackupRequest>, axum::extract::rejection::JsonRejection>,
) -> ApiResult {
    if let Some(id) = &tenant.0 {
        // A backup writes where it is told on the server's machine: the
        // operator's to do, not a tenant's.
        return Err(ApiError {
            status: axum::http::StatusCode::FORBIDDEN,
            code: "forbidden",
            message: format!(
                "backups are taken by the operator (a token without a tenant); this token is for tenant {id}"
            ),
        });
    }
    let Json(req) = body.map_err(|e| ApiError::bad_request(&format!("backup request: {}", e.body_text())))?;
    if req.to.trim().is_empty() {
        return Err(ApiError::bad_request("backup request: \"to\" is empty"));
    }
    let to = skein_engine::backup::Location::parse(&req.to, app.config.backup_bucket_options.clone());
    let spaces = app.spaces();
    let started = std::time::Instant::now();
    let report = tokio::task::spawn_blocking(move || back_up_all(&spaces, &to))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
    app.metrics.observe_query("backup", started.elapsed().as_secs_f64());
    Ok(Json(report))
}

/// Backs up the home space to `to`, then each tenant's to
/// `to/tenants/<name>` (restore and verify find them there).
fn back_up_all(spaces: &[Arc<Space>], to: &Location) -> Result<Value, ApiError> {
    let mut out = Value::Null;
    let mut tenants = serde_json::Map::new();
    for space in spaces {
        let target = match &space.tenant.0 {
            None => to.clone(),
            Some(id) => to.child(&format!("{}/{id}", skein_engine::backup::NESTED_DIR)),
        };
        let report = space.engine.backup(&target)?;
        tracing::info!(
            "backup of {} to {}: {} files, {} bytes in {:.1} s",
            space
                .tenant
                .0
                .as_ref()
                .map_or("the home space".to_string(), |id| format!("tenant {id}")),
            report.location,
            report.files,
            report.bytes,
            report.seconds
        );
        let v = serde_json::to_value(report).map_err(|e| ApiError::internal(e.to_string()))?;
        match &space.tenant.0 {
            None => out = v,
            Some(id) => {
                tenants.insert(id.to_string(), v);
            }
        }
    }
    if !tenants.is_empty() {
        out["tenants"] = Value::Object(tenants);
    }
    Ok(out)
}
