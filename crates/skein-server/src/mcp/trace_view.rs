//! `get_trace`'s compact tree: what an agent reads first — the critical
//! path, the errors (where they originate), each span's duration and self
//! time — without attributes unless asked. Built from the API's trace
//! (spans in tree order, each with its depth).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn is_error(span: &Value) -> bool {
    span.pointer("/status/code").and_then(Value::as_str) == Some("error")
}

/// Time covered by `intervals` inside `[lo, hi)`, overlaps counted once.
fn covered(mut intervals: Vec<(u64, u64)>, lo: u64, hi: u64) -> u64 {
    intervals.sort_unstable();
    let (mut total, mut reach) = (0, lo);
    for (a, b) in intervals {
        let (a, b) = (a.max(reach), b.min(hi));
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

/// The exception of a span's `exception` event, if any: (type, message).
fn exception(span: &Value) -> Option<(String, String)> {
    let events = span.get("events")?.as_array()?;
    let e = events.iter().find(|e| s(e, "name") == "exception")?;
    let a = e.get("attributes")?;
    Some((
        s(a, "exception.type").to_string(),
        s(a, "exception.message").to_string(),
    ))
}

/// The compact view of the API's `trace`. `with_attributes` keeps each
/// span's attributes, resource and events; `with_spans` lists the spans at
/// all (`correlate` shows the header, path and errors only).
pub fn compact(trace: &Value, with_attributes: bool, with_spans: bool) -> Value {
    let empty = Vec::new();
    let spans = trace.get("spans").and_then(Value::as_array).unwrap_or(&empty);
    let index: HashMap<&str, usize> = spans.iter().enumerate().map(|(i, sp)| (s(sp, "span_id"), i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    for (i, sp) in spans.iter().enumerate() {
        if let Some(&p) = index.get(s(sp, "parent_span_id"))
            && p != i
        {
            children[p].push(i);
        }
    }
    let start = u(trace, "start_time_unix_nano");
    let self_ns: Vec<u64> = spans
        .iter()
        .enumerate()
        .map(|(i, sp)| {
            let (lo, hi) = (u(sp, "start_time_unix_nano"), u(sp, "end_time_unix_nano"));
            let kids = children[i]
                .iter()
                .map(|&c| (u(&spans[c], "start_time_unix_nano"), u(&spans[c], "end_time_unix_nano")))
                .collect();
            hi.saturating_sub(lo).saturating_sub(covered(kids, lo, hi))
        })
        .collect();

    // The critical path: from the root, each time the child that ended last.
    let mut path = Vec::new();
    let root = spans
        .iter()
        .position(|sp| sp.get("depth").and_then(Value::as_u64) == Some(0));
    let mut at = root;
    while let Some(i) = at {
        if path.len() > spans.len() {
            break;
        }
        path.push(json!({
            "span_id": s(&spans[i], "span_id"), "service": s(&spans[i], "service"),
            "name": s(&spans[i], "name"), "duration_ns": u(&spans[i], "duration_ns"), "self_ns": self_ns[i],
        }));
        at = children[i]
            .iter()
            .copied()
            .max_by_key(|&c| u(&spans[c], "end_time_unix_nano"));
    }

    // Errors, deepest first: a failing span with no failing child is where
    // the error originates; the others propagate it.
    let mut errors: Vec<(u64, Value)> = Vec::new();
    for (i, sp) in spans.iter().enumerate().filter(|(_, sp)| is_error(sp)) {
        let origin = !children[i].iter().any(|&c| is_error(&spans[c]));
        let mut e = json!({
            "span_id": s(sp, "span_id"), "service": s(sp, "service"), "name": s(sp, "name"),
            "message": sp.pointer("/status/message").cloned().unwrap_or(Value::Null),
            "role": if origin { "origin" } else { "propagated" },
        });
        if let Some((t, m)) = exception(sp) {
            e["exception_type"] = t.into();
            e["exception_message"] = m.into();
        }
        errors.push((u(sp, "depth"), e));
    }
    errors.sort_by_key(|(d, e)| (std::cmp::Reverse(*d), e["role"] != "origin"));

    let mut out = Map::new();
    for k in [
        "trace_id",
        "duration_ns",
        "span_count",
        "error_count",
        "services",
        "root",
        "start_time_unix_nano",
    ] {
        out.insert(k.into(), trace.get(k).cloned().unwrap_or(Value::Null));
    }
    out.insert("critical_path".into(), Value::Array(path));
    out.insert(
        "errors".into(),
        Value::Array(errors.into_iter().map(|(_, e)| e).collect()),
    );
    if with_spans {
        let list = spans
            .iter()
            .enumerate()
            .map(|(i, sp)| {
                let mut c = json!({
                    "span_id": s(sp, "span_id"), "parent_span_id": sp.get("parent_span_id").cloned().unwrap_or(Value::Null),
                    "depth": u(sp, "depth"), "service": s(sp, "service"), "name": s(sp, "name"), "kind": s(sp, "kind"),
                    "offset_ns": u(sp, "start_time_unix_nano").saturating_sub(start),
                    "duration_ns": u(sp, "duration_ns"), "self_ns": self_ns[i],
                    "status": sp.pointer("/status/code").cloned().unwrap_or(Value::Null),
                });
                if is_error(sp) {
                    c["error"] = sp.pointer("/status/message").cloned().unwrap_or(Value::Null);
                }
                if let Some(llm) = sp.get("llm") {
                    c["llm"] = llm.clone();
                }
                if with_attributes {
                    for k in ["attributes", "resource", "events", "links"] {
                        c[k] = sp.get(k).cloned().unwrap_or(Value::Null);
                    }
                }
                c
            })
            .collect();
        out.insert("spans".into(), Value::Array(list));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: Option<&str>, depth: u64, start: u64, end: u64, error: bool) -> Value {
        json!({"span_id": id, "parent_span_id": parent, "depth": depth, "service": "svc", "name": format!("op {id}"),
               "kind": "internal", "start_time_unix_nano": start, "end_time_unix_nano": end, "duration_ns": end - start,
               "status": {"code": if error {"error"} else {"unset"}, "message": if error {Some("boom")} else {None}},
               "attributes": {"k": "v"}, "events": [], "resource": {}, "links": []})
    }

    #[test]
    fn the_tree_has_its_critical_path_self_times_and_error_origins() {
        // root 0..100 with children a 10..40 and b 30..90 (overlapping), b's child c 40..80.
        let trace = json!({"trace_id": "t", "start_time_unix_nano": 0, "duration_ns": 100, "span_count": 4, "spans": [
            span("r", None, 0, 0, 100, true),
            span("a", Some("r"), 1, 10, 40, false),
            span("b", Some("r"), 1, 30, 90, true),
            span("c", Some("b"), 2, 40, 80, true),
        ]});
        let v = compact(&trace, false, true);
        let path: Vec<&str> = v["critical_path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["span_id"].as_str().unwrap())
            .collect();
        assert_eq!(path, ["r", "b", "c"]);
        let self_ns: Vec<u64> = v["spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["self_ns"].as_u64().unwrap())
            .collect();
        // r: 100 − (10..90 covered once = 80); b: 60 − 40.
        assert_eq!(self_ns, [20, 30, 20, 40]);
        assert_eq!(v["errors"][0]["span_id"], "c");
        assert_eq!(v["errors"][0]["role"], "origin");
        assert_eq!(v["errors"][1]["role"], "propagated");
        assert!(v["spans"][0].get("attributes").is_none());
        assert_eq!(compact(&trace, true, true)["spans"][0]["attributes"]["k"], "v");
        assert!(compact(&trace, false, false).get("spans").is_none());
    }
}
