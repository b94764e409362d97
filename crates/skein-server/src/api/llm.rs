//! Handlers of the LLM endpoints: usage and cost, tools, sessions.

use std::sync::Arc;

use axum::extract::{Path, State};
use serde_json::{Value, json};
use skein_engine::UsageGroupBy;

use super::handlers::{Q, inline_payloads, window_json, window_param, with_explain, with_payloads};
use super::llm_views;
use super::params::Params;
use super::{ApiError, ApiResult, blocking};
use crate::app::App;
use crate::tenancy::Tenant;

pub async fn usage(State(app): State<Arc<App>>, tenant: Tenant, axum::extract::Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    let by = p.get("group_by").unwrap_or_else(|| "model".into());
    let group_by = UsageGroupBy::parse(&by)
        .ok_or_else(|| ApiError::bad_param("group_by", &format!("must be {}", UsageGroupBy::NAMES)))?;
    let include_scores = match p.get("include").as_deref() {
        None | Some("") => false,
        Some("scores") => true,
        Some(_) => return Err(ApiError::bad_param("include", "must be scores")),
    };
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "llm_usage", move |e| {
        let (u, ex) = e.llm_usage(w, group_by, include_scores)?;
        let mut v = serde_json::to_value(&u).map_err(|e| ApiError::internal(e.to_string()))?;
        v["window"] = window_json(w);
        Ok(with_explain(v, explain, &ex))
    })
    .await
}

pub async fn tools(State(app): State<Arc<App>>, tenant: Tenant, axum::extract::Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "llm_tools", move |e| {
        let (t, ex) = e.llm_tools(w)?;
        Ok(with_explain(
            json!({"window": window_json(w), "tools": t}),
            explain,
            &ex,
        ))
    })
    .await
}

pub async fn sessions(State(app): State<Arc<App>>, tenant: Tenant, axum::extract::Query(q): Q) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    let limit = p.limit(50, 1000)?;
    let cursor = p.get("cursor");
    let explain = p.flag("explain")?;
    p.finish()?;
    blocking(&app, &tenant, "sessions", move |e| {
        let (page, ex) = e.sessions(w, limit, cursor.as_deref())?;
        let v = serde_json::to_value(&page).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(with_explain(v, explain, &ex))
    })
    .await
}

pub async fn session(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    Path(id): Path<String>,
    axum::extract::Query(q): Q,
) -> ApiResult {
    let mut p = Params::new(q);
    let w = window_param(&mut p, None)?;
    let inline = inline_payloads(&mut p)?;
    p.finish()?;
    blocking(&app, &tenant, "session", move |e| {
        let Some(mut d) = e.session(&id, w)? else {
            return Err(ApiError::not_found(format!("session {id:?} not found")));
        };
        if inline {
            let spans = with_payloads(e, true, d.turns.iter().map(|t| t.span.clone()).collect())?;
            for (t, s) in d.turns.iter_mut().zip(spans) {
                t.span = s;
            }
        }
        Ok::<Value, ApiError>(llm_views::session(&d))
    })
    .await
}
