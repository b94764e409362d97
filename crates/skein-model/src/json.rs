//! The OTLP/JSON mapping of values, attributes, events, links, resources and
//! scopes, used by Skein's Parquet columns (an open, lossless, typed text
//! form) and by the API's `format=otlp`. The plain JSON form the API shows
//! people and agents is in `plain`.
//!
//! OTLP/JSON rules followed here: 64-bit integers are strings, doubles are
//! numbers except NaN/±Infinity which are strings, bytes are base64, ids are
//! hex, enums are numbers, field names are lowerCamelCase.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::error::ModelError;
use crate::ids::{SpanId, TraceId};
use crate::resource::{EntityRef, Resource, Scope};
use crate::span::{Event, Link};
use crate::value::{AnyValue, KeyValue};

/// Serializes an [`AnyValue`] in the OTLP/JSON mapping.
pub struct OtlpValue<'a>(pub &'a AnyValue);
/// Serializes an attribute list in the OTLP/JSON mapping.
pub struct OtlpAttrs<'a>(pub &'a [KeyValue]);
pub struct OtlpEvents<'a>(pub &'a [Event]);
pub struct OtlpLinks<'a>(pub &'a [Link]);
pub struct OtlpResource<'a>(pub &'a Resource);
pub struct OtlpScope<'a>(pub &'a Scope);

/// A double in OTLP/JSON: a number, or "NaN" / "Infinity" / "-Infinity".
pub fn double_json(d: f64) -> Value {
    if d.is_nan() {
        Value::from("NaN")
    } else if d == f64::INFINITY {
        Value::from("Infinity")
    } else if d == f64::NEG_INFINITY {
        Value::from("-Infinity")
    } else {
        Value::from(d)
    }
}

impl Serialize for OtlpValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        match self.0 {
            AnyValue::Empty => {}
            AnyValue::Str(v) => m.serialize_entry("stringValue", v)?,
            AnyValue::Bool(v) => m.serialize_entry("boolValue", v)?,
            AnyValue::Int(v) => m.serialize_entry("intValue", &v.to_string())?,
            AnyValue::Double(v) => m.serialize_entry("doubleValue", &double_json(*v))?,
            AnyValue::Bytes(v) => m.serialize_entry("bytesValue", &B64.encode(v))?,
            AnyValue::Array(v) => m.serialize_entry("arrayValue", &ValuesWrap(v))?,
            AnyValue::Map(v) => m.serialize_entry("kvlistValue", &KvWrap(v))?,
        }
        m.end()
    }
}

struct ValuesWrap<'a>(&'a [AnyValue]);
impl Serialize for ValuesWrap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("values", &ValueList(self.0))?;
        m.end()
    }
}
struct ValueList<'a>(&'a [AnyValue]);
impl Serialize for ValueList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for v in self.0 {
            seq.serialize_element(&OtlpValue(v))?;
        }
        seq.end()
    }
}
struct KvWrap<'a>(&'a [KeyValue]);
impl Serialize for KvWrap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("values", &OtlpAttrs(self.0))?;
        m.end()
    }
}

impl Serialize for OtlpAttrs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for kv in self.0 {
            seq.serialize_element(&OtlpKv(kv))?;
        }
        seq.end()
    }
}
struct OtlpKv<'a>(&'a KeyValue);
impl Serialize for OtlpKv<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("key", &self.0.key)?;
        m.serialize_entry("value", &OtlpValue(&self.0.value))?;
        m.end()
    }
}

impl Serialize for OtlpEvents<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for e in self.0 {
            seq.serialize_element(&OtlpEvent(e))?;
        }
        seq.end()
    }
}
struct OtlpEvent<'a>(&'a Event);
impl Serialize for OtlpEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("timeUnixNano", &e.time_unix_nano.to_string())?;
        m.serialize_entry("name", &e.name)?;
        m.serialize_entry("attributes", &OtlpAttrs(&e.attributes))?;
        if e.dropped_attributes_count != 0 {
            m.serialize_entry("droppedAttributesCount", &e.dropped_attributes_count)?;
        }
        m.end()
    }
}

impl Serialize for OtlpLinks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for l in self.0 {
            seq.serialize_element(&OtlpLink(l))?;
        }
        seq.end()
    }
}
struct OtlpLink<'a>(&'a Link);
impl Serialize for OtlpLink<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let l = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("traceId", &l.trace_id.to_hex())?;
        m.serialize_entry("spanId", &l.span_id.to_hex())?;
        if !l.trace_state.is_empty() {
            m.serialize_entry("traceState", &l.trace_state)?;
        }
        m.serialize_entry("attributes", &OtlpAttrs(&l.attributes))?;
        if l.dropped_attributes_count != 0 {
            m.serialize_entry("droppedAttributesCount", &l.dropped_attributes_count)?;
        }
        if l.flags != 0 {
            m.serialize_entry("flags", &l.flags)?;
        }
        m.end()
    }
}

impl Serialize for OtlpResource<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("attributes", &OtlpAttrs(&r.attributes))?;
        if r.dropped_attributes_count != 0 {
            m.serialize_entry("droppedAttributesCount", &r.dropped_attributes_count)?;
        }
        if !r.entity_refs.is_empty() {
            let refs: Vec<Value> = r
                .entity_refs
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "schemaUrl": e.schema_url,
                        "type": e.entity_type,
                        "idKeys": e.id_keys,
                        "descriptionKeys": e.description_keys,
                    })
                })
                .collect();
            m.serialize_entry("entityRefs", &refs)?;
        }
        if !r.schema_url.is_empty() {
            m.serialize_entry("schemaUrl", &r.schema_url)?;
        }
        m.end()
    }
}

impl Serialize for OtlpScope<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let sc = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &sc.name)?;
        if !sc.version.is_empty() {
            m.serialize_entry("version", &sc.version)?;
        }
        if !sc.attributes.is_empty() {
            m.serialize_entry("attributes", &OtlpAttrs(&sc.attributes))?;
        }
        if sc.dropped_attributes_count != 0 {
            m.serialize_entry("droppedAttributesCount", &sc.dropped_attributes_count)?;
        }
        if !sc.schema_url.is_empty() {
            m.serialize_entry("schemaUrl", &sc.schema_url)?;
        }
        m.end()
    }
}

/// Whether `bytes` holds a quote, a backslash or a control character, eight
/// bytes at a time. (Almost no label needs escaping; a byte loop with three
/// comparisons was a tenth of writing a part's columns.) Exact, though a
/// false positive would only cost the slow path.
fn may_need_escaping(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::MAX / 255;
    const HIGHS: u64 = ONES * 0x80;
    // Some byte of `x` is below `n` (n <= 0x80), or is zero.
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGHS != 0;
    let zero = |x: u64| below(x, 1);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        if below(x, 0x20) || zero(x ^ (ONES * b'"' as u64)) || zero(x ^ (ONES * b'\\' as u64)) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Appends `s` as a JSON string literal (the escaping serde_json uses).
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    if !may_need_escaping(bytes) {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

fn push_value(out: &mut String, v: &AnyValue) {
    match v {
        AnyValue::Empty => out.push_str("{}"),
        AnyValue::Str(s) => {
            out.push_str("{\"stringValue\":");
            push_json_str(out, s);
            out.push('}');
        }
        AnyValue::Bool(b) => out.push_str(if *b {
            "{\"boolValue\":true}"
        } else {
            "{\"boolValue\":false}"
        }),
        AnyValue::Int(i) => {
            out.push_str("{\"intValue\":\"");
            out.push_str(&i.to_string());
            out.push_str("\"}");
        }
        AnyValue::Double(d) => {
            out.push_str("{\"doubleValue\":");
            out.push_str(&double_json(*d).to_string());
            out.push('}');
        }
        AnyValue::Bytes(b) => {
            out.push_str("{\"bytesValue\":\"");
            out.push_str(&B64.encode(b));
            out.push_str("\"}");
        }
        AnyValue::Array(a) => {
            out.push_str("{\"arrayValue\":{\"values\":[");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_value(out, v);
            }
            out.push_str("]}}");
        }
        AnyValue::Map(m) => {
            out.push_str("{\"kvlistValue\":{\"values\":");
            push_attrs(out, m);
            out.push_str("}}");
        }
    }
}

/// Appends an attribute list in the OTLP/JSON mapping to `out` (the text
/// of [`attrs_to_json_string`]).
pub fn push_attrs(out: &mut String, attrs: &[KeyValue]) {
    out.push('[');
    for (i, kv) in attrs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":");
        push_json_str(out, &kv.key);
        out.push_str(",\"value\":");
        push_value(out, &kv.value);
        out.push('}');
    }
    out.push(']');
}

/// An attribute list in the OTLP/JSON mapping, written directly (the same
/// text as serializing [`OtlpAttrs`], several times faster: it is on the
/// flush path of every part).
pub fn attrs_to_json_string(attrs: &[KeyValue]) -> String {
    let mut out = String::with_capacity(48 * attrs.len() + 2);
    push_attrs(&mut out, attrs);
    out
}

/// Serializes any of the wrappers above to a JSON string.
pub fn to_json_string<T: Serialize>(v: &T) -> String {
    // Serializing these types cannot fail: keys are strings, no I/O.
    serde_json::to_string(v).unwrap_or_default()
}

// ---------------------------------------------------------------- parsing

fn bad(what: &str, v: &Value) -> ModelError {
    let mut shown = v.to_string();
    if shown.len() > 80 {
        let mut cut = 80;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    ModelError::new(format!("{what}: unexpected {shown}"))
}

/// Parses a 64-bit integer that OTLP/JSON sends as a string or a number.
pub fn json_i64(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                .map(|f| f as i64)
        }),
        _ => None,
    }
}

pub fn json_u64(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

pub fn json_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            other => other.parse().ok(),
        },
        _ => None,
    }
}

/// Parses an OTLP/JSON `AnyValue` object.
pub fn any_value_from_json(v: &Value) -> Result<AnyValue, ModelError> {
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => return Ok(AnyValue::Empty),
        other => return Err(bad("AnyValue must be an object", other)),
    };
    let Some((k, inner)) = obj.iter().next() else {
        return Ok(AnyValue::Empty);
    };
    Ok(match k.as_str() {
        "stringValue" | "string_value" => {
            AnyValue::Str(inner.as_str().ok_or_else(|| bad("stringValue", inner))?.to_string())
        }
        "boolValue" | "bool_value" => AnyValue::Bool(inner.as_bool().ok_or_else(|| bad("boolValue", inner))?),
        "intValue" | "int_value" => AnyValue::Int(json_i64(inner).ok_or_else(|| bad("intValue", inner))?),
        "doubleValue" | "double_value" => AnyValue::Double(json_f64(inner).ok_or_else(|| bad("doubleValue", inner))?),
        "bytesValue" | "bytes_value" => {
            let s = inner.as_str().ok_or_else(|| bad("bytesValue", inner))?;
            AnyValue::Bytes(B64.decode(s).map_err(|_| bad("bytesValue is not base64", inner))?)
        }
        "arrayValue" | "array_value" => {
            let values = match inner.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a.iter().map(any_value_from_json).collect::<Result<_, _>>()?,
                Some(other) => return Err(bad("arrayValue.values", other)),
            };
            AnyValue::Array(values)
        }
        "kvlistValue" | "kvlist_value" => AnyValue::Map(match inner.get("values") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => attrs_from_json(v)?,
        }),
        other => return Err(ModelError::new(format!("AnyValue: unknown field {other:?}"))),
    })
}

/// Parses an OTLP/JSON attribute list (`[{"key": …, "value": {…}}]`).
pub fn attrs_from_json(v: &Value) -> Result<Vec<KeyValue>, ModelError> {
    let arr = match v {
        Value::Array(a) => a,
        Value::Null => return Ok(Vec::new()),
        other => return Err(bad("attributes must be an array", other)),
    };
    arr.iter()
        .map(|kv| {
            let key = kv
                .get("key")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("attribute needs a string key", kv))?;
            let value = match kv.get("value") {
                None => AnyValue::Empty,
                Some(v) => any_value_from_json(v)?,
            };
            Ok(KeyValue {
                key: key.to_string(),
                value,
            })
        })
        .collect()
}

fn get_u32(o: &Value, key: &str) -> u32 {
    o.get(key).and_then(json_u64).unwrap_or(0) as u32
}
fn get_str(o: &Value, key: &str) -> String {
    o.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}
fn get_attrs(o: &Value) -> Result<Vec<KeyValue>, ModelError> {
    o.get("attributes").map(attrs_from_json).unwrap_or(Ok(Vec::new()))
}

pub fn events_from_json(v: &Value) -> Result<Vec<Event>, ModelError> {
    let Value::Array(arr) = v else {
        return if v.is_null() {
            Ok(Vec::new())
        } else {
            Err(bad("events", v))
        };
    };
    arr.iter()
        .map(|e| {
            Ok(Event {
                time_unix_nano: e.get("timeUnixNano").and_then(json_u64).unwrap_or(0),
                name: get_str(e, "name"),
                attributes: get_attrs(e)?,
                dropped_attributes_count: get_u32(e, "droppedAttributesCount"),
            })
        })
        .collect()
}

pub fn links_from_json(v: &Value) -> Result<Vec<Link>, ModelError> {
    let Value::Array(arr) = v else {
        return if v.is_null() {
            Ok(Vec::new())
        } else {
            Err(bad("links", v))
        };
    };
    arr.iter()
        .map(|l| {
            Ok(Link {
                trace_id: TraceId::from_hex(&get_str(l, "traceId"))?,
                span_id: SpanId::from_hex(&get_str(l, "spanId"))?,
                trace_state: get_str(l, "traceState"),
                attributes: get_attrs(l)?,
                dropped_attributes_count: get_u32(l, "droppedAttributesCount"),
                flags: get_u32(l, "flags"),
            })
        })
        .collect()
}

pub fn resource_from_json(v: &Value) -> Result<Resource, ModelError> {
    let entity_refs = match v.get("entityRefs") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|e| EntityRef {
                schema_url: get_str(e, "schemaUrl"),
                entity_type: get_str(e, "type"),
                id_keys: string_list(e.get("idKeys")),
                description_keys: string_list(e.get("descriptionKeys")),
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(Resource {
        attributes: get_attrs(v)?,
        dropped_attributes_count: get_u32(v, "droppedAttributesCount"),
        entity_refs,
        schema_url: get_str(v, "schemaUrl"),
    })
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

pub fn scope_from_json(v: &Value) -> Result<Scope, ModelError> {
    Ok(Scope {
        name: get_str(v, "name"),
        version: get_str(v, "version"),
        attributes: get_attrs(v)?,
        dropped_attributes_count: get_u32(v, "droppedAttributesCount"),
        schema_url: get_str(v, "schemaUrl"),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_otlp_json() {
        let v = AnyValue::Map(vec![
            KeyValue::new("s", "x"),
            KeyValue::new("i", i64::MIN),
            KeyValue::new("d", 1.5),
            KeyValue::new("nan", f64::NAN),
            KeyValue::new("inf", f64::NEG_INFINITY),
            KeyValue::new("b", true),
            KeyValue::new("bytes", vec![0u8, 255]),
            KeyValue::new("arr", AnyValue::Array(vec![AnyValue::Int(1), AnyValue::Empty])),
        ]);
        let text = to_json_string(&OtlpValue(&v));
        assert!(text.contains(r#""intValue":"-9223372036854775808""#), "{text}");
        assert!(text.contains(r#""doubleValue":"NaN""#), "{text}");
        let back = any_value_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        // NaN != NaN, so compare through the typed query equality.
        let (AnyValue::Map(a), AnyValue::Map(b)) = (&v, &back) else {
            panic!()
        };
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x.key, y.key);
            assert!(x.value.query_eq(&y.value), "{:?} vs {:?}", x.value, y.value);
        }
    }

    #[test]
    fn bad_json_values_are_named() {
        let err = any_value_from_json(&serde_json::json!({"intValue": "twelve"})).unwrap_err();
        assert!(err.to_string().starts_with("intValue"), "{err}");
        let err = attrs_from_json(&serde_json::json!([{"value": {}}])).unwrap_err();
        assert!(err.to_string().contains("string key"), "{err}");
    }

    use proptest::prelude::*;

    pub(crate) fn value() -> impl Strategy<Value = AnyValue> {
        let leaf = prop_oneof![
            Just(AnyValue::Empty),
            any::<String>().prop_map(AnyValue::Str),
            "[\\x00-\\x7f]{0,8}".prop_map(AnyValue::Str),
            any::<bool>().prop_map(AnyValue::Bool),
            any::<i64>().prop_map(AnyValue::Int),
            any::<f64>().prop_map(AnyValue::Double),
            prop::collection::vec(any::<u8>(), 0..8).prop_map(AnyValue::Bytes),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(AnyValue::Array),
                prop::collection::vec((any::<String>(), inner), 0..4).prop_map(|kvs| AnyValue::Map(
                    kvs.into_iter().map(|(k, v)| KeyValue { key: k, value: v }).collect()
                )),
            ]
        })
    }

    proptest! {
        #[test]
        fn direct_writer_matches_serde(attrs in prop::collection::vec((any::<String>(), value()), 0..5)) {
            let attrs: Vec<KeyValue> = attrs.into_iter().map(|(k, v)| KeyValue { key: k, value: v }).collect();
            prop_assert_eq!(attrs_to_json_string(&attrs), to_json_string(&OtlpAttrs(&attrs)));
        }

        /// The word-at-a-time test finds every byte that needs escaping,
        /// wherever it sits, and nothing else.
        #[test]
        fn escaping_test_is_exact(
            plain in prop::collection::vec(0x20u8..=0xff, 0..40),
            special in prop::sample::select(vec![b'"', b'\\', 0, 0x1f, b'\n', 0x7f, 0x20, 0x80, 0xff]),
            at in any::<prop::sample::Index>(),
        ) {
            let clean: Vec<u8> = plain.iter().map(|&b| if b == b'"' || b == b'\\' { b'a' } else { b }).collect();
            prop_assert!(!may_need_escaping(&clean));
            let mut with = clean.clone();
            with.insert(at.index(clean.len() + 1), special);
            let needs = special < 0x20 || special == b'"' || special == b'\\';
            prop_assert_eq!(may_need_escaping(&with), needs);
        }
    }
}
