//! The span part layout.

use std::sync::{Arc, LazyLock};

use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema, SchemaRef};
use skein_model::json::{OtlpEvents, OtlpLinks, events_from_json, links_from_json, to_json_string};
use skein_model::{Span, SpanId, SpanKind, Status, StatusCode, TraceId, genai, value::find_attr};

use super::*;

/// Columns the aggregations read (never the JSON ones).
pub const SPAN_SUMMARY_COLUMNS: &[&str] = &[
    "trace_id",
    "parent_span_id",
    "name",
    "kind",
    "start_time_unix_nano",
    "duration_ns",
    "status_code",
    "service_name",
];

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        field("trace_id", DataType::FixedSizeBinary(16), false),
        field("span_id", DataType::FixedSizeBinary(8), false),
        field("parent_span_id", DataType::FixedSizeBinary(8), true),
        field("service_name", DataType::Utf8, false),
        field("name", DataType::Utf8, false),
        field("kind", DataType::Int8, false),
        field("start_time_unix_nano", ts_type(), false),
        // end - start; negative when a sender's end precedes its start, so
        // that the original end time is kept.
        field("duration_ns", DataType::Int64, false),
        field("status_code", DataType::Int8, false),
        field("status_message", DataType::Utf8, true),
        field("trace_state", DataType::Utf8, true),
        field("flags", DataType::UInt32, false),
        field("attributes", DataType::Utf8, true),
        field("events", DataType::Utf8, true),
        field("links", DataType::Utf8, true),
        field("dropped_attributes_count", DataType::UInt32, false),
        field("dropped_events_count", DataType::UInt32, false),
        field("dropped_links_count", DataType::UInt32, false),
        field("resource", DataType::Utf8, false),
        field("scope", DataType::Utf8, false),
        // Typed GenAI columns, derived from the attributes at write time so
        // SQL engines can aggregate LLM usage without parsing JSON.
        field("llm_model", DataType::Utf8, true),
        field("llm_input_tokens", DataType::Int64, true),
        field("llm_output_tokens", DataType::Int64, true),
        field("session_id", DataType::Utf8, true),
    ]))
});

fn first_attr<'a>(s: &'a Span, keys: &[&str]) -> Option<&'a skein_model::AnyValue> {
    keys.iter().find_map(|k| find_attr(&s.attributes, k))
}

impl Columnar for Span {
    fn schema() -> SchemaRef {
        SCHEMA.clone()
    }

    fn record_columns() -> &'static [&'static str] {
        &[
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "kind",
            "start_time_unix_nano",
            "duration_ns",
            "status_code",
            "status_message",
            "trace_state",
            "flags",
            "attributes",
            "events",
            "links",
            "dropped_attributes_count",
            "dropped_events_count",
            "dropped_links_count",
            "resource",
            "scope",
        ]
    }

    fn to_batch(rows: &[&Span]) -> Result<RecordBatch> {
        let n = rows.len();
        let mut shared = SharedJson::default();
        let mut json = AttrsJson::default();
        // Each row's resource and scope slot, looked up once: their JSON
        // lengths size the columns.
        let resources: Vec<u32> = rows.iter().map(|s| shared.resource(&s.resource)).collect();
        let scopes: Vec<u32> = rows.iter().map(|s| shared.scope(&s.scope)).collect();
        // Text columns sized up front: growing them by doubling copied
        // more bytes than the rows hold.
        let text = |len: &dyn Fn(usize) -> usize| StringBuilder::with_capacity(n, (0..n).map(len).sum());
        let mut trace_id = FixedSizeBinaryBuilder::with_capacity(n, 16);
        let mut span_id = FixedSizeBinaryBuilder::with_capacity(n, 8);
        let mut parent = FixedSizeBinaryBuilder::with_capacity(n, 8);
        let mut service = text(&|i| shared.service(resources[i]).len());
        let mut name = text(&|i| rows[i].name.len());
        let mut kind = Int8Builder::with_capacity(n);
        let mut start = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut duration = Int64Builder::with_capacity(n);
        let mut status_code = Int8Builder::with_capacity(n);
        let mut status_message = Sparse::new(StringBuilder::new());
        let mut trace_state = Sparse::new(StringBuilder::new());
        let mut flags = UInt32Builder::with_capacity(n);
        let mut attributes = text(&|i| attrs_json_len_hint(&rows[i].attributes));
        let mut events = Sparse::new(StringBuilder::new());
        let mut links = Sparse::new(StringBuilder::new());
        let mut dropped_attrs = UInt32Builder::with_capacity(n);
        let mut dropped_events = UInt32Builder::with_capacity(n);
        let mut dropped_links = UInt32Builder::with_capacity(n);
        let mut resource = text(&|i| shared.resource_json(resources[i]).len());
        let mut scope = text(&|i| shared.scope_json(scopes[i]).len());
        let mut llm_model = Sparse::new(StringBuilder::new());
        let mut llm_in = Sparse::new(Int64Builder::new());
        let mut llm_out = Sparse::new(Int64Builder::new());
        let mut session = Sparse::new(StringBuilder::new());
        for (i, s) in rows.iter().enumerate() {
            trace_id.append_value(s.trace_id.0)?;
            span_id.append_value(s.span_id.0)?;
            match s.parent_span_id {
                Some(p) => parent.append_value(p.0)?,
                None => parent.append_null(),
            }
            service.append_value(shared.service(resources[i]));
            name.append_value(&s.name);
            kind.append_value(s.kind as i8);
            start.append_value(ts(s.start_time_unix_nano));
            duration.append_value(ts(s.end_time_unix_nano).wrapping_sub(ts(s.start_time_unix_nano)));
            status_code.append_value(s.status.code as i8);
            if !s.status.message.is_empty() {
                status_message.at(i).append_value(&s.status.message);
            }
            if !s.trace_state.is_empty() {
                trace_state.at(i).append_value(&s.trace_state);
            }
            flags.append_value(s.flags);
            json.append(&mut attributes, &s.attributes);
            if !s.events.is_empty() {
                events.at(i).append_value(to_json_string(&OtlpEvents(&s.events)));
            }
            if !s.links.is_empty() {
                links.at(i).append_value(to_json_string(&OtlpLinks(&s.links)));
            }
            dropped_attrs.append_value(s.dropped_attributes_count);
            dropped_events.append_value(s.dropped_events_count);
            dropped_links.append_value(s.dropped_links_count);
            resource.append_value(shared.resource_json(resources[i]));
            scope.append_value(shared.scope_json(scopes[i]));
            if s.attributes.iter().any(|kv| genai::may_be_genai_key(&kv.key)) {
                if let Some(v) = first_attr(s, genai::REQUEST_MODEL).and_then(|v| v.as_str()) {
                    llm_model.at(i).append_value(v);
                }
                if let Some(v) = first_attr(s, genai::INPUT_TOKENS).and_then(|v| v.as_i64()) {
                    llm_in.at(i).append_value(v);
                }
                if let Some(v) = first_attr(s, genai::OUTPUT_TOKENS).and_then(|v| v.as_i64()) {
                    llm_out.at(i).append_value(v);
                }
                if let Some(v) = first_attr(s, genai::SESSION_ID).and_then(|v| v.as_str()) {
                    session.at(i).append_value(v);
                }
            }
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(trace_id.finish()),
            Arc::new(span_id.finish()),
            Arc::new(parent.finish()),
            Arc::new(service.finish()),
            Arc::new(name.finish()),
            Arc::new(kind.finish()),
            Arc::new(start.finish()),
            Arc::new(duration.finish()),
            Arc::new(status_code.finish()),
            status_message.finish(n),
            trace_state.finish(n),
            Arc::new(flags.finish()),
            Arc::new(attributes.finish()),
            events.finish(n),
            links.finish(n),
            Arc::new(dropped_attrs.finish()),
            Arc::new(dropped_events.finish()),
            Arc::new(dropped_links.finish()),
            Arc::new(resource.finish()),
            Arc::new(scope.finish()),
            llm_model.finish(n),
            llm_in.finish(n),
            llm_out.finish(n),
            session.finish(n),
        ];
        Ok(RecordBatch::try_new(SCHEMA.clone(), cols)?)
    }

    fn from_batch(batch: &RecordBatch, shared: &SharedParse) -> Result<Vec<Span>> {
        let c = Cols::new(batch);
        let trace_id = c.fixed("trace_id")?;
        let span_id = c.fixed("span_id")?;
        let parent = c.fixed("parent_span_id")?;
        let name = c.str("name")?;
        let kind = c.i8("kind")?;
        let start = c.ts("start_time_unix_nano")?;
        let duration = c.i64("duration_ns")?;
        let status_code = c.i8("status_code")?;
        let status_message = c.str("status_message")?;
        let trace_state = c.str("trace_state")?;
        let flags = c.u32("flags")?;
        let attributes = c.str("attributes")?;
        let events = c.str("events")?;
        let links = c.str("links")?;
        let dropped_attrs = c.u32("dropped_attributes_count")?;
        let dropped_events = c.u32("dropped_events_count")?;
        let dropped_links = c.u32("dropped_links_count")?;
        let resource = c.str("resource")?;
        let scope = c.str("scope")?;
        let mut out = Vec::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            let tid = get_fixed(trace_id, i).ok_or_else(|| Error::corrupt("span part", "null trace_id"))?;
            let sid = get_fixed(span_id, i).ok_or_else(|| Error::corrupt("span part", "null span_id"))?;
            let start_ns = get_prim(start, i).unwrap_or(0);
            let end_ns = start_ns.wrapping_add(get_prim(duration, i).unwrap_or(0));
            out.push(Span {
                trace_id: TraceId::from_bytes(tid)?,
                span_id: SpanId::from_bytes(sid)?,
                parent_span_id: get_fixed(parent, i).map(SpanId::from_bytes).transpose()?,
                trace_state: get_string(trace_state, i),
                flags: get_prim(flags, i).unwrap_or(0),
                name: get_string(name, i),
                kind: SpanKind::from_i32(get_prim(kind, i).unwrap_or(0) as i32).unwrap_or_default(),
                start_time_unix_nano: from_ts(Some(start_ns)),
                end_time_unix_nano: from_ts(Some(end_ns)),
                attributes: parse_attrs(get_str(attributes, i))?,
                dropped_attributes_count: get_prim(dropped_attrs, i).unwrap_or(0),
                events: match get_str(events, i) {
                    Some(t) => events_from_json(&parse_json(t, "events")?)?,
                    None => Vec::new(),
                },
                dropped_events_count: get_prim(dropped_events, i).unwrap_or(0),
                links: match get_str(links, i) {
                    Some(t) => links_from_json(&parse_json(t, "links")?)?,
                    None => Vec::new(),
                },
                dropped_links_count: get_prim(dropped_links, i).unwrap_or(0),
                status: Status {
                    code: StatusCode::from_i32(get_prim(status_code, i).unwrap_or(0) as i32).unwrap_or_default(),
                    message: get_string(status_message, i),
                },
                resource: shared.resource(get_str(resource, i))?,
                scope: shared.scope(get_str(scope, i))?,
            });
        }
        Ok(out)
    }
}
