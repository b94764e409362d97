//! OTLP/JSON responses (`?format=otlp`).
//!
//! opentelemetry-proto's serde writes an `AnyValue`'s `doubleValue` with
//! plain serde, so NaN and ±infinity become JSON `null`, which OTLP/JSON
//! readers take as "no value": the attribute comes back empty. The proto3
//! JSON mapping writes them as the strings `"NaN"`, `"Infinity"` and
//! `"-Infinity"`; this puts them back, walking the request beside its JSON.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use serde_json::Value;

/// An `ExportTraceServiceRequest` in the OTLP/JSON encoding.
pub fn trace_request(req: &ExportTraceServiceRequest) -> Result<Value, serde_json::Error> {
    let mut v = serde_json::to_value(req)?;
    for (rs, jrs) in req.resource_spans.iter().zip(items(&mut v["resourceSpans"])) {
        if let Some(r) = &rs.resource {
            fix_attrs(&r.attributes, &mut jrs["resource"]["attributes"]);
        }
        for (ss, jss) in rs.scope_spans.iter().zip(items(&mut jrs["scopeSpans"])) {
            if let Some(s) = &ss.scope {
                fix_attrs(&s.attributes, &mut jss["scope"]["attributes"]);
            }
            for (sp, jsp) in ss.spans.iter().zip(items(&mut jss["spans"])) {
                fix_attrs(&sp.attributes, &mut jsp["attributes"]);
                for (e, je) in sp.events.iter().zip(items(&mut jsp["events"])) {
                    fix_attrs(&e.attributes, &mut je["attributes"]);
                }
                for (l, jl) in sp.links.iter().zip(items(&mut jsp["links"])) {
                    fix_attrs(&l.attributes, &mut jl["attributes"]);
                }
            }
        }
    }
    Ok(v)
}

fn items(v: &mut Value) -> std::slice::IterMut<'_, Value> {
    match v {
        Value::Array(a) => a.iter_mut(),
        _ => [].iter_mut(),
    }
}

fn fix_attrs(kvs: &[KeyValue], j: &mut Value) {
    for (kv, jkv) in kvs.iter().zip(items(j)) {
        if let Some(av) = &kv.value {
            fix_any(av, &mut jkv["value"]);
        }
    }
}

fn fix_any(av: &AnyValue, j: &mut Value) {
    match &av.value {
        Some(any_value::Value::DoubleValue(d)) if !d.is_finite() => {
            if let Value::Object(m) = j {
                m.insert("doubleValue".into(), skein_model::json::double_json(*d));
            }
        }
        Some(any_value::Value::ArrayValue(a)) => {
            for (x, jx) in a.values.iter().zip(items(&mut j["arrayValue"]["values"])) {
                fix_any(x, jx);
            }
        }
        Some(any_value::Value::KvlistValue(l)) => fix_attrs(&l.values, &mut j["kvlistValue"]["values"]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};

    fn double(d: f64) -> AnyValue {
        AnyValue {
            value: Some(any_value::Value::DoubleValue(d)),
        }
    }

    fn kv(key: &str, value: AnyValue) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(value),
            ..Default::default()
        }
    }

    #[test]
    fn non_finite_doubles_are_strings_everywhere() {
        let attrs = vec![
            kv("nan", double(f64::NAN)),
            kv("inf", double(f64::INFINITY)),
            kv("ninf", double(f64::NEG_INFINITY)),
            kv("one", double(1.5)),
            kv(
                "arr",
                AnyValue {
                    value: Some(any_value::Value::ArrayValue(ArrayValue {
                        values: vec![double(2.0), double(f64::INFINITY)],
                    })),
                },
            ),
            kv(
                "map",
                AnyValue {
                    value: Some(any_value::Value::KvlistValue(KeyValueList {
                        values: vec![kv("x", double(f64::NAN))],
                    })),
                },
            ),
        ];
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: attrs.clone(),
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        trace_id: vec![1; 16],
                        span_id: vec![2; 8],
                        attributes: attrs.clone(),
                        events: vec![span::Event {
                            attributes: attrs.clone(),
                            ..Default::default()
                        }],
                        links: vec![span::Link {
                            trace_id: vec![1; 16],
                            span_id: vec![3; 8],
                            attributes: attrs.clone(),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let v = trace_request(&req).unwrap();
        let rs = &v["resourceSpans"][0];
        let sp = &rs["scopeSpans"][0]["spans"][0];
        for a in [
            &rs["resource"]["attributes"],
            &sp["attributes"],
            &sp["events"][0]["attributes"],
            &sp["links"][0]["attributes"],
        ] {
            assert_eq!(a[0]["value"]["doubleValue"], "NaN");
            assert_eq!(a[1]["value"]["doubleValue"], "Infinity");
            assert_eq!(a[2]["value"]["doubleValue"], "-Infinity");
            assert_eq!(a[3]["value"]["doubleValue"], 1.5);
            assert_eq!(a[4]["value"]["arrayValue"]["values"][0]["doubleValue"], 2.0);
            assert_eq!(a[4]["value"]["arrayValue"]["values"][1]["doubleValue"], "Infinity");
            assert_eq!(a[5]["value"]["kvlistValue"]["values"][0]["value"]["doubleValue"], "NaN");
        }
    }
}
