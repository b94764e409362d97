//! The log part layout.

use std::sync::{Arc, LazyLock};

use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Schema, SchemaRef};
use skein_model::json::{OtlpValue, any_value_from_json, to_json_string};
use skein_model::{AnyValue, LogRecord, SpanId, TraceId};

use super::*;

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        // The record's effective time (time, else observed time): the sort key.
        field("timestamp", ts_type(), false),
        field("time_unix_nano", ts_type(), true),
        field("observed_time_unix_nano", ts_type(), true),
        field("service_name", DataType::Utf8, false),
        field("severity_number", DataType::Int8, false),
        field("severity_text", DataType::Utf8, true),
        // A string body as text; any other body in OTLP/JSON in body_json.
        field("body", DataType::Utf8, true),
        field("body_json", DataType::Utf8, true),
        field("attributes", DataType::Utf8, true),
        field("dropped_attributes_count", DataType::UInt32, false),
        field("flags", DataType::UInt32, false),
        field("trace_id", DataType::FixedSizeBinary(16), true),
        field("span_id", DataType::FixedSizeBinary(8), true),
        field("event_name", DataType::Utf8, true),
        field("resource", DataType::Utf8, false),
        field("scope", DataType::Utf8, false),
    ]))
});

/// The columns holding what a log record's text is made of (its body, event
/// name and attributes: see `text::TextRecord`).
pub const TEXT_COLUMNS: &[&str] = &["body", "body_json", "attributes", "event_name"];

/// Row `i` of a batch of [`TEXT_COLUMNS`] as a record holding only those
/// fields: enough to decide a text query on it before the whole row is read.
pub fn text_record(batch: &RecordBatch, i: usize) -> Result<LogRecord> {
    TextColumns::of(batch)?.record(i)
}

/// The [`TEXT_COLUMNS`] of a batch.
struct TextColumns<'a> {
    body: Option<&'a StringArray>,
    body_json: Option<&'a StringArray>,
    attributes: Option<&'a StringArray>,
    event_name: Option<&'a StringArray>,
}

impl<'a> TextColumns<'a> {
    fn of(batch: &'a RecordBatch) -> Result<TextColumns<'a>> {
        let c = Cols::new(batch);
        Ok(TextColumns {
            body: c.str("body")?,
            body_json: c.str("body_json")?,
            attributes: c.str("attributes")?,
            event_name: c.str("event_name")?,
        })
    }

    fn record(&self, i: usize) -> Result<LogRecord> {
        Ok(LogRecord {
            body: body_at(self.body, self.body_json, i)?,
            attributes: parse_attrs(get_str(self.attributes, i))?,
            event_name: get_string(self.event_name, i),
            ..Default::default()
        })
    }
}

/// Row `i`'s body: a string in `body`, any other value in `body_json`.
fn body_at(body: Option<&StringArray>, body_json: Option<&StringArray>, i: usize) -> Result<AnyValue> {
    Ok(match (get_str(body, i), get_str(body_json, i)) {
        (Some(s), _) => AnyValue::Str(s.to_string()),
        (None, Some(j)) => any_value_from_json(&parse_json(j, "body_json")?)?,
        (None, None) => AnyValue::Empty,
    })
}

impl Columnar for LogRecord {
    fn schema() -> SchemaRef {
        SCHEMA.clone()
    }

    fn record_columns() -> &'static [&'static str] {
        &[
            "time_unix_nano",
            "observed_time_unix_nano",
            "severity_number",
            "severity_text",
            "body",
            "body_json",
            "attributes",
            "dropped_attributes_count",
            "flags",
            "trace_id",
            "span_id",
            "event_name",
            "resource",
            "scope",
        ]
    }

    fn to_batch(rows: &[&LogRecord]) -> Result<RecordBatch> {
        let n = rows.len();
        let mut timestamp = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut time = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut observed = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut service = StringBuilder::with_capacity(n, n * 8);
        let mut sev = Int8Builder::with_capacity(n);
        let mut sev_text = StringBuilder::new();
        let mut body = StringBuilder::with_capacity(n, n * 64);
        let mut body_json = StringBuilder::new();
        let mut attributes = StringBuilder::new();
        let mut dropped = UInt32Builder::with_capacity(n);
        let mut flags = UInt32Builder::with_capacity(n);
        let mut trace_id = FixedSizeBinaryBuilder::with_capacity(n, 16);
        let mut span_id = FixedSizeBinaryBuilder::with_capacity(n, 8);
        let mut event_name = StringBuilder::new();
        let mut resource = StringBuilder::new();
        let mut scope = StringBuilder::new();
        let mut shared = SharedJson::default();
        let mut json = AttrsJson::default();
        for r in rows {
            timestamp.append_value(ts(r.effective_time()));
            time.append_option((r.time_unix_nano != 0).then(|| ts(r.time_unix_nano)));
            observed.append_option((r.observed_time_unix_nano != 0).then(|| ts(r.observed_time_unix_nano)));
            let res = shared.resource(&r.resource);
            service.append_value(shared.service(res));
            sev.append_value(r.severity_number as i8);
            sev_text.append_option((!r.severity_text.is_empty()).then_some(&r.severity_text));
            match &r.body {
                AnyValue::Str(s) => {
                    body.append_value(s);
                    body_json.append_null();
                }
                AnyValue::Empty => {
                    body.append_null();
                    body_json.append_null();
                }
                other => {
                    body.append_null();
                    body_json.append_value(to_json_string(&OtlpValue(other)));
                }
            }
            json.append(&mut attributes, &r.attributes);
            dropped.append_value(r.dropped_attributes_count);
            flags.append_value(r.flags);
            match r.trace_id {
                Some(t) => trace_id.append_value(t.0)?,
                None => trace_id.append_null(),
            }
            match r.span_id {
                Some(s) => span_id.append_value(s.0)?,
                None => span_id.append_null(),
            }
            event_name.append_option((!r.event_name.is_empty()).then_some(&r.event_name));
            resource.append_value(shared.resource_json(res));
            let slot = shared.scope(&r.scope);
            scope.append_value(shared.scope_json(slot));
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(timestamp.finish()),
            Arc::new(time.finish()),
            Arc::new(observed.finish()),
            Arc::new(service.finish()),
            Arc::new(sev.finish()),
            Arc::new(sev_text.finish()),
            Arc::new(body.finish()),
            Arc::new(body_json.finish()),
            Arc::new(attributes.finish()),
            Arc::new(dropped.finish()),
            Arc::new(flags.finish()),
            Arc::new(trace_id.finish()),
            Arc::new(span_id.finish()),
            Arc::new(event_name.finish()),
            Arc::new(resource.finish()),
            Arc::new(scope.finish()),
        ];
        Ok(RecordBatch::try_new(SCHEMA.clone(), cols)?)
    }

    fn text_columns() -> &'static [&'static str] {
        TEXT_COLUMNS
    }

    fn text_records(batch: &RecordBatch) -> Result<Vec<LogRecord>> {
        let c = TextColumns::of(batch)?;
        (0..batch.num_rows()).map(|i| c.record(i)).collect()
    }

    fn from_batch(batch: &RecordBatch, shared: &SharedParse) -> Result<Vec<LogRecord>> {
        let c = Cols::new(batch);
        let time = c.ts("time_unix_nano")?;
        let observed = c.ts("observed_time_unix_nano")?;
        let sev = c.i8("severity_number")?;
        let sev_text = c.str("severity_text")?;
        let body = c.str("body")?;
        let body_json = c.str("body_json")?;
        let attributes = c.str("attributes")?;
        let dropped = c.u32("dropped_attributes_count")?;
        let flags = c.u32("flags")?;
        let trace_id = c.fixed("trace_id")?;
        let span_id = c.fixed("span_id")?;
        let event_name = c.str("event_name")?;
        let resource = c.str("resource")?;
        let scope = c.str("scope")?;
        let mut out = Vec::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            let body = body_at(body, body_json, i)?;
            out.push(LogRecord {
                time_unix_nano: from_ts(get_prim(time, i)),
                observed_time_unix_nano: from_ts(get_prim(observed, i)),
                severity_number: get_prim(sev, i).unwrap_or(0) as i32,
                severity_text: get_string(sev_text, i),
                body,
                attributes: parse_attrs(get_str(attributes, i))?,
                dropped_attributes_count: get_prim(dropped, i).unwrap_or(0),
                flags: get_prim(flags, i).unwrap_or(0),
                trace_id: get_fixed(trace_id, i).map(TraceId::from_bytes).transpose()?,
                span_id: get_fixed(span_id, i).map(SpanId::from_bytes).transpose()?,
                event_name: get_string(event_name, i),
                resource: shared.resource(get_str(resource, i))?,
                scope: shared.scope(get_str(scope, i))?,
            });
        }
        Ok(out)
    }
}
