//! `POST /api/v1/backups` (admin): a consistent backup of the data, taken
//! while ingest goes on, to an empty directory on the server's machine or
//! an `s3://BUCKET/PREFIX` reached with the server's `--s3-*` settings.
//! Answers when the backup is complete, with what it wrote.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;

use super::{ApiError, ApiResult, blocking};
use crate::app::App;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    /// A directory path, or `s3://BUCKET/PREFIX`.
    to: String,
}

pub async fn create(
    State(app): State<Arc<App>>,
    body: Result<Json<BackupRequest>, axum::extract::rejection::JsonRejection>,
) -> ApiResult {
    let Json(req) = body.map_err(|e| ApiError::bad_request(&format!("backup request: {}", e.body_text())))?;
    if req.to.trim().is_empty() {
        return Err(ApiError::bad_request("backup request: \"to\" is empty"));
    }
    let to = skein_engine::backup::Location::parse(&req.to, app.config.backup_bucket_options.clone());
    blocking(&app, "backup", move |e| {
        let report = e.backup(&to)?;
        tracing::info!(
            "backup to {}: {} files, {} bytes in {:.1} s",
            report.location,
            report.files,
            report.bytes,
            report.seconds
        );
        serde_json::to_value(report).map_err(|e| ApiError::internal(e.to_string()))
    })
    .await
    .map(|Json(v): Json<Value>| Json(v))
}
