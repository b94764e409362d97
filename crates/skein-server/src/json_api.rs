//! The simple JSON span API, `POST /api/v1/spans`, for clients without an
//! OpenTelemetry SDK: an array of spans (or `{"spans": [...]}`) with hex ids,
//! times in ns (numbers or strings) and attributes as a plain JSON object.
//!
//! ```json
//! [{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
//!   "parent_span_id": null, "name": "GET /cart", "service": "checkout",
//!   "kind": "server", "start_time_unix_nano": 1700000000000000000,
//!   "duration_ns": 1200000, "status": "ok",
//!   "attributes": {"http.status_code": 200}, "resource": {"host.name": "a"},
//!   "events": [{"name": "retry", "time_unix_nano": 1700000000000500000}]}]
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use skein_model::json::json_u64;
use skein_model::otlp::{Decoded, MAX_TIME_NS};
use skein_model::plain::plain_json_to_any_value;
use skein_model::{
    Event, KeyValue, Link, ModelError, Resource, Scope, Span, SpanId, SpanKind, Status, StatusCode, TraceId,
};

/// Parses a request body into spans; per-span problems become rejections,
/// a body of the wrong shape is an error.
pub fn parse(body: &[u8]) -> Result<Decoded<Span>, ModelError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ModelError::new(format!("invalid JSON: {e}")))?;
    let spans = match v {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("spans") {
            Some(Value::Array(a)) => a,
            _ => return Err(ModelError::new("body must be an array of spans or {\"spans\": [...]}")),
        },
        _ => return Err(ModelError::new("body must be an array of spans or {\"spans\": [...]}")),
    };
    let mut out = Decoded::default();
    let mut resources: HashMap<String, Arc<Resource>> = HashMap::new();
    let mut scopes: HashMap<String, Arc<Scope>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        match span(s, &mut resources, &mut scopes) {
            Ok(sp) => out.records.push(sp),
            Err(e) => {
                out.rejected += 1;
                if out.errors.len() < skein_model::otlp::MAX_ERROR_MESSAGES {
                    out.errors.push(e.at(format_args!("span {i}")).to_string());
                }
            }
        }
    }
    Ok(out)
}

fn attrs(v: Option<&Value>, what: &str) -> Result<Vec<KeyValue>, ModelError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => Ok(m
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.clone(),
                value: plain_json_to_any_value(v),
            })
            .collect()),
        Some(_) => Err(ModelError::new(format!("{what} must be an object of key: value"))),
    }
}

fn time(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, ModelError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let t = json_u64(v).ok_or_else(|| ModelError::new(format!("{key} must be a non-negative integer (ns)")))?;
            if t > MAX_TIME_NS {
                return Err(ModelError::new(format!("{key} {t} is beyond year 2262")));
            }
            Ok(Some(t))
        }
    }
}

fn str_field<'a>(o: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ModelError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ModelError::new(format!("{key} must be a string"))),
    }
}

fn span(
    v: &Value,
    resources: &mut HashMap<String, Arc<Resource>>,
    scopes: &mut HashMap<String, Arc<Scope>>,
) -> Result<Span, ModelError> {
    let o = v
        .as_object()
        .ok_or_else(|| ModelError::new("each span must be an object"))?;
    let trace_id =
        TraceId::from_hex(str_field(o, "trace_id")?.ok_or_else(|| ModelError::new("trace_id is required"))?)?;
    let span_id = SpanId::from_hex(str_field(o, "span_id")?.ok_or_else(|| ModelError::new("span_id is required"))?)?;
    if trace_id.is_zero() || span_id.is_zero() {
        return Err(ModelError::new("trace_id and span_id must not be all zeros"));
    }
    let parent_span_id = match str_field(o, "parent_span_id")? {
        None | Some("") => None,
        Some(h) => Some(SpanId::from_hex(h).map_err(|e| e.at("parent_span_id"))?),
    };
    let name = str_field(o, "name")?
        .ok_or_else(|| ModelError::new("name is required"))?
        .to_string();
    let start = time(o, "start_time_unix_nano")?.ok_or_else(|| ModelError::new("start_time_unix_nano is required"))?;
    let end = match (time(o, "end_time_unix_nano")?, time(o, "duration_ns")?) {
        (Some(e), _) => e,
        (None, Some(d)) => start
            .checked_add(d)
            .filter(|e| *e <= MAX_TIME_NS)
            .ok_or_else(|| ModelError::new("start_time_unix_nano + duration_ns is beyond year 2262"))?,
        (None, None) => return Err(ModelError::new("end_time_unix_nano or duration_ns is required")),
    };
    let kind = match o.get("kind") {
        None | Some(Value::Null) => SpanKind::Unspecified,
        Some(Value::String(s)) => SpanKind::parse(s).ok_or_else(|| {
            ModelError::new(format!(
                "kind {s:?} is not one of internal, server, client, producer, consumer"
            ))
        })?,
        Some(v) => v
            .as_i64()
            .and_then(|n| SpanKind::from_i32(i32::try_from(n).ok()?))
            .ok_or_else(|| ModelError::new("kind must be a name or 0-5"))?,
    };
    let status = match o.get("status") {
        None | Some(Value::Null) => Status::default(),
        Some(Value::String(s)) => Status {
            code: StatusCode::parse(s)
                .ok_or_else(|| ModelError::new(format!("status {s:?} is not unset, ok or error")))?,
            message: String::new(),
        },
        Some(Value::Object(st)) => Status {
            code: match st.get("code") {
                None | Some(Value::Null) => StatusCode::Unset,
                Some(Value::String(s)) => StatusCode::parse(s)
                    .ok_or_else(|| ModelError::new(format!("status.code {s:?} is not unset, ok or error")))?,
                Some(v) => v
                    .as_i64()
                    .and_then(|n| StatusCode::from_i32(i32::try_from(n).ok()?))
                    .ok_or_else(|| ModelError::new("status.code must be a name or 0-2"))?,
            },
            message: str_field(st, "message")?.unwrap_or_default().to_string(),
        },
        Some(_) => return Err(ModelError::new("status must be a string or an object")),
    };
    let mut res_attrs = attrs(o.get("resource"), "resource")?;
    if let Some(svc) = str_field(o, "service")? {
        res_attrs.retain(|kv| kv.key != "service.name");
        res_attrs.insert(0, KeyValue::new("service.name", svc));
    }
    let res_key = serde_json::to_string(&skein_model::json::OtlpAttrs(&res_attrs)).unwrap_or_default();
    let resource = resources
        .entry(res_key)
        .or_insert_with(|| {
            Arc::new(Resource {
                attributes: res_attrs,
                ..Default::default()
            })
        })
        .clone();
    let scope = match o.get("scope") {
        Some(Value::Object(sc)) => {
            let key = Value::Object(sc.clone()).to_string();
            let sc_name = str_field(sc, "name")?.unwrap_or_default().to_string();
            let sc_version = str_field(sc, "version")?.unwrap_or_default().to_string();
            scopes
                .entry(key)
                .or_insert_with(|| {
                    Arc::new(Scope {
                        name: sc_name,
                        version: sc_version,
                        ..Default::default()
                    })
                })
                .clone()
        }
        _ => scopes.entry(String::new()).or_default().clone(),
    };
    let events = match o.get("events") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let eo = e
                    .as_object()
                    .ok_or_else(|| ModelError::new(format!("event {i} must be an object")))?;
                Ok(Event {
                    time_unix_nano: time(eo, "time_unix_nano")?.unwrap_or(start),
                    name: str_field(eo, "name")?.unwrap_or_default().to_string(),
                    attributes: attrs(eo.get("attributes"), "event attributes")?,
                    dropped_attributes_count: 0,
                })
            })
            .collect::<Result<_, ModelError>>()?,
        Some(_) => return Err(ModelError::new("events must be an array")),
    };
    let links = match o.get("links") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let lo = l
                    .as_object()
                    .ok_or_else(|| ModelError::new(format!("link {i} must be an object")))?;
                Ok(Link {
                    trace_id: TraceId::from_hex(str_field(lo, "trace_id")?.unwrap_or_default())?,
                    span_id: SpanId::from_hex(str_field(lo, "span_id")?.unwrap_or_default())?,
                    trace_state: str_field(lo, "trace_state")?.unwrap_or_default().to_string(),
                    attributes: attrs(lo.get("attributes"), "link attributes")?,
                    ..Default::default()
                })
            })
            .collect::<Result<_, ModelError>>()?,
        Some(_) => return Err(ModelError::new("links must be an array")),
    };
    Ok(Span {
        trace_id,
        span_id,
        parent_span_id,
        trace_state: str_field(o, "trace_state")?.unwrap_or_default().to_string(),
        flags: 0,
        name,
        kind,
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: attrs(o.get("attributes"), "attributes")?,
        dropped_attributes_count: 0,
        events,
        dropped_events_count: 0,
        links,
        dropped_links_count: 0,
        status,
        resource,
        scope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_a_full_span_and_names_bad_fields() {
        let body = br#"{"spans": [
            {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
             "name": "GET /cart", "service": "checkout", "kind": "server",
             "start_time_unix_nano": "1700000000000000000", "duration_ns": 1200000,
             "status": {"code": "error", "message": "boom"},
             "attributes": {"http.status_code": 500, "ratio": 0.5, "ok": false, "tags": ["a", "b"]},
             "events": [{"name": "retry", "time_unix_nano": 1700000000000500000}]},
            {"trace_id": "abc", "span_id": "00f067aa0ba902b7", "name": "x", "start_time_unix_nano": 1, "duration_ns": 1},
            {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b8", "name": "x", "start_time_unix_nano": 1}
        ]}"#;
        let d = parse(body).unwrap();
        assert_eq!(d.records.len(), 1);
        assert_eq!(d.rejected, 2);
        assert!(
            d.errors[0].contains("span 1") && d.errors[0].contains("32 hex digits"),
            "{:?}",
            d.errors
        );
        assert!(d.errors[1].contains("duration_ns is required"), "{:?}", d.errors);
        let s = &d.records[0];
        assert_eq!(s.service_name(), "checkout");
        assert_eq!(s.kind, SpanKind::Server);
        assert_eq!(s.duration_ns(), 1_200_000);
        assert_eq!(s.status.code, StatusCode::Error);
        assert_eq!(s.attributes[0].value, skein_model::AnyValue::Int(500));
        assert_eq!(s.events.len(), 1);
        assert!(parse(b"{\"nope\": 1}").is_err());
        assert!(parse(b"not json").unwrap_err().to_string().contains("invalid JSON"));
    }

    /// Regression: numeric kinds and status codes were truncated to `i32`,
    /// so 4294967298 (2³² + 2) was accepted as kind 2 (server).
    #[test]
    fn out_of_range_numeric_kind_and_status_are_rejected() {
        let span = |extra: &str| {
            format!(
                r#"[{{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
                   "name": "x", "start_time_unix_nano": 1, "duration_ns": 1, {extra}}}]"#
            )
        };
        let d = parse(span(r#""kind": 4294967298"#).as_bytes()).unwrap();
        assert_eq!((d.records.len(), d.rejected), (0, 1), "{:?}", d.errors);
        assert!(d.errors[0].contains("kind must be a name or 0-5"), "{:?}", d.errors);
        let d = parse(span(r#""status": {"code": 4294967297}"#).as_bytes()).unwrap();
        assert_eq!((d.records.len(), d.rejected), (0, 1), "{:?}", d.errors);
        assert!(
            d.errors[0].contains("status.code must be a name or 0-2"),
            "{:?}",
            d.errors
        );
        let d = parse(span(r#""kind": 2, "status": {"code": 2}"#).as_bytes()).unwrap();
        assert_eq!(d.records[0].kind, SpanKind::Server);
        assert_eq!(d.records[0].status.code, StatusCode::Error);
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse(&data);
        }

        #[test]
        fn never_panics_on_arbitrary_span_shapes(s in "\\{\"spans\": \\[\\{\"trace_id\": \"[0-9a-f]{0,40}\", \"span_id\": \"[0-9a-z]{0,20}\", \"start_time_unix_nano\": [0-9]{0,25}, \"duration_ns\": -?[0-9]{0,22}, \"name\": \"x\", \"kind\": [0-9]{1,3}\\}\\]\\}") {
            let _ = parse(s.as_bytes());
        }
    }
}
