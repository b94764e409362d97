//! `POST /api/v1/erasures` (admin): erase every record matching criteria
//! from every file, answering `{id, status}` once it is done; `GET
//! /api/v1/erasures/{id}` (admin): the receipt (see
//! `skein_engine::erasure`). The audit log gets the id, the
//! criteria's keys and the counts, never the values.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use skein_engine::erasure::{ErasureCriteria, valid_id};

use super::params::parse_time;
use super::{ApiError, blocking};
use crate::app::App;
use crate::tenancy::Tenant;

const FIELDS: &[&str] = &["trace_id", "session_id", "attributes", "since", "until"];

fn field_error(field: &str, problem: &str) -> ApiError {
    ApiError::bad_request(&format!("field {field}: {problem}"))
}

/// The criteria of a request body, checked field by field.
fn parse(body: &Value) -> Result<ErasureCriteria, ApiError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ApiError::bad_request("an erasure is a JSON object of criteria"))?;
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(field_error(
            unknown,
            &format!("unknown field (known: {})", FIELDS.join(", ")),
        ));
    }
    let opt_str = |k: &str| -> Result<Option<String>, ApiError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(field_error(k, "must be a string")),
        }
    };
    let time = |k: &str| -> Result<Option<u64>, ApiError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => parse_time(s).map(Some).map_err(|e| field_error(k, &e)),
            Some(Value::Number(n)) => parse_time(&n.to_string()).map(Some).map_err(|e| field_error(k, &e)),
            Some(_) => Err(field_error(k, "must be RFC 3339 or a Unix time")),
        }
    };
    let mut attributes = std::collections::BTreeMap::new();
    match obj.get("attributes") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => {
                        return Err(field_error(
                            &format!("attributes.{k}"),
                            "must be a string, number or bool",
                        ));
                    }
                };
                attributes.insert(k.clone(), text);
            }
        }
        Some(_) => {
            return Err(field_error(
                "attributes",
                "must be an object of equalities, e.g. {\"user.id\": \"u123\"}",
            ));
        }
    }
    let mut c = ErasureCriteria {
        trace_id: opt_str("trace_id")?,
        session_id: opt_str("session_id")?,
        attributes,
        since_unix_nano: time("since")?,
        until_unix_nano: time("until")?,
    };
    c.check().map_err(|e| ApiError::bad_request(&e.to_string()))?;
    Ok(c)
}

/// What the audit log says of an erasure: keys, not values.
fn criteria_keys(c: &ErasureCriteria) -> String {
    let mut keys: Vec<String> = Vec::new();
    if c.trace_id.is_some() {
        keys.push("trace_id".into());
    }
    if c.session_id.is_some() {
        keys.push("session_id".into());
    }
    keys.extend(c.attributes.keys().map(|k| format!("attribute {k}")));
    if c.since_unix_nano.is_some() || c.until_unix_nano.is_some() {
        keys.push("time range".into());
    }
    keys.join(", ")
}

pub async fn post(State(app): State<Arc<App>>, tenant: Tenant, Json(body): Json<Value>) -> Result<Response, ApiError> {
    let criteria = parse(&body)?;
    let keys = criteria_keys(&criteria);
    let Json(answer) = blocking(&app, &tenant, "erasures_post", move |e| {
        let r = e.erase(criteria)?;
        Ok(json!({"id": r.id, "status": r.status, "counts": r.counts}))
    })
    .await?;
    let summary = format!(
        "erasure {} by {keys}: {}; erased {}",
        answer["id"].as_str().unwrap_or(""),
        answer["status"].as_str().unwrap_or(""),
        answer["counts"]
    );
    let mut resp = Json(answer).into_response();
    resp.extensions_mut().insert(crate::audit::Summary(summary));
    Ok(resp)
}

pub async fn get(State(app): State<Arc<App>>, tenant: Tenant, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    if !valid_id(&id) {
        return Err(ApiError::not_found(format!(
            "no erasure {id:?} (ids are e and 16 hex digits)"
        )));
    }
    blocking(&app, &tenant, "erasures_get", move |e| match e.erasure(&id)? {
        Some(r) => serde_json::to_value(&r).map_err(|e| ApiError::internal(e.to_string())),
        None => Err(ApiError::not_found(format!("no erasure {id}"))),
    })
    .await
}
