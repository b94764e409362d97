//! The SQL tables: their columns, and how each is made from the engine's
//! part layout (`skein_engine::query::scan`).
//!
//! Most columns are the part's own, passed through untouched. Ids become
//! lowercase hex text (how every other Skein surface writes them, and what
//! a user pastes into `WHERE trace_id = '…'`); the OTLP/JSON attribute lists
//! become `MAP(VARCHAR, VARCHAR)` columns (`attributes['http.route']`), and
//! the resource's attributes get a map of their own.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, MapBuilder, RecordBatch, RecordBatchOptions, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::{DataFusionError, Result};
use skein_engine::Signal;
use skein_model::{AnyValue, KeyValue};

/// How a SQL column is made from a part column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conv {
    /// The part column as it is.
    Pass,
    /// Fixed-size binary id → lowercase hex text.
    Hex,
    /// OTLP/JSON attribute list → map of key to value text.
    AttrMap,
    /// Resource OTLP/JSON → map of its attributes.
    ResourceAttrMap,
}

/// One SQL column.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    /// The part column it is made from.
    pub source: String,
    pub conv: Conv,
}

/// One SQL table over a signal.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: &'static str,
    pub signal: Signal,
    /// The column holding the time the engine's window narrows by.
    pub time_column: &'static str,
    pub columns: Vec<Column>,
    pub schema: SchemaRef,
}

/// `MAP(VARCHAR, VARCHAR)`, keys never NULL, values NULL for an empty value.
pub fn map_type() -> DataType {
    let entries = Field::new(
        "entries",
        DataType::Struct(
            vec![
                Field::new("keys", DataType::Utf8, false),
                Field::new("values", DataType::Utf8, true),
            ]
            .into(),
        ),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

impl Table {
    fn new(name: &'static str, signal: Signal, time_column: &'static str) -> Table {
        let layout = skein_engine::scan_schema(signal);
        let mut columns = Vec::new();
        let mut fields = Vec::new();
        for f in layout.fields() {
            let source = f.name().as_str();
            let (conv, dt) = match (source, f.data_type()) {
                (_, DataType::FixedSizeBinary(_)) => (Conv::Hex, DataType::Utf8),
                ("attributes", _) => (Conv::AttrMap, map_type()),
                _ => (Conv::Pass, f.data_type().clone()),
            };
            columns.push(Column {
                name: source.to_string(),
                source: source.to_string(),
                conv,
            });
            fields.push(Field::new(source, dt, f.is_nullable()));
            if source == "resource" {
                columns.push(Column {
                    name: "resource_attributes".to_string(),
                    source: source.to_string(),
                    conv: Conv::ResourceAttrMap,
                });
                fields.push(Field::new("resource_attributes", map_type(), true));
            }
        }
        // A part written before a column existed reads it as all NULL.
        let fields: Vec<Field> = fields.into_iter().map(|f| f.with_nullable(true)).collect();
        Table {
            name,
            signal,
            time_column,
            columns,
            schema: Arc::new(Schema::new(fields)),
        }
    }

    /// Every table, in the order `information_schema`-less users list them
    /// in the docs.
    pub fn all() -> Vec<Table> {
        vec![
            Table::new("spans", Signal::Spans, "start_time_unix_nano"),
            Table::new("logs", Signal::Logs, "timestamp"),
            Table::new("metric_points", Signal::Metrics, "time_unix_nano"),
        ]
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The part columns the SQL columns `projection` need, each once.
    pub fn sources(&self, projection: &[usize]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for &i in projection {
            let s = &self.columns[i].source;
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
        if out.is_empty() {
            // `count(*)` reads no column, but a batch still needs its rows
            // counted: read the narrowest one.
            out.push(self.time_column.to_string());
        }
        out
    }

    /// The SQL columns `projection` of a part-layout batch.
    pub fn convert(&self, batch: &RecordBatch, projection: &[usize], schema: &SchemaRef) -> Result<RecordBatch> {
        let mut cols = Vec::with_capacity(projection.len());
        for &i in projection {
            let c = &self.columns[i];
            let src = batch
                .column_by_name(&c.source)
                .ok_or_else(|| DataFusionError::Internal(format!("scan gave no column {}", c.source)))?;
            cols.push(convert(c.conv, src)?);
        }
        let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(schema.clone(), cols, &opts)?)
    }
}

fn convert(conv: Conv, src: &ArrayRef) -> Result<ArrayRef> {
    match conv {
        Conv::Pass => Ok(src.clone()),
        Conv::Hex => {
            let a = src
                .as_fixed_size_binary_opt()
                .ok_or_else(|| DataFusionError::Internal("id column is not fixed-size binary".into()))?;
            let mut b = StringBuilder::with_capacity(a.len(), a.len() * a.value_length() as usize * 2);
            let mut buf = String::new();
            for i in 0..a.len() {
                if a.is_null(i) {
                    b.append_null();
                } else {
                    buf.clear();
                    for byte in a.value(i) {
                        use std::fmt::Write;
                        let _ = write!(buf, "{byte:02x}");
                    }
                    b.append_value(&buf);
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Conv::AttrMap | Conv::ResourceAttrMap => {
            let a = src
                .as_string_opt::<i32>()
                .ok_or_else(|| DataFusionError::Internal("attribute column is not text".into()))?;
            let mut b = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
            // Resources repeat row after row: parse each distinct one once.
            let mut last: Option<(String, Vec<KeyValue>)> = None;
            let mut text = String::new();
            for i in 0..a.len() {
                if a.is_null(i) {
                    b.append(true)?;
                    continue;
                }
                let json = a.value(i);
                if last.as_ref().is_none_or(|(j, _)| j != json) {
                    let attrs = if conv == Conv::AttrMap {
                        skein_model::json_attrs::attrs_from_json_str(json)
                    } else {
                        resource_attrs(json)
                    }
                    .map_err(|e| DataFusionError::External(format!("stored attributes: {e}").into()))?;
                    last = Some((json.to_string(), attrs));
                }
                if let Some((_, attrs)) = &last {
                    for kv in attrs {
                        b.keys().append_value(&kv.key);
                        if matches!(kv.value, AnyValue::Empty) {
                            b.values().append_null();
                        } else {
                            text.clear();
                            value_text(&kv.value, &mut text);
                            b.values().append_value(&text);
                        }
                    }
                }
                b.append(true)?;
            }
            Ok(Arc::new(b.finish()))
        }
    }
}

fn resource_attrs(json: &str) -> std::result::Result<Vec<KeyValue>, skein_model::ModelError> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| skein_model::ModelError::new(format!("resource: {e}")))?;
    match v.get("attributes") {
        Some(a) => skein_model::json::attrs_from_json(a),
        None => Ok(Vec::new()),
    }
}

/// An attribute value as map text: strings as they are, numbers and
/// booleans as SQL would print them, bytes as base64 (OTLP/JSON's form),
/// arrays and maps as JSON.
pub fn value_text(v: &AnyValue, out: &mut String) {
    use std::fmt::Write;
    match v {
        AnyValue::Empty => {}
        AnyValue::Str(s) => out.push_str(s),
        AnyValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        AnyValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        AnyValue::Double(d) => {
            let _ = write!(out, "{d}");
        }
        AnyValue::Bytes(b) => {
            use base64::Engine as _;
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(b));
        }
        AnyValue::Array(_) | AnyValue::Map(_) => out.push_str(&plain_json(v).to_string()),
    }
}

fn plain_json(v: &AnyValue) -> serde_json::Value {
    use serde_json::Value;
    match v {
        AnyValue::Empty => Value::Null,
        AnyValue::Str(s) => Value::String(s.clone()),
        AnyValue::Bool(b) => Value::Bool(*b),
        AnyValue::Int(i) => Value::from(*i),
        AnyValue::Double(d) => serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number),
        AnyValue::Bytes(_) => {
            let mut s = String::new();
            value_text(v, &mut s);
            Value::String(s)
        }
        AnyValue::Array(a) => Value::Array(a.iter().map(plain_json).collect()),
        AnyValue::Map(m) => Value::Object(m.iter().map(|kv| (kv.key.clone(), plain_json(&kv.value))).collect()),
    }
}

/// The attribute values whose map text is `text`, for narrowing by the
/// engine's postings; `None` when some value the postings cannot find
/// (bytes, arrays, maps, the empty value) could also print as `text`, so
/// that the filter must not narrow.
pub fn values_printing_as(text: &str) -> Option<Vec<AnyValue>> {
    if text.is_empty() || text.starts_with('[') || text.starts_with('{') || could_be_base64(text) {
        return None;
    }
    let mut out = vec![AnyValue::Str(text.to_string())];
    if let Ok(i) = text.parse::<i64>() {
        out.push(AnyValue::Int(i));
    }
    if let Ok(d) = text.parse::<f64>() {
        out.push(AnyValue::Double(d));
    }
    match text {
        "true" => out.push(AnyValue::Bool(true)),
        "false" => out.push(AnyValue::Bool(false)),
        _ => {}
    }
    Some(out)
}

fn could_be_base64(text: &str) -> bool {
    text.len().is_multiple_of(4)
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

/// The type SQL sees for times.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_values_round_trip_to_the_values_they_narrow_by() {
        let cases = [
            AnyValue::Str("GET /users".into()),
            AnyValue::Int(200),
            AnyValue::Int(-7),
            AnyValue::Double(0.25),
            AnyValue::Double(200.0),
        ];
        // "true" could also be base64 bytes: it never narrows (safe).
        assert!(values_printing_as("true").is_none());
        for v in cases {
            let mut t = String::new();
            value_text(&v, &mut t);
            let alts = values_printing_as(&t).unwrap_or_else(|| panic!("{t:?} should narrow"));
            assert!(
                alts.iter().any(|a| a.query_eq(&v)),
                "{v:?} printed {t:?}, alternatives {alts:?}"
            );
        }
        // Whatever bytes, arrays and maps print as never narrows.
        for v in [
            AnyValue::Bytes(vec![1, 2, 3]),
            AnyValue::Array(vec![AnyValue::Int(1)]),
            AnyValue::Map(vec![KeyValue::new("a", 1i64)]),
        ] {
            let mut t = String::new();
            value_text(&v, &mut t);
            assert!(values_printing_as(&t).is_none(), "{t:?}");
        }
        assert!(values_printing_as("").is_none());
    }

    #[test]
    fn tables_expose_ids_as_hex_and_attributes_as_maps() {
        for t in Table::all() {
            let s = &t.schema;
            assert_eq!(
                s.field_with_name("attributes").unwrap().data_type(),
                &map_type(),
                "{}",
                t.name
            );
            assert_eq!(
                s.field_with_name("resource_attributes").unwrap().data_type(),
                &map_type()
            );
            assert_eq!(s.field_with_name("service_name").unwrap().data_type(), &DataType::Utf8);
            assert_eq!(s.field_with_name(t.time_column).unwrap().data_type(), &timestamp_type());
        }
        let tables = Table::all();
        let spans = &tables[0];
        assert_eq!(
            spans.schema.field_with_name("trace_id").unwrap().data_type(),
            &DataType::Utf8
        );
    }
}
