//! A tool's arguments: declared once ([`Param`]), turned into the input
//! schema, and checked on every call with errors that name the argument.

use serde_json::{Map, Value, json};

use crate::api::params::{parse_duration, parse_time};

/// What an argument holds, and how it is checked before any request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Str,
    /// One of these words.
    Choice(&'static [&'static str]),
    Bool,
    /// A duration with a unit: `500ms`, `15m`, `1h`.
    Duration,
    /// RFC 3339, a Unix time, or a duration ago.
    Time,
    /// 32 hex digits.
    TraceId,
    /// 16 hex digits.
    SpanId,
    /// An object of key → string, number or boolean (attribute filters).
    Attrs,
    /// `limit`: 1 up to the tool's maximum.
    Limit,
    /// `cursor`: a `next_cursor` of this tool.
    Cursor,
}

/// Where an argument goes in the API request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// A query parameter of the same name.
    Query,
    /// A path segment (the tool's path names it).
    Path,
    /// Used by the tool itself (`limit`, `cursor`, `include_attributes`).
    Local,
    /// An object whose keys become query parameters with this prefix
    /// (`attributes: {"http.route": "/x"}` → `attr.http.route=/x`).
    Prefix(&'static str),
    /// A boolean that, when true, adds this parameter and value.
    Flag(&'static str, &'static str),
}

/// One argument of a tool.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    pub to: To,
    pub description: &'static str,
}

/// An optional argument passed on as the query parameter of its name.
pub const fn opt(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param {
        name,
        kind,
        required: false,
        to: To::Query,
        description,
    }
}

/// A required argument passed on as the query parameter of its name.
pub const fn req(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param {
        required: true,
        ..opt(name, kind, description)
    }
}

/// A required argument that is a segment of the API path.
pub const fn segment(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param {
        to: To::Path,
        ..req(name, kind, description)
    }
}

/// An argument with its own way into the request (see [`To`]).
pub const fn routed(name: &'static str, kind: Kind, to: To, description: &'static str) -> Param {
    Param {
        to,
        ..opt(name, kind, description)
    }
}

/// A call that cannot be made as asked: the message names the argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgError(pub String);

impl ArgError {
    pub fn new(name: &str, problem: impl std::fmt::Display) -> Self {
        ArgError(format!("argument `{name}`: {problem}"))
    }
}

/// The default and largest `limit` of a tool.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub default: u64,
    pub max: u64,
}

/// The JSON Schema of the arguments.
pub fn input_schema(params: &[Param], limits: Option<Limits>, open: bool) -> Map<String, Value> {
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in params {
        let mut s = match p.kind {
            Kind::Str | Kind::Cursor => json!({"type": "string"}),
            Kind::Choice(words) => json!({"type": "string", "enum": words}),
            Kind::Bool => json!({"type": "boolean"}),
            Kind::Duration | Kind::Time => json!({"type": "string"}),
            Kind::TraceId => json!({"type": "string", "pattern": "^[0-9a-fA-F]{32}$"}),
            Kind::SpanId => json!({"type": "string", "pattern": "^[0-9a-fA-F]{16}$"}),
            Kind::Attrs => json!({"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}),
            Kind::Limit => {
                let l = limits.unwrap_or(Limits { default: 100, max: 100 });
                json!({"type": "integer", "minimum": 1, "maximum": l.max, "default": l.default})
            }
        };
        s["description"] = p.description.into();
        props.insert(p.name.to_string(), s);
        if p.required {
            required.push(p.name);
        }
    }
    let mut m = Map::new();
    m.insert("type".into(), "object".into());
    m.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        m.insert("required".into(), json!(required));
    }
    m.insert(
        "additionalProperties".into(),
        if open {
            json!({"type": ["string", "number", "boolean"]})
        } else {
            false.into()
        },
    );
    m
}

/// Checked arguments of one call.
#[derive(Debug, Default)]
pub struct Args {
    values: Map<String, Value>,
    /// Arguments the tool does not declare but passes on (`open` tools).
    pub extra: Vec<(String, String)>,
}

/// A scalar as a query-string value.
fn scalar(name: &str, v: &Value) -> Result<String, ArgError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(ArgError::new(name, "must be a string, number or boolean")),
    }
}

impl Args {
    /// Checks `given` against `params`: unknown names (unless `open`), types,
    /// required ones, and the form of durations, times, ids and limits.
    pub fn check(
        given: Option<&Map<String, Value>>,
        params: &[Param],
        limits: Option<Limits>,
        open: bool,
    ) -> Result<Args, ArgError> {
        let mut args = Args::default();
        let empty = Map::new();
        for (name, v) in given.unwrap_or(&empty) {
            let Some(p) = params.iter().find(|p| p.name == name) else {
                if open {
                    if !v.is_null() {
                        args.extra.push((name.clone(), scalar(name, v)?));
                    }
                    continue;
                }
                let names: Vec<&str> = params.iter().map(|p| p.name).collect();
                let takes = if names.is_empty() {
                    "this tool takes no arguments".to_string()
                } else {
                    format!("this tool takes {}", names.join(", "))
                };
                return Err(ArgError::new(name, format!("unknown argument; {takes}")));
            };
            if v.is_null() {
                continue;
            }
            check_value(p, v, limits)?;
            args.values.insert(name.clone(), v.clone());
        }
        for p in params.iter().filter(|p| p.required) {
            if !args.values.contains_key(p.name) {
                return Err(ArgError::new(p.name, "is required"));
            }
        }
        Ok(args)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(Value::as_str)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.values.get(name).and_then(Value::as_bool).unwrap_or(false)
    }

    pub fn int(&self, name: &str) -> Option<u64> {
        self.values.get(name).and_then(Value::as_u64)
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }
}

fn check_value(p: &Param, v: &Value, limits: Option<Limits>) -> Result<(), ArgError> {
    let name = p.name;
    let text = || v.as_str().ok_or_else(|| ArgError::new(name, "must be a string"));
    match p.kind {
        Kind::Str | Kind::Cursor => {
            let s = text()?;
            if s.is_empty() {
                return Err(ArgError::new(name, "must not be empty"));
            }
        }
        Kind::Choice(words) => {
            let s = text()?;
            if !words.contains(&s) {
                return Err(ArgError::new(name, format!("{s:?} is not one of {}", words.join(", "))));
            }
        }
        Kind::Bool => {
            if !v.is_boolean() {
                return Err(ArgError::new(name, "must be true or false"));
            }
        }
        Kind::Duration => {
            let s = text()?;
            let bare = s.trim().parse::<u64>().is_ok_and(|n| n != 0);
            if bare || parse_duration(s).is_err() {
                return Err(ArgError::new(
                    name,
                    format!("{s:?} is not a duration with a unit (e.g. 500ms, 15m, 1h)"),
                ));
            }
        }
        Kind::Time => {
            let s = text()?;
            parse_time(s).map_err(|e| ArgError::new(name, e))?;
        }
        Kind::TraceId | Kind::SpanId => {
            let s = text()?;
            let digits = if p.kind == Kind::TraceId { 32 } else { 16 };
            if s.len() != digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ArgError::new(name, format!("{s:?} is not {digits} hex digits")));
            }
        }
        Kind::Attrs => {
            let Some(m) = v.as_object() else {
                return Err(ArgError::new(name, "must be an object of key: value"));
            };
            for (k, val) in m {
                if k.is_empty() {
                    return Err(ArgError::new(name, "keys must not be empty"));
                }
                scalar(&format!("{name}.{k}"), val)?;
            }
        }
        Kind::Limit => {
            let max = limits.map_or(100, |l| l.max);
            match v.as_u64() {
                Some(n) if (1..=max).contains(&n) => {}
                _ => return Err(ArgError::new(name, format!("must be an integer from 1 to {max}"))),
            }
        }
    }
    Ok(())
}

/// The query parameters of the checked arguments, as each [`Param`] routes
/// them, then the passed-on extras of an open tool.
pub fn query_params(args: &Args, params: &[Param]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in params {
        let Some(v) = args.get(p.name) else { continue };
        match p.to {
            To::Query => {
                if let Ok(s) = scalar(p.name, v) {
                    out.push((p.name.to_string(), s));
                }
            }
            To::Prefix(prefix) => {
                for (k, v) in v.as_object().into_iter().flatten() {
                    if let Ok(s) = scalar(k, v) {
                        out.push((format!("{prefix}{k}"), s));
                    }
                }
            }
            To::Flag(key, value) => {
                if v.as_bool() == Some(true) {
                    out.push((key.to_string(), value.to_string()));
                }
            }
            To::Path | To::Local => {}
        }
    }
    out.extend(args.extra.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: &[Param] = &[
        req("trace_id", Kind::TraceId, "t"),
        opt("last", Kind::Duration, "w"),
        opt("limit", Kind::Limit, "n"),
        routed("attributes", Kind::Attrs, To::Prefix("attr."), "a"),
        routed("scores", Kind::Bool, To::Flag("include", "scores"), "s"),
    ];
    const LIMITS: Option<Limits> = Some(Limits { default: 20, max: 100 });

    fn check(v: Value) -> Result<Args, ArgError> {
        Args::check(v.as_object(), PARAMS, LIMITS, false)
    }

    #[test]
    fn errors_name_the_argument() {
        let tid = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert!(check(json!({"trace_id": tid, "last": "15m", "limit": 100})).is_ok());
        let e = |v| check(v).unwrap_err().0;
        assert_eq!(e(json!({})), "argument `trace_id`: is required");
        assert!(e(json!({"trace_id": "xyz"})).starts_with("argument `trace_id`: \"xyz\" is not 32 hex digits"));
        assert!(e(json!({"trace_id": tid, "last": "5parsecs"})).starts_with("argument `last`:"));
        assert!(e(json!({"trace_id": tid, "last": "5"})).starts_with("argument `last`:"));
        assert_eq!(
            e(json!({"trace_id": tid, "limit": 101})),
            "argument `limit`: must be an integer from 1 to 100"
        );
        assert!(e(json!({"trace_id": tid, "limti": 1})).starts_with(
            "argument `limti`: unknown argument; this tool takes trace_id, last, limit, attributes, scores"
        ));
        assert!(e(json!({"trace_id": tid, "attributes": {"k": [1]}})).starts_with("argument `attributes.k`"));
    }

    #[test]
    fn arguments_become_query_parameters() {
        let a = check(json!({"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "last": "1h", "attributes": {"http.route": "/x", "code": 200}, "scores": true})).unwrap();
        let q = query_params(&a, PARAMS);
        assert_eq!(
            q,
            [
                ("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
                ("last", "1h"),
                ("attr.code", "200"),
                ("attr.http.route", "/x"),
                ("include", "scores")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn open_tools_pass_unknown_arguments_on() {
        let a = Args::check(json!({"lookback": "1h", "depth": 3}).as_object(), &[], None, true).unwrap();
        assert_eq!(
            a.extra,
            vec![("depth".into(), "3".into()), ("lookback".into(), "1h".into())]
        );
    }

    #[test]
    fn the_schema_lists_every_argument() {
        let s = input_schema(PARAMS, LIMITS, false);
        assert_eq!(s["required"], json!(["trace_id"]));
        assert_eq!(s["properties"]["limit"]["maximum"], 100);
        assert_eq!(s["properties"]["limit"]["default"], 20);
        assert_eq!(s["additionalProperties"], false);
    }
}
