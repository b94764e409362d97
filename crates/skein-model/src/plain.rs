//! The plain JSON form of attribute values, for people and agents
//! (`{"http.method": "GET"}`): strings, numbers and booleans as themselves,
//! bytes as base64, non-finite doubles as strings. Lossy where OTLP/JSON
//! (`json`) is not: it is for reading, not for storing.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::value::{AnyValue, KeyValue};

impl AnyValue {
    /// Renders the value for people: strings bare, other scalars as JSON.
    pub fn display_string(&self) -> String {
        match self {
            AnyValue::Str(s) => s.clone(),
            AnyValue::Empty => String::new(),
            AnyValue::Bool(b) => b.to_string(),
            AnyValue::Int(i) => i.to_string(),
            AnyValue::Double(d) => d.to_string(),
            other => any_value_to_plain_json(other).to_string(),
        }
    }
}

/// The plain JSON form of a value, for people and agents: strings, numbers
/// and booleans as themselves, bytes as base64, NaN/±Infinity as strings.
pub fn any_value_to_plain_json(v: &AnyValue) -> Value {
    serde_json::to_value(PlainValue(v)).unwrap_or(Value::Null)
}

/// Attributes as a JSON object; a repeated key keeps its first value, as
/// attribute lookup does.
pub fn attrs_to_plain_json(attrs: &[KeyValue]) -> Map<String, Value> {
    match serde_json::to_value(PlainAttrs(attrs)) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// An attribute value as plain JSON: strings, numbers, booleans, arrays and
/// objects as themselves, bytes as base64, non-finite doubles as "NaN",
/// "Infinity" and "-Infinity", empty as null.
pub struct PlainValue<'a>(pub &'a AnyValue);

impl Serialize for PlainValue<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AnyValue::Empty => ser.serialize_unit(),
            AnyValue::Str(s) => ser.serialize_str(s),
            AnyValue::Bool(b) => ser.serialize_bool(*b),
            AnyValue::Int(i) => ser.serialize_i64(*i),
            AnyValue::Double(d) if d.is_nan() => ser.serialize_str("NaN"),
            AnyValue::Double(d) if *d == f64::INFINITY => ser.serialize_str("Infinity"),
            AnyValue::Double(d) if *d == f64::NEG_INFINITY => ser.serialize_str("-Infinity"),
            AnyValue::Double(d) => ser.serialize_f64(*d),
            AnyValue::Bytes(b) => ser.serialize_str(&B64.encode(b)),
            AnyValue::Array(a) => {
                let mut seq = ser.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&PlainValue(v))?;
                }
                seq.end()
            }
            AnyValue::Map(m) => PlainAttrs(m).serialize(ser),
        }
    }
}

/// Attributes as a plain JSON object, keys in sorted order (as a
/// `serde_json::Map` prints them); a repeated key keeps its first value.
pub struct PlainAttrs<'a>(pub &'a [KeyValue]);

impl Serialize for PlainAttrs<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut sorted: Vec<&KeyValue> = self.0.iter().collect();
        // Stable: among equal keys the first stays first, and dedup keeps it.
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        sorted.dedup_by(|later, earlier| later.key == earlier.key);
        let mut m = ser.serialize_map(Some(sorted.len()))?;
        for kv in sorted {
            m.serialize_entry(&kv.key, &PlainValue(&kv.value))?;
        }
        m.end()
    }
}

/// A plain JSON value as an attribute value: integers that fit i64 are
/// ints, other numbers doubles, objects maps, null empty.
pub fn plain_json_to_any_value(v: &Value) -> AnyValue {
    match v {
        Value::Null => AnyValue::Empty,
        Value::Bool(b) => AnyValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => AnyValue::Int(i),
            None => AnyValue::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => AnyValue::Str(s.clone()),
        Value::Array(a) => AnyValue::Array(a.iter().map(plain_json_to_any_value).collect()),
        Value::Object(o) => AnyValue::Map(
            o.iter()
                .map(|(k, v)| KeyValue {
                    key: k.clone(),
                    value: plain_json_to_any_value(v),
                })
                .collect(),
        ),
    }
}
