//! Typed attribute values, as OTLP defines them.

use serde::{Deserialize, Serialize};

/// An attribute or log-body value. `Empty` is OTLP's unset value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub enum AnyValue {
    #[default]
    Empty,
    Str(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    Bytes(Vec<u8>),
    Array(Vec<AnyValue>),
    Map(Vec<KeyValue>),
}

/// One attribute. OTLP keeps attributes as an ordered list, and so do we.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyValue {
    pub key: String,
    pub value: AnyValue,
}

impl KeyValue {
    pub fn new(key: impl Into<String>, value: impl Into<AnyValue>) -> Self {
        KeyValue {
            key: key.into(),
            value: value.into(),
        }
    }
}

impl AnyValue {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AnyValue::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            AnyValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            AnyValue::Double(d) => Some(*d),
            AnyValue::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The type name used in errors and in the API.
    pub fn type_name(&self) -> &'static str {
        match self {
            AnyValue::Empty => "empty",
            AnyValue::Str(_) => "string",
            AnyValue::Bool(_) => "bool",
            AnyValue::Int(_) => "int",
            AnyValue::Double(_) => "double",
            AnyValue::Bytes(_) => "bytes",
            AnyValue::Array(_) => "array",
            AnyValue::Map(_) => "map",
        }
    }

    /// Typed equality used by queries: any NaN equals any NaN (a stored NaN
    /// can be searched for), everything else by value.
    pub fn query_eq(&self, other: &AnyValue) -> bool {
        match (self, other) {
            (AnyValue::Double(a), AnyValue::Double(b)) => (a.is_nan() && b.is_nan()) || a == b,
            (a, b) => a == b,
        }
    }

    /// A rough count of heap bytes, for memory accounting and size limits.
    /// Counts the value inline (32 bytes) plus each heap allocation as its
    /// length rounded up, plus the allocator's overhead.
    pub fn approx_size(&self) -> usize {
        std::mem::size_of::<AnyValue>()
            + match self {
                AnyValue::Empty | AnyValue::Bool(_) | AnyValue::Int(_) | AnyValue::Double(_) => 0,
                AnyValue::Str(s) => heap_size(s.len()),
                AnyValue::Bytes(b) => heap_size(b.len()),
                AnyValue::Array(a) => heap_size(0) + a.iter().map(AnyValue::approx_size).sum::<usize>(),
                AnyValue::Map(m) => heap_size(0) + attributes_size(m),
            }
    }
}

/// Approximate byte size of an attribute list.
pub fn attributes_size(attrs: &[KeyValue]) -> usize {
    heap_size(0)
        + attrs
            .iter()
            .map(|kv| std::mem::size_of::<String>() + heap_size(kv.key.len()) + kv.value.approx_size())
            .sum::<usize>()
}

/// Bytes a heap allocation of `len` bytes really takes: rounded up to 16,
/// with 16 of allocator bookkeeping (0 bytes allocate nothing, but count the
/// bookkeeping anyway as a proxy for the container).
pub fn heap_size(len: usize) -> usize {
    len.div_ceil(16) * 16 + 16
}

/// The first attribute with this key.
pub fn find_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

/// The first attribute with this key, if it is a string.
pub fn find_str<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    find_attr(attrs, key).and_then(AnyValue::as_str)
}

impl From<&str> for AnyValue {
    fn from(v: &str) -> Self {
        AnyValue::Str(v.to_string())
    }
}
impl From<String> for AnyValue {
    fn from(v: String) -> Self {
        AnyValue::Str(v)
    }
}
impl From<bool> for AnyValue {
    fn from(v: bool) -> Self {
        AnyValue::Bool(v)
    }
}
impl From<i64> for AnyValue {
    fn from(v: i64) -> Self {
        AnyValue::Int(v)
    }
}
impl From<f64> for AnyValue {
    fn from(v: f64) -> Self {
        AnyValue::Double(v)
    }
}
impl From<Vec<u8>> for AnyValue {
    fn from(v: Vec<u8>) -> Self {
        AnyValue::Bytes(v)
    }
}
