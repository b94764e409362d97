//! OTLP/JSON request bodies → the prost export requests.
//!
//! Implements the OTLP/JSON encoding
//! (<https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>),
//! which is the proto3 JSON mapping with OTLP's deviations, leniently as
//! proto3 JSON parsers do:
//!
//! - field names in lowerCamelCase or as the original snake_case proto names;
//!   unknown fields are ignored; `null` means "default" (absent) everywhere;
//! - trace and span ids are hex (either case), not base64; `""` is no id;
//! - 64- and 32-bit integers are JSON numbers or decimal strings (an integral
//!   number such as `1.0` or `"1e3"` is accepted too);
//! - enums are numbers (any `int32`: proto3 enums are open, the converters
//!   validate them) or the proto enum value names;
//! - doubles are numbers, numeric strings, or `"NaN"`, `"Infinity"`,
//!   `"-Infinity"`;
//! - `bytesValue` is base64, standard or URL-safe, with or without padding;
//! - at most one member of a oneof (an `AnyValue`'s value, a metric's data,
//!   a point's `asInt`/`asDouble`) may be set; `{}` sets none.
//!
//! A field given twice keeps its last value.
//!
//! serde_json parses the body once into a tree that borrows keys and strings
//! from it, which is then walked and consumed. Errors name the JSON path of
//! the problem, spelled as the sender spelled it, e.g.
//! `resourceSpans[0].scopeSpans[0].spans[2].traceId: "xyz" is not hex`.
//! Only the shape of the document is checked here; id lengths, enum ranges and
//! timestamps are validated per record by `spans_from_otlp` and friends, so
//! that one bad record does not reject its whole batch.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1 as pc;
use opentelemetry_proto::tonic::logs::v1 as pl;
use opentelemetry_proto::tonic::metrics::v1 as pm;
use opentelemetry_proto::tonic::resource::v1 as pr;
use opentelemetry_proto::tonic::trace::v1 as pt;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::ModelError;

type R<T> = Result<T, ModelError>;

/// Parses an OTLP/JSON `ExportTraceServiceRequest` body.
pub fn trace_request_from_json(body: &[u8]) -> Result<ExportTraceServiceRequest, ModelError> {
    message(
        parse(body)?,
        &Path::Root,
        |req: &mut ExportTraceServiceRequest, k, v, p| {
            if let "resourceSpans" | "resource_spans" = k {
                req.resource_spans = list(v, p, |v, p| message(v, p, resource_spans_field))?;
            }
            Ok(())
        },
    )
}

/// Parses an OTLP/JSON `ExportLogsServiceRequest` body.
pub fn logs_request_from_json(body: &[u8]) -> Result<ExportLogsServiceRequest, ModelError> {
    message(
        parse(body)?,
        &Path::Root,
        |req: &mut ExportLogsServiceRequest, k, v, p| {
            if let "resourceLogs" | "resource_logs" = k {
                req.resource_logs = list(v, p, |v, p| message(v, p, resource_logs_field))?;
            }
            Ok(())
        },
    )
}

/// Parses an OTLP/JSON `ExportMetricsServiceRequest` body.
pub fn metrics_request_from_json(body: &[u8]) -> Result<ExportMetricsServiceRequest, ModelError> {
    message(
        parse(body)?,
        &Path::Root,
        |req: &mut ExportMetricsServiceRequest, k, v, p| {
            if let "resourceMetrics" | "resource_metrics" = k {
                req.resource_metrics = list(v, p, |v, p| message(v, p, resource_metrics_field))?;
            }
            Ok(())
        },
    )
}

fn parse(body: &[u8]) -> R<Json<'_>> {
    // A UTF-8 byte order mark is not JSON, but some clients send one.
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let v: Json<'_> =
        serde_json::from_slice(body).map_err(|e| ModelError::new(format!("invalid OTLP/JSON request body: {e}")))?;
    if !matches!(v, Json::Obj(_)) {
        return Err(ModelError::new(format!(
            "OTLP/JSON request body must be a JSON object, got {}",
            show(&v)
        )));
    }
    Ok(v)
}

// ------------------------------------------------------------ the tree

/// A JSON document borrowing its keys and (unescaped) strings from the body,
/// with objects as lists in document order: cheaper to build than a
/// `serde_json::Value` (no map nodes, no copies), and consumed once.
/// serde_json still does the parsing, with its nesting limit of 128.
enum Json<'a> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(Cow<'a, str>),
    Arr(Vec<Json<'a>>),
    Obj(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        Json::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Json<'de>, E> {
        Ok(Json::U64(n))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Json<'de>, E> {
        Ok(Json::I64(n))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Json<'de>, E> {
        Ok(Json::F64(n))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E>(self, s: String) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Arr(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(Key(k)) = map.next_key()? {
            fields.push((k, map.next_value()?));
        }
        Ok(Json::Obj(fields))
    }
}

/// An object key, borrowed when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

// ---------------------------------------------------------------- paths

/// Where a value is in the document; only formatted when there is an error.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => f.write_str("(request)"),
            Path::Field(Path::Root, name) => f.write_str(name),
            Path::Field(parent, name) => write!(f, "{parent}.{name}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

fn err(path: &Path<'_>, msg: impl fmt::Display) -> ModelError {
    ModelError::new(format!("{path}: {msg}"))
}

/// A short rendering of an unexpected value: scalars as JSON, containers by kind.
fn show(v: &Json<'_>) -> String {
    match v {
        Json::Obj(_) => "an object".into(),
        Json::Arr(_) => "an array".into(),
        Json::Str(s) => quoted(s),
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::U64(n) => n.to_string(),
        Json::I64(n) => n.to_string(),
        Json::F64(n) => serde_json::Value::from(*n).to_string(),
    }
}

fn quoted(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return serde_json::Value::from(s).to_string();
    }
    let mut cut = MAX;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut shown = serde_json::Value::from(&s[..cut]).to_string();
    shown.insert(shown.len() - 1, '…');
    shown
}

fn wrong_type(path: &Path<'_>, want: &str, got: &Json<'_>) -> ModelError {
    err(path, format!("expected {want}, got {}", show(got)))
}

// ---------------------------------------------------------- structure

/// Handles one present (non-null) field of a message.
type FieldFn<T> = for<'a> fn(&mut T, &str, Json<'a>, &Path<'_>) -> R<()>;

/// Decodes a message: an object whose fields are handed to `field` in
/// document order (so a repeated field's last value wins); `null` is the
/// default message, and null fields are skipped (left at default).
fn message<'a, T: Default>(
    v: Json<'a>,
    path: &Path<'_>,
    mut field: impl FnMut(&mut T, &str, Json<'a>, &Path<'_>) -> R<()>,
) -> R<T> {
    let fields = match v {
        Json::Obj(fields) => fields,
        Json::Null => return Ok(T::default()),
        other => return Err(wrong_type(path, "an object", &other)),
    };
    let mut out = T::default();
    for (k, v) in fields {
        if !matches!(v, Json::Null) {
            field(&mut out, &k, v, &Path::Field(path, &k))?;
        }
    }
    Ok(out)
}

fn list<'a, T>(v: Json<'a>, path: &Path<'_>, mut item: impl FnMut(Json<'a>, &Path<'_>) -> R<T>) -> R<Vec<T>> {
    match v {
        Json::Arr(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| item(v, &Path::Index(path, i)))
            .collect(),
        Json::Null => Ok(Vec::new()),
        other => Err(wrong_type(path, "an array", &other)),
    }
}

fn messages<T: Default>(v: Json<'_>, path: &Path<'_>, field: FieldFn<T>) -> R<Vec<T>> {
    list(v, path, |v, p| message(v, p, field))
}

// ------------------------------------------------------------ scalars

fn string(v: Json<'_>, path: &Path<'_>) -> R<String> {
    match v {
        Json::Str(s) => Ok(s.into_owned()),
        Json::Null => Ok(String::new()),
        other => Err(wrong_type(path, "a string", &other)),
    }
}

fn boolean(v: Json<'_>, path: &Path<'_>) -> R<bool> {
    match v {
        Json::Bool(b) => Ok(b),
        Json::Null => Ok(false),
        Json::Str(s) if s == "true" => Ok(true),
        Json::Str(s) if s == "false" => Ok(false),
        other => Err(wrong_type(path, "a boolean", &other)),
    }
}

/// The integer a JSON number or string denotes, if it is integral.
fn integer(v: &Json<'_>) -> Option<i128> {
    match v {
        Json::U64(n) => Some((*n).into()),
        Json::I64(n) => Some((*n).into()),
        // Integral doubles such as 1.0 or 1e3; saturating casts are caught by
        // the range check.
        Json::F64(f) => (f.is_finite() && f.fract() == 0.0).then_some(*f as i128),
        Json::Str(s) => s.parse::<i128>().ok().or_else(|| {
            // "1e3", "5.0": exact only within a double's integer precision.
            if !s.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) {
                return None;
            }
            s.parse::<f64>()
                .ok()
                .filter(|f| f.fract() == 0.0 && f.abs() <= (1u64 << 53) as f64)
                .map(|f| f as i128)
        }),
        _ => None,
    }
}

/// A 32- or 64-bit integer field; `ty` names the proto type for messages.
fn int<T: TryFrom<i128> + Default>(v: Json<'_>, path: &Path<'_>, ty: &str) -> R<T> {
    if matches!(v, Json::Null) {
        return Ok(T::default());
    }
    match integer(&v) {
        Some(i) => T::try_from(i).map_err(|_| err(path, format!("{} is out of range for {ty}", show(&v)))),
        None => Err(wrong_type(path, &format!("{ty} (a number or decimal string)"), &v)),
    }
}

fn u32_(v: Json<'_>, path: &Path<'_>) -> R<u32> {
    int(v, path, "a uint32")
}
fn i32_(v: Json<'_>, path: &Path<'_>) -> R<i32> {
    int(v, path, "an int32")
}
fn u64_(v: Json<'_>, path: &Path<'_>) -> R<u64> {
    int(v, path, "a uint64")
}
fn i64_(v: Json<'_>, path: &Path<'_>) -> R<i64> {
    int(v, path, "an int64")
}

fn double(v: Json<'_>, path: &Path<'_>) -> R<f64> {
    let d = match &v {
        Json::Null => Some(0.0),
        Json::F64(n) => Some(*n),
        Json::U64(n) => Some(*n as f64),
        Json::I64(n) => Some(*n as f64),
        Json::Str(s) => match s.as_ref() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            // Rust also reads "inf", "nan" and overflows as non-finite;
            // those spellings are not OTLP/JSON.
            other => other.parse::<f64>().ok().filter(|d| d.is_finite()),
        },
        _ => None,
    };
    d.ok_or_else(|| {
        wrong_type(
            path,
            "a double (a number, a numeric string, \"NaN\", \"Infinity\" or \"-Infinity\")",
            &v,
        )
    })
}

/// A trace or span id: hex in either case; `""` is no id. Lengths are
/// checked by the converters, per record.
fn hex_id(v: Json<'_>, path: &Path<'_>) -> R<Vec<u8>> {
    match v {
        Json::Str(s) => hex::decode(s.as_bytes()).map_err(|_| err(path, format!("{} is not hex", quoted(&s)))),
        Json::Null => Ok(Vec::new()),
        other => Err(wrong_type(path, "a hex string", &other)),
    }
}

/// Standard alphabet, padding optional, non-zero trailing bits tolerated.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Bytes: standard or URL-safe base64, with or without padding.
fn base64_bytes(v: Json<'_>, path: &Path<'_>) -> R<Vec<u8>> {
    let s = match v {
        Json::Str(s) => s,
        Json::Null => return Ok(Vec::new()),
        other => return Err(wrong_type(path, "a base64 string", &other)),
    };
    let decoded = if s.contains(['-', '_']) {
        let standard: String = s
            .chars()
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                c => c,
            })
            .collect();
        BASE64.decode(standard)
    } else {
        BASE64.decode(s.as_bytes())
    };
    decoded.map_err(|_| err(path, format!("{} is not base64", quoted(&s))))
}

/// An enum: its number, or its proto value name (`SPAN_KIND_SERVER`).
fn enumeration(v: Json<'_>, path: &Path<'_>, what: &str, by_name: fn(&str) -> Option<i32>) -> R<i32> {
    match &v {
        Json::Str(s) => match by_name(s) {
            Some(n) => Ok(n),
            None if s.parse::<i32>().is_ok() => i32_(v, path),
            None => Err(err(path, format!("{} is not {} {what} name", quoted(s), article(what)))),
        },
        Json::U64(_) | Json::I64(_) | Json::F64(_) | Json::Null => i32_(v, path),
        _ => Err(wrong_type(
            path,
            &format!("{} {what} (a number or name)", article(what)),
            &v,
        )),
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['A', 'E', 'I', 'O', 'U']) {
        "an"
    } else {
        "a"
    }
}

fn span_kind(v: Json<'_>, path: &Path<'_>) -> R<i32> {
    enumeration(v, path, "SpanKind", |s| {
        pt::span::SpanKind::from_str_name(s).map(|e| e as i32)
    })
}
fn status_code(v: Json<'_>, path: &Path<'_>) -> R<i32> {
    enumeration(v, path, "StatusCode", |s| {
        pt::status::StatusCode::from_str_name(s).map(|e| e as i32)
    })
}
fn severity_number(v: Json<'_>, path: &Path<'_>) -> R<i32> {
    enumeration(v, path, "SeverityNumber", |s| {
        pl::SeverityNumber::from_str_name(s).map(|e| e as i32)
    })
}
fn temporality(v: Json<'_>, path: &Path<'_>) -> R<i32> {
    enumeration(v, path, "AggregationTemporality", |s| {
        pm::AggregationTemporality::from_str_name(s).map(|e| e as i32)
    })
}

/// Sets a oneof, unless another of its members is already set.
fn set_oneof<T>(slot: &mut Option<T>, value: T, name: fn(&T) -> &'static str, path: &Path<'_>) -> R<()> {
    if let Some(prev) = slot
        && std::mem::discriminant(prev) != std::mem::discriminant(&value)
    {
        return Err(err(
            path,
            format!("{} is already set (only one of them may be)", name(prev)),
        ));
    }
    *slot = Some(value);
    Ok(())
}

// ------------------------------------------------------------- common

fn any_value(v: Json<'_>, path: &Path<'_>) -> R<pc::AnyValue> {
    message(v, path, any_value_field)
}

fn any_value_field(a: &mut pc::AnyValue, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    use pc::any_value::Value as V;
    let value = match k {
        "stringValue" | "string_value" => V::StringValue(string(v, p)?),
        "boolValue" | "bool_value" => V::BoolValue(boolean(v, p)?),
        "intValue" | "int_value" => V::IntValue(i64_(v, p)?),
        "doubleValue" | "double_value" => V::DoubleValue(double(v, p)?),
        "bytesValue" | "bytes_value" => V::BytesValue(base64_bytes(v, p)?),
        "arrayValue" | "array_value" => V::ArrayValue(message(v, p, |a: &mut pc::ArrayValue, k, v, p| {
            if k == "values" {
                a.values = list(v, p, any_value)?;
            }
            Ok(())
        })?),
        "kvlistValue" | "kvlist_value" => V::KvlistValue(message(v, p, |l: &mut pc::KeyValueList, k, v, p| {
            if k == "values" {
                l.values = key_values(v, p)?;
            }
            Ok(())
        })?),
        "stringValueStrindex" | "string_value_strindex" => V::StringValueStrindex(i32_(v, p)?),
        _ => return Ok(()),
    };
    set_oneof(&mut a.value, value, any_value_name, p)
}

fn any_value_name(v: &pc::any_value::Value) -> &'static str {
    use pc::any_value::Value as V;
    match v {
        V::StringValue(_) => "stringValue",
        V::BoolValue(_) => "boolValue",
        V::IntValue(_) => "intValue",
        V::DoubleValue(_) => "doubleValue",
        V::ArrayValue(_) => "arrayValue",
        V::KvlistValue(_) => "kvlistValue",
        V::BytesValue(_) => "bytesValue",
        V::StringValueStrindex(_) => "stringValueStrindex",
    }
}

fn key_values(v: Json<'_>, path: &Path<'_>) -> R<Vec<pc::KeyValue>> {
    messages(v, path, |kv: &mut pc::KeyValue, k, v, p| {
        match k {
            "key" => kv.key = string(v, p)?,
            "value" => kv.value = Some(any_value(v, p)?),
            "keyStrindex" | "key_strindex" => kv.key_strindex = i32_(v, p)?,
            _ => {}
        }
        Ok(())
    })
}

fn strings(v: Json<'_>, path: &Path<'_>) -> R<Vec<String>> {
    list(v, path, string)
}

fn resource_field(r: &mut pr::Resource, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "attributes" => r.attributes = key_values(v, p)?,
        "droppedAttributesCount" | "dropped_attributes_count" => r.dropped_attributes_count = u32_(v, p)?,
        "entityRefs" | "entity_refs" => {
            r.entity_refs = messages(v, p, |e: &mut pc::EntityRef, k, v, p| {
                match k {
                    "schemaUrl" | "schema_url" => e.schema_url = string(v, p)?,
                    "type" => e.r#type = string(v, p)?,
                    "idKeys" | "id_keys" => e.id_keys = strings(v, p)?,
                    "descriptionKeys" | "description_keys" => e.description_keys = strings(v, p)?,
                    _ => {}
                }
                Ok(())
            })?
        }
        _ => {}
    }
    Ok(())
}

fn scope_field(s: &mut pc::InstrumentationScope, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "name" => s.name = string(v, p)?,
        "version" => s.version = string(v, p)?,
        "attributes" => s.attributes = key_values(v, p)?,
        "droppedAttributesCount" | "dropped_attributes_count" => s.dropped_attributes_count = u32_(v, p)?,
        _ => {}
    }
    Ok(())
}

// ------------------------------------------------------------- traces

fn resource_spans_field(rs: &mut pt::ResourceSpans, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "resource" => rs.resource = Some(message(v, p, resource_field)?),
        "scopeSpans" | "scope_spans" => rs.scope_spans = messages(v, p, scope_spans_field)?,
        "schemaUrl" | "schema_url" => rs.schema_url = string(v, p)?,
        _ => {}
    }
    Ok(())
}

fn scope_spans_field(ss: &mut pt::ScopeSpans, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "scope" => ss.scope = Some(message(v, p, scope_field)?),
        "spans" => ss.spans = messages(v, p, span_field)?,
        "schemaUrl" | "schema_url" => ss.schema_url = string(v, p)?,
        _ => {}
    }
    Ok(())
}

fn span_field(s: &mut pt::Span, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "traceId" | "trace_id" => s.trace_id = hex_id(v, p)?,
        "spanId" | "span_id" => s.span_id = hex_id(v, p)?,
        "traceState" | "trace_state" => s.trace_state = string(v, p)?,
        "parentSpanId" | "parent_span_id" => s.parent_span_id = hex_id(v, p)?,
        "flags" => s.flags = u32_(v, p)?,
        "name" => s.name = string(v, p)?,
        "kind" => s.kind = span_kind(v, p)?,
        "startTimeUnixNano" | "start_time_unix_nano" => s.start_time_unix_nano = u64_(v, p)?,
        "endTimeUnixNano" | "end_time_unix_nano" => s.end_time_unix_nano = u64_(v, p)?,
        "attributes" => s.attributes = key_values(v, p)?,
        "droppedAttributesCount" | "dropped_attributes_count" => s.dropped_attributes_count = u32_(v, p)?,
        "events" => s.events = messages(v, p, event_field)?,
        "droppedEventsCount" | "dropped_events_count" => s.dropped_events_count = u32_(v, p)?,
        "links" => s.links = messages(v, p, link_field)?,
        "droppedLinksCount" | "dropped_links_count" => s.dropped_links_count = u32_(v, p)?,
        "status" => {
            s.status = Some(message(v, p, |st: &mut pt::Status, k, v, p| {
                match k {
                    "message" => st.message = string(v, p)?,
                    "code" => st.code = status_code(v, p)?,
                    _ => {}
                }
                Ok(())
            })?)
        }
        _ => {}
    }
    Ok(())
}

fn event_field(e: &mut pt::span::Event, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "timeUnixNano" | "time_unix_nano" => e.time_unix_nano = u64_(v, p)?,
        "name" => e.name = string(v, p)?,
        "attributes" => e.attributes = key_values(v, p)?,
        "droppedAttributesCount" | "dropped_attributes_count" => e.dropped_attributes_count = u32_(v, p)?,
        _ => {}
    }
    Ok(())
}

fn link_field(l: &mut pt::span::Link, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "traceId" | "trace_id" => l.trace_id = hex_id(v, p)?,
        "spanId" | "span_id" => l.span_id = hex_id(v, p)?,
        "traceState" | "trace_state" => l.trace_state = string(v, p)?,
        "attributes" => l.attributes = key_values(v, p)?,
        "droppedAttributesCount" | "dropped_attributes_count" => l.dropped_attributes_count = u32_(v, p)?,
        "flags" => l.flags = u32_(v, p)?,
        _ => {}
    }
    Ok(())
}

// --------------------------------------------------------------- logs

fn resource_logs_field(rl: &mut pl::ResourceLogs, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "resource" => rl.resource = Some(message(v, p, resource_field)?),
        "scopeLogs" | "scope_logs" => rl.scope_logs = messages(v, p, scope_logs_field)?,
        "schemaUrl" | "schema_url" => rl.schema_url = string(v, p)?,
        _ => {}
    }
    Ok(())
}

fn scope_logs_field(sl: &mut pl::ScopeLogs, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "scope" => sl.scope = Some(message(v, p, scope_field)?),
        "logRecords" | "log_records" => sl.log_records = messages(v, p, log_record_field)?,
        "schemaUrl" | "schema_url" => sl.schema_url = string(v, p)?,
        _ => {}
    }
    Ok(())
}

fn log_record_field(r: &mut pl::LogRecord, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "timeUnixNano" | "time_unix_nano" => r.time_unix_nano = u64_(v, p)?,
        "observedTimeUnixNano" | "observed_time_unix_nano" => r.observed_time_unix_nano = u64_(v, p)?,
        "severityNumber" | "severity_number" => r.severity_number = severity_number(v, p)?,
        "severityText" | "severity_text" => r.severity_text = string(v, p)?,
        "body" => r.body = Some(any_value(v, p)?),
        "attributes" => r.attributes = key_values(v, p)?,
        "droppedAttributesCount" | "dropped_attributes_count" => r.dropped_attributes_count = u32_(v, p)?,
        "flags" => r.flags = u32_(v, p)?,
        "traceId" | "trace_id" => r.trace_id = hex_id(v, p)?,
        "spanId" | "span_id" => r.span_id = hex_id(v, p)?,
        "eventName" | "event_name" => r.event_name = string(v, p)?,
        _ => {}
    }
    Ok(())
}

// ------------------------------------------------------------ metrics

fn resource_metrics_field(rm: &mut pm::ResourceMetrics, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "resource" => rm.resource = Some(message(v, p, resource_field)?),
        "scopeMetrics" | "scope_metrics" => rm.scope_metrics = messages(v, p, scope_metrics_field)?,
        "schemaUrl" | "schema_url" => rm.schema_url = string(v, p)?,
        _ => {}
    }
    Ok(())
}

fn scope_metrics_field(sm: &mut pm::ScopeMetrics, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "scope" => sm.scope = Some(message(v, p, scope_field)?),
        "metrics" => sm.metrics = messages(v, p, metric_field)?,
        "schemaUrl" | "schema_url" => sm.schema_url = string(v, p)?,
        _ => {}
    }
    Ok(())
}

fn metric_field(m: &mut pm::Metric, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    use pm::metric::Data;
    let data = match k {
        "name" => {
            m.name = string(v, p)?;
            return Ok(());
        }
        "description" => {
            m.description = string(v, p)?;
            return Ok(());
        }
        "unit" => {
            m.unit = string(v, p)?;
            return Ok(());
        }
        "metadata" => {
            m.metadata = key_values(v, p)?;
            return Ok(());
        }
        "gauge" => Data::Gauge(message(v, p, |g: &mut pm::Gauge, k, v, p| {
            if let "dataPoints" | "data_points" = k {
                g.data_points = messages(v, p, number_point_field)?;
            }
            Ok(())
        })?),
        "sum" => Data::Sum(message(v, p, |s: &mut pm::Sum, k, v, p| {
            match k {
                "dataPoints" | "data_points" => s.data_points = messages(v, p, number_point_field)?,
                "aggregationTemporality" | "aggregation_temporality" => s.aggregation_temporality = temporality(v, p)?,
                "isMonotonic" | "is_monotonic" => s.is_monotonic = boolean(v, p)?,
                _ => {}
            }
            Ok(())
        })?),
        "histogram" => Data::Histogram(message(v, p, |h: &mut pm::Histogram, k, v, p| {
            match k {
                "dataPoints" | "data_points" => h.data_points = messages(v, p, histogram_point_field)?,
                "aggregationTemporality" | "aggregation_temporality" => h.aggregation_temporality = temporality(v, p)?,
                _ => {}
            }
            Ok(())
        })?),
        "exponentialHistogram" | "exponential_histogram" => {
            Data::ExponentialHistogram(message(v, p, |h: &mut pm::ExponentialHistogram, k, v, p| {
                match k {
                    "dataPoints" | "data_points" => h.data_points = messages(v, p, exp_histogram_point_field)?,
                    "aggregationTemporality" | "aggregation_temporality" => {
                        h.aggregation_temporality = temporality(v, p)?
                    }
                    _ => {}
                }
                Ok(())
            })?)
        }
        "summary" => Data::Summary(message(v, p, |s: &mut pm::Summary, k, v, p| {
            if let "dataPoints" | "data_points" = k {
                s.data_points = messages(v, p, summary_point_field)?;
            }
            Ok(())
        })?),
        _ => return Ok(()),
    };
    set_oneof(&mut m.data, data, data_name, p)
}

fn data_name(d: &pm::metric::Data) -> &'static str {
    use pm::metric::Data;
    match d {
        Data::Gauge(_) => "gauge",
        Data::Sum(_) => "sum",
        Data::Histogram(_) => "histogram",
        Data::ExponentialHistogram(_) => "exponentialHistogram",
        Data::Summary(_) => "summary",
    }
}

fn number_point_field(d: &mut pm::NumberDataPoint, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    use pm::number_data_point::Value as V;
    fn name(v: &V) -> &'static str {
        match v {
            V::AsDouble(_) => "asDouble",
            V::AsInt(_) => "asInt",
        }
    }
    match k {
        "attributes" => d.attributes = key_values(v, p)?,
        "startTimeUnixNano" | "start_time_unix_nano" => d.start_time_unix_nano = u64_(v, p)?,
        "timeUnixNano" | "time_unix_nano" => d.time_unix_nano = u64_(v, p)?,
        "exemplars" => d.exemplars = messages(v, p, exemplar_field)?,
        "flags" => d.flags = u32_(v, p)?,
        "asDouble" | "as_double" => set_oneof(&mut d.value, V::AsDouble(double(v, p)?), name, p)?,
        "asInt" | "as_int" => set_oneof(&mut d.value, V::AsInt(i64_(v, p)?), name, p)?,
        _ => {}
    }
    Ok(())
}

fn histogram_point_field(d: &mut pm::HistogramDataPoint, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "attributes" => d.attributes = key_values(v, p)?,
        "startTimeUnixNano" | "start_time_unix_nano" => d.start_time_unix_nano = u64_(v, p)?,
        "timeUnixNano" | "time_unix_nano" => d.time_unix_nano = u64_(v, p)?,
        "count" => d.count = u64_(v, p)?,
        "sum" => d.sum = Some(double(v, p)?),
        "bucketCounts" | "bucket_counts" => d.bucket_counts = list(v, p, u64_)?,
        "explicitBounds" | "explicit_bounds" => d.explicit_bounds = list(v, p, double)?,
        "exemplars" => d.exemplars = messages(v, p, exemplar_field)?,
        "flags" => d.flags = u32_(v, p)?,
        "min" => d.min = Some(double(v, p)?),
        "max" => d.max = Some(double(v, p)?),
        _ => {}
    }
    Ok(())
}

fn exp_histogram_point_field(d: &mut pm::ExponentialHistogramDataPoint, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    fn buckets(v: Json<'_>, p: &Path<'_>) -> R<pm::exponential_histogram_data_point::Buckets> {
        message(
            v,
            p,
            |b: &mut pm::exponential_histogram_data_point::Buckets, k, v, p| {
                match k {
                    "offset" => b.offset = i32_(v, p)?,
                    "bucketCounts" | "bucket_counts" => b.bucket_counts = list(v, p, u64_)?,
                    _ => {}
                }
                Ok(())
            },
        )
    }
    match k {
        "attributes" => d.attributes = key_values(v, p)?,
        "startTimeUnixNano" | "start_time_unix_nano" => d.start_time_unix_nano = u64_(v, p)?,
        "timeUnixNano" | "time_unix_nano" => d.time_unix_nano = u64_(v, p)?,
        "count" => d.count = u64_(v, p)?,
        "sum" => d.sum = Some(double(v, p)?),
        "scale" => d.scale = i32_(v, p)?,
        "zeroCount" | "zero_count" => d.zero_count = u64_(v, p)?,
        "positive" => d.positive = Some(buckets(v, p)?),
        "negative" => d.negative = Some(buckets(v, p)?),
        "flags" => d.flags = u32_(v, p)?,
        "exemplars" => d.exemplars = messages(v, p, exemplar_field)?,
        "min" => d.min = Some(double(v, p)?),
        "max" => d.max = Some(double(v, p)?),
        "zeroThreshold" | "zero_threshold" => d.zero_threshold = double(v, p)?,
        _ => {}
    }
    Ok(())
}

fn summary_point_field(d: &mut pm::SummaryDataPoint, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    match k {
        "attributes" => d.attributes = key_values(v, p)?,
        "startTimeUnixNano" | "start_time_unix_nano" => d.start_time_unix_nano = u64_(v, p)?,
        "timeUnixNano" | "time_unix_nano" => d.time_unix_nano = u64_(v, p)?,
        "count" => d.count = u64_(v, p)?,
        "sum" => d.sum = double(v, p)?,
        "quantileValues" | "quantile_values" => {
            d.quantile_values = messages(v, p, |q: &mut pm::summary_data_point::ValueAtQuantile, k, v, p| {
                match k {
                    "quantile" => q.quantile = double(v, p)?,
                    "value" => q.value = double(v, p)?,
                    _ => {}
                }
                Ok(())
            })?
        }
        "flags" => d.flags = u32_(v, p)?,
        _ => {}
    }
    Ok(())
}

fn exemplar_field(e: &mut pm::Exemplar, k: &str, v: Json<'_>, p: &Path<'_>) -> R<()> {
    use pm::exemplar::Value as V;
    fn name(v: &V) -> &'static str {
        match v {
            V::AsDouble(_) => "asDouble",
            V::AsInt(_) => "asInt",
        }
    }
    match k {
        "filteredAttributes" | "filtered_attributes" => e.filtered_attributes = key_values(v, p)?,
        "timeUnixNano" | "time_unix_nano" => e.time_unix_nano = u64_(v, p)?,
        "spanId" | "span_id" => e.span_id = hex_id(v, p)?,
        "traceId" | "trace_id" => e.trace_id = hex_id(v, p)?,
        "asDouble" | "as_double" => set_oneof(&mut e.value, V::AsDouble(double(v, p)?), name, p)?,
        "asInt" | "as_int" => set_oneof(&mut e.value, V::AsInt(i64_(v, p)?), name, p)?,
        _ => {}
    }
    Ok(())
}
