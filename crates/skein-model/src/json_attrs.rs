//! Attribute lists parsed straight from OTLP/JSON text.
//!
//! [`crate::json::attrs_from_json`] reads a `serde_json::Value` tree: every
//! attribute becomes a map of maps before it becomes a `KeyValue`, which made
//! parsing a third of decoding a part's rows. This parser reads the shape
//! Skein writes (`[{"key": …, "value": {"stringValue": …}}, …]`, each
//! `AnyValue` with one field) directly. Anything else, including every
//! error, is handed to the `Value` path, so answers, quirks and error
//! messages stay exactly those of `attrs_from_json`.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::ModelError;
use crate::value::{AnyValue, KeyValue};

/// Parses an OTLP/JSON attribute list, like
/// `attrs_from_json(&serde_json::from_str(text)?)`.
pub fn attrs_from_json_str(text: &str) -> Result<Vec<KeyValue>, ModelError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let fast = de::Deserialize::deserialize(&mut de).and_then(|Attrs(a)| de.end().map(|()| a));
    match fast {
        Ok(attrs) => Ok(attrs),
        Err(_) => {
            let v: serde_json::Value =
                serde_json::from_str(text).map_err(|e| ModelError::new(format!("attributes: {e}")))?;
            crate::json::attrs_from_json(&v)
        }
    }
}

/// Gives up on the fast path; the `Value` path then decides.
fn unusual<E: de::Error>(what: &str) -> E {
    E::custom(what)
}

struct Attrs(Vec<KeyValue>);

impl<'de> de::Deserialize<'de> for Attrs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AttrsVisitor).map(Attrs)
    }
}

struct AttrsVisitor;

impl<'de> Visitor<'de> for AttrsVisitor {
    type Value = Vec<KeyValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute list")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(KeyValueOf(kv)) = seq.next_element()? {
            out.push(kv);
        }
        Ok(out)
    }
}

struct KeyValueOf(KeyValue);

impl<'de> de::Deserialize<'de> for KeyValueOf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(KeyValueVisitor).map(KeyValueOf)
    }
}

struct KeyValueVisitor;

impl<'de> Visitor<'de> for KeyValueVisitor {
    type Value = KeyValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyValue, A::Error> {
        let mut key: Option<String> = None;
        let mut value: Option<AnyValue> = None;
        while let Some(field) = map.next_key::<&str>()? {
            match field {
                "key" if key.is_none() => key = Some(map.next_value()?),
                "value" if value.is_none() => value = Some(map.next_value_seed(AnyValueSeed)?),
                _ => return Err(unusual("an unusual attribute field")),
            }
        }
        Ok(KeyValue {
            key: key.ok_or_else(|| unusual("no key"))?,
            value: value.unwrap_or(AnyValue::Empty),
        })
    }
}

/// An `AnyValue` object, or `null` (empty).
struct AnyValueSeed;

impl<'de> DeserializeSeed<'de> for AnyValueSeed {
    type Value = AnyValue;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AnyValue, D::Error> {
        d.deserialize_any(AnyValueVisitor)
    }
}

struct AnyValueVisitor;

impl<'de> Visitor<'de> for AnyValueVisitor {
    type Value = AnyValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AnyValue")
    }
    fn visit_unit<E: de::Error>(self) -> Result<AnyValue, E> {
        Ok(AnyValue::Empty)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyValue, A::Error> {
        let Some(field) = map.next_key::<&str>()? else {
            return Ok(AnyValue::Empty);
        };
        let v = match field {
            "stringValue" | "string_value" => AnyValue::Str(map.next_value()?),
            "boolValue" | "bool_value" => AnyValue::Bool(map.next_value()?),
            "intValue" | "int_value" => AnyValue::Int(map.next_value::<Int>()?.0),
            "doubleValue" | "double_value" => AnyValue::Double(map.next_value::<Double>()?.0),
            "bytesValue" | "bytes_value" => {
                let text: &str = map.next_value()?;
                AnyValue::Bytes(B64.decode(text).map_err(|_| unusual("not base64"))?)
            }
            "arrayValue" | "array_value" => AnyValue::Array(map.next_value::<Values<ArrayOf>>()?.0),
            "kvlistValue" | "kvlist_value" => AnyValue::Map(map.next_value::<Values<KvListOf>>()?.0),
            _ => return Err(unusual("an unknown AnyValue field")),
        };
        // With several fields the `Value` path picks the first in key order.
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(unusual("an AnyValue with several fields"));
        }
        Ok(v)
    }
}

/// `{"values": [...]}` of an array or a key-value list.
struct Values<K: ValuesKind>(Vec<K::Item>);

trait ValuesKind {
    type Item;
    fn list<'de, A: SeqAccess<'de>>(seq: A) -> Result<Vec<Self::Item>, A::Error>;
}

struct ArrayOf;
struct KvListOf;

impl ValuesKind for ArrayOf {
    type Item = AnyValue;
    fn list<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Vec<AnyValue>, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(AnyValueSeed)? {
            out.push(v);
        }
        Ok(out)
    }
}

impl ValuesKind for KvListOf {
    type Item = KeyValue;
    fn list<'de, A: SeqAccess<'de>>(seq: A) -> Result<Vec<KeyValue>, A::Error> {
        AttrsVisitor.visit_seq(seq)
    }
}

impl<'de, K: ValuesKind> de::Deserialize<'de> for Values<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<K>(std::marker::PhantomData<K>);
        impl<'de, K: ValuesKind> Visitor<'de> for V<K> {
            type Value = Vec<K::Item>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("{\"values\": [...]}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = None;
                while let Some(field) = map.next_key::<&str>()? {
                    match field {
                        "values" if out.is_none() => out = Some(map.next_value::<List<K>>()?.0),
                        _ => return Err(unusual("an unusual values field")),
                    }
                }
                Ok(out.unwrap_or_default())
            }
        }
        d.deserialize_map(V::<K>(std::marker::PhantomData)).map(Values)
    }
}

/// The list itself; `null` is empty.
struct List<K: ValuesKind>(Vec<K::Item>);

impl<'de, K: ValuesKind> de::Deserialize<'de> for List<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<K>(std::marker::PhantomData<K>);
        impl<'de, K: ValuesKind> Visitor<'de> for V<K> {
            type Value = Vec<K::Item>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Vec::new())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                K::list(seq)
            }
        }
        d.deserialize_any(V::<K>(std::marker::PhantomData)).map(List)
    }
}

/// A 64-bit integer sent as a string or a number (`json::json_i64`).
struct Int(i64);

impl<'de> de::Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = i64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
                Ok(v)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
                i64::try_from(v).map_err(|_| unusual("out of range"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
                if v.fract() == 0.0 && v.abs() < 9.2e18 {
                    Ok(v as i64)
                } else {
                    Err(unusual("not an integer"))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
                v.parse().map_err(|_| unusual("not an integer"))
            }
        }
        d.deserialize_any(V).map(Int)
    }
}

/// A double sent as a number or a string (`json::json_f64`).
struct Double(f64);

impl<'de> de::Deserialize<'de> for Double {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = f64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a double")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
                match v {
                    "NaN" => Ok(f64::NAN),
                    "Infinity" => Ok(f64::INFINITY),
                    "-Infinity" => Ok(f64::NEG_INFINITY),
                    other => other.parse().map_err(|_| unusual("not a double")),
                }
            }
        }
        d.deserialize_any(V).map(Double)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::json::{attrs_from_json, attrs_to_json_string};

    /// Both paths, compared through their JSON (NaN equals itself there).
    fn same_as_value_path(text: &str) {
        let slow = serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| ModelError::new(format!("attributes: {e}")))
            .and_then(|v| attrs_from_json(&v));
        let fast = attrs_from_json_str(text);
        match (&fast, &slow) {
            (Ok(f), Ok(s)) => assert_eq!(attrs_to_json_string(f), attrs_to_json_string(s), "{text}"),
            (Err(f), Err(s)) => assert_eq!(f.to_string(), s.to_string(), "{text}"),
            _ => panic!("{text}: fast {fast:?}, value path {slow:?}"),
        }
    }

    #[test]
    fn odd_inputs_parse_as_the_value_path_parses_them() {
        for text in [
            "null",
            "[]",
            r#"[{"key":"a","value":{"intValue":"12"}}]"#,
            r#"[{"key":"a","value":{"intValue":12}}]"#,
            r#"[{"key":"a","value":{"intValue":12.0}}]"#,
            r#"[{"key":"a","value":{"intValue":12.5}}]"#,
            r#"[{"key":"a","value":{"intValue":18446744073709551615}}]"#,
            r#"[{"key":"a","value":{"intValue":"x"}}]"#,
            r#"[{"key":"a","value":{"doubleValue":"NaN"}},{"key":"b","value":{"doubleValue":"-Infinity"}}]"#,
            r#"[{"key":"a","value":{"doubleValue":3}},{"key":"b","value":{"doubleValue":"1e3"}}]"#,
            r#"[{"key":"a","value":{"stringValue":null}}]"#,
            r#"[{"key":"a","value":null},{"key":"b"}]"#,
            r#"[{"key":"a","value":{}}]"#,
            r#"[{"value":{"boolValue":true},"key":"k\"\u00e9"}]"#,
            r#"[{"key":"a","value":{"string_value":"snake"}}]"#,
            r#"[{"key":"a","value":{"stringValue":"x","boolValue":true}}]"#,
            r#"[{"key":"a","value":{"boolValue":true,"stringValue":"x"}}]"#,
            r#"[{"key":"a","value":{"stringValue":"x"},"extra":1}]"#,
            r#"[{"key":"a","key":"b","value":{"stringValue":"x"}}]"#,
            r#"[{"key":"a","value":{"bytesValue":"AAE="}},{"key":"b","value":{"bytesValue":"%%"}}]"#,
            r#"[{"key":"a","value":{"arrayValue":{"values":[null,{"intValue":1},{"arrayValue":{}}]}}}]"#,
            r#"[{"key":"a","value":{"arrayValue":{"values":null}}},{"key":"b","value":{"arrayValue":null}}]"#,
            r#"[{"key":"a","value":{"kvlistValue":{"values":[{"key":"n","value":{"stringValue":"v"}}]}}}]"#,
            r#"[{"key":"a","value":{"kvlistValue":{}}},{"key":"b","value":{"kvlistValue":{"values":null}}}]"#,
            r#"[{"key":"a","value":{"unknownValue":1}}]"#,
            r#"[{"key":1}]"#,
            r#"{"key":"a"}"#,
            r#"[{"key":"a","value":{"stringValue":"x"}}] trailing"#,
            "[",
        ] {
            same_as_value_path(text);
        }
    }

    proptest! {
        #[test]
        fn what_skein_writes_reads_back_without_the_value_path(
            attrs in prop::collection::vec((any::<String>(), crate::json::tests::value()), 0..5)
        ) {
            let attrs: Vec<KeyValue> = attrs.into_iter().map(|(k, v)| KeyValue { key: k, value: v }).collect();
            let text = attrs_to_json_string(&attrs);
            // The fast path alone (no fallback) accepts it.
            let mut de = serde_json::Deserializer::from_str(&text);
            let Attrs(direct) = de::Deserialize::deserialize(&mut de).unwrap();
            prop_assert_eq!(attrs_to_json_string(&direct), text.clone());
            same_as_value_path(&text);
        }
    }
}
