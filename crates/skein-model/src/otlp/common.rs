//! Values, attributes, resources and scopes.

use std::sync::Arc;

use opentelemetry_proto::tonic::common::v1 as pc;
use opentelemetry_proto::tonic::resource::v1 as pr;

use crate::resource::{EntityRef, Resource, Scope};
use crate::value::{AnyValue, KeyValue};

pub fn any_value_from_otlp(v: pc::AnyValue) -> AnyValue {
    use pc::any_value::Value as V;
    match v.value {
        None => AnyValue::Empty,
        Some(V::StringValue(s)) => AnyValue::Str(s),
        Some(V::BoolValue(b)) => AnyValue::Bool(b),
        Some(V::IntValue(i)) => AnyValue::Int(i),
        Some(V::DoubleValue(d)) => AnyValue::Double(d),
        Some(V::BytesValue(b)) => AnyValue::Bytes(b),
        Some(V::ArrayValue(a)) => AnyValue::Array(a.values.into_iter().map(any_value_from_otlp).collect()),
        Some(V::KvlistValue(kv)) => AnyValue::Map(attrs_from_otlp(kv.values)),
        // String-table references only occur in the profiles signal, whose
        // dictionary Skein does not ingest.
        Some(V::StringValueStrindex(_)) => AnyValue::Empty,
    }
}

pub fn any_value_to_otlp(v: &AnyValue) -> pc::AnyValue {
    use pc::any_value::Value as V;
    let value = match v {
        AnyValue::Empty => None,
        AnyValue::Str(s) => Some(V::StringValue(s.clone())),
        AnyValue::Bool(b) => Some(V::BoolValue(*b)),
        AnyValue::Int(i) => Some(V::IntValue(*i)),
        AnyValue::Double(d) => Some(V::DoubleValue(*d)),
        AnyValue::Bytes(b) => Some(V::BytesValue(b.clone())),
        AnyValue::Array(a) => Some(V::ArrayValue(pc::ArrayValue {
            values: a.iter().map(any_value_to_otlp).collect(),
        })),
        AnyValue::Map(m) => Some(V::KvlistValue(pc::KeyValueList {
            values: attrs_to_otlp(m),
        })),
    };
    pc::AnyValue { value }
}

pub fn attrs_from_otlp(attrs: Vec<pc::KeyValue>) -> Vec<KeyValue> {
    attrs
        .into_iter()
        .map(|kv| KeyValue {
            key: kv.key,
            value: kv.value.map(any_value_from_otlp).unwrap_or_default(),
        })
        .collect()
}

pub fn attrs_to_otlp(attrs: &[KeyValue]) -> Vec<pc::KeyValue> {
    attrs
        .iter()
        .map(|kv| pc::KeyValue {
            key: kv.key.clone(),
            value: match kv.value {
                AnyValue::Empty => None,
                ref v => Some(any_value_to_otlp(v)),
            },
            key_strindex: 0,
        })
        .collect()
}

pub(crate) fn resource_from_otlp(r: Option<pr::Resource>, schema_url: String) -> Arc<Resource> {
    let r = r.unwrap_or_default();
    Arc::new(Resource {
        attributes: attrs_from_otlp(r.attributes),
        dropped_attributes_count: r.dropped_attributes_count,
        entity_refs: r
            .entity_refs
            .into_iter()
            .map(|e| EntityRef {
                schema_url: e.schema_url,
                entity_type: e.r#type,
                id_keys: e.id_keys,
                description_keys: e.description_keys,
            })
            .collect(),
        schema_url,
    })
}

/// The resource message and the envelope's schema URL.
pub(crate) fn resource_to_otlp(r: &Resource) -> (Option<pr::Resource>, String) {
    (
        Some(pr::Resource {
            attributes: attrs_to_otlp(&r.attributes),
            dropped_attributes_count: r.dropped_attributes_count,
            entity_refs: r
                .entity_refs
                .iter()
                .map(|e| pc::EntityRef {
                    schema_url: e.schema_url.clone(),
                    r#type: e.entity_type.clone(),
                    id_keys: e.id_keys.clone(),
                    description_keys: e.description_keys.clone(),
                })
                .collect(),
        }),
        r.schema_url.clone(),
    )
}

pub(crate) fn scope_from_otlp(s: Option<pc::InstrumentationScope>, schema_url: String) -> Arc<Scope> {
    let s = s.unwrap_or_default();
    Arc::new(Scope {
        name: s.name,
        version: s.version,
        attributes: attrs_from_otlp(s.attributes),
        dropped_attributes_count: s.dropped_attributes_count,
        schema_url,
    })
}

pub(crate) fn scope_to_otlp(s: &Scope) -> (Option<pc::InstrumentationScope>, String) {
    (
        Some(pc::InstrumentationScope {
            name: s.name.clone(),
            version: s.version.clone(),
            attributes: attrs_to_otlp(&s.attributes),
            dropped_attributes_count: s.dropped_attributes_count,
        }),
        s.schema_url.clone(),
    )
}

/// Splits `items` into runs of consecutive elements for which `same` holds
/// between neighbours, preserving order.
pub(crate) fn runs<T>(items: &[T], same: impl Fn(&T, &T) -> bool) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=items.len() {
        if i == items.len() || !same(&items[i - 1], &items[i]) {
            if start < i {
                out.push(&items[start..i]);
            }
            start = i;
        }
    }
    out
}
