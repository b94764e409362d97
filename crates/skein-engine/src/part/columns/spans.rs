//! The span part layout.

use std::sync::{Arc, LazyLock};

use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema, SchemaRef};
use skein_model::genai::LlmCall;
use skein_model::json::{OtlpEvents, OtlpLinks, events_from_json, links_from_json, to_json_string};
use skein_model::{Span, SpanId, SpanKind, Status, StatusCode, TraceId};

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
        // Typed GenAI columns: the span's `LlmCall` (skein-model's genai),
        // derived from the attributes at write time so that LLM usage, cost
        // and sessions — here and in any SQL engine — never parse JSON.
        field("llm_kind", DataType::Int8, true),
        field("llm_provider", DataType::Utf8, true),
        field("llm_model", DataType::Utf8, true),
        field("llm_request_model", DataType::Utf8, true),
        field("llm_operation", DataType::Utf8, true),
        field("llm_input_tokens", DataType::Int64, true),
        field("llm_output_tokens", DataType::Int64, true),
        field("llm_cache_read_tokens", DataType::Int64, true),
        field("llm_cache_write_tokens", DataType::Int64, true),
        field("llm_reasoning_tokens", DataType::Int64, true),
        field("llm_reported_cost_usd", DataType::Float64, true),
        // Token figures that contradict each other: kept, never priced.
        field("llm_flagged", DataType::Boolean, true),
        field("llm_ttft_ns", DataType::Int64, true),
        field("session_id", DataType::Utf8, true),
        field("user_id", DataType::Utf8, true),
        field("agent_name", DataType::Utf8, true),
        field("tool_name", DataType::Utf8, true),
    ]))
});

/// The typed GenAI columns, as the LLM aggregations read them.
pub const SPAN_LLM_COLUMNS: &[&str] = &[
    "llm_kind",
    "llm_provider",
    "llm_model",
    "llm_request_model",
    "llm_operation",
    "llm_input_tokens",
    "llm_output_tokens",
    "llm_cache_read_tokens",
    "llm_cache_write_tokens",
    "llm_reasoning_tokens",
    "llm_reported_cost_usd",
    "llm_flagged",
    "llm_ttft_ns",
    "session_id",
    "user_id",
    "agent_name",
    "tool_name",
];

/// Builders of the typed GenAI columns, sparse (most spans are not GenAI).
struct LlmColumns {
    kind: Sparse<Int8Builder>,
    provider: Sparse<StringBuilder>,
    model: Sparse<StringBuilder>,
    request_model: Sparse<StringBuilder>,
    operation: Sparse<StringBuilder>,
    input: Sparse<Int64Builder>,
    output: Sparse<Int64Builder>,
    cache_read: Sparse<Int64Builder>,
    cache_write: Sparse<Int64Builder>,
    reasoning: Sparse<Int64Builder>,
    reported_cost: Sparse<Float64Builder>,
    flagged: Sparse<BooleanBuilder>,
    ttft: Sparse<Int64Builder>,
    session: Sparse<StringBuilder>,
    user: Sparse<StringBuilder>,
    agent: Sparse<StringBuilder>,
    tool: Sparse<StringBuilder>,
}

impl LlmColumns {
    fn new() -> LlmColumns {
        LlmColumns {
            kind: Sparse::new(Int8Builder::new()),
            provider: Sparse::new(StringBuilder::new()),
            model: Sparse::new(StringBuilder::new()),
            request_model: Sparse::new(StringBuilder::new()),
            operation: Sparse::new(StringBuilder::new()),
            input: Sparse::new(Int64Builder::new()),
            output: Sparse::new(Int64Builder::new()),
            cache_read: Sparse::new(Int64Builder::new()),
            cache_write: Sparse::new(Int64Builder::new()),
            reasoning: Sparse::new(Int64Builder::new()),
            reported_cost: Sparse::new(Float64Builder::new()),
            flagged: Sparse::new(BooleanBuilder::new()),
            ttft: Sparse::new(Int64Builder::new()),
            session: Sparse::new(StringBuilder::new()),
            user: Sparse::new(StringBuilder::new()),
            agent: Sparse::new(StringBuilder::new()),
            tool: Sparse::new(StringBuilder::new()),
        }
    }

    fn append(&mut self, i: usize, c: &LlmCall) {
        fn put_str(b: &mut Sparse<StringBuilder>, i: usize, v: &Option<String>) {
            if let Some(v) = v {
                b.at(i).append_value(v);
            }
        }
        fn put_i64(b: &mut Sparse<Int64Builder>, i: usize, v: Option<i64>) {
            if let Some(v) = v {
                b.at(i).append_value(v);
            }
        }
        if let Some(k) = c.kind {
            self.kind.at(i).append_value(k.as_i8());
        }
        put_str(&mut self.provider, i, &c.provider);
        put_str(&mut self.model, i, &c.model);
        put_str(&mut self.request_model, i, &c.request_model);
        put_str(&mut self.operation, i, &c.operation);
        put_i64(&mut self.input, i, c.input_tokens);
        put_i64(&mut self.output, i, c.output_tokens);
        put_i64(&mut self.cache_read, i, c.cache_read_tokens);
        put_i64(&mut self.cache_write, i, c.cache_write_tokens);
        put_i64(&mut self.reasoning, i, c.reasoning_tokens);
        if let Some(v) = c.reported_cost_usd {
            self.reported_cost.at(i).append_value(v);
        }
        if !c.warnings.is_empty() {
            self.flagged.at(i).append_value(true);
        }
        put_i64(&mut self.ttft, i, c.time_to_first_token_ns.map(|v| v as i64));
        put_str(&mut self.session, i, &c.session_id);
        put_str(&mut self.user, i, &c.user_id);
        put_str(&mut self.agent, i, &c.agent_name);
        put_str(&mut self.tool, i, &c.tool_name);
    }

    fn finish(self, n: usize, cols: &mut Vec<ArrayRef>) {
        cols.extend([
            self.kind.finish(n),
            self.provider.finish(n),
            self.model.finish(n),
            self.request_model.finish(n),
            self.operation.finish(n),
            self.input.finish(n),
            self.output.finish(n),
            self.cache_read.finish(n),
            self.cache_write.finish(n),
            self.reasoning.finish(n),
            self.reported_cost.finish(n),
            self.flagged.finish(n),
            self.ttft.finish(n),
            self.session.finish(n),
            self.user.finish(n),
            self.agent.finish(n),
            self.tool.finish(n),
        ]);
    }
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
        let mut llm = LlmColumns::new();
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
            if let Some(call) = LlmCall::from_attributes(&s.attributes) {
                llm.append(i, &call);
            }
        }
        let mut cols: Vec<ArrayRef> = vec![
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
        ];
        llm.finish(n, &mut cols);
        Ok(RecordBatch::try_new(SCHEMA.clone(), cols)?)
    }

    /// What `text::TextRecord` reads of a span: its name, status message,
    /// attributes and events.
    fn text_columns() -> &'static [&'static str] {
        &["name", "status_message", "attributes", "events"]
    }

    fn text_records(batch: &RecordBatch) -> Result<Vec<Span>> {
        let c = Cols::new(batch);
        let name = c.str("name")?;
        let status_message = c.str("status_message")?;
        let attributes = c.str("attributes")?;
        let events = c.str("events")?;
        (0..batch.num_rows())
            .map(|i| {
                Ok(Span {
                    name: get_string(name, i),
                    status: Status {
                        message: get_string(status_message, i),
                        ..Default::default()
                    },
                    attributes: parse_attrs(get_str(attributes, i))?,
                    events: match get_str(events, i) {
                        Some(t) => events_from_json(&parse_json(t, "events")?)?,
                        None => Vec::new(),
                    },
                    ..Default::default()
                })
            })
            .collect()
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
