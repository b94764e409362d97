//! Answer formats: JSON (`{"columns", "rows", "truncated"}`, capped),
//! NDJSON (an object per row), CSV (RFC 4180, a header row) and Arrow IPC
//! (the streaming format). All but JSON are written a batch at a time.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::{DataFusionError, Result};
use serde_json::{Map, Value};

/// An answer format, as `"format"` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Ndjson,
    Csv,
    Arrow,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "json" => Ok(Format::Json),
            "ndjson" => Ok(Format::Ndjson),
            "csv" => Ok(Format::Csv),
            "arrow" => Ok(Format::Arrow),
            other => Err(format!("unknown format {other:?}: json, ndjson, csv or arrow")),
        }
    }
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Ndjson => "application/x-ndjson",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Arrow => "application/vnd.apache.arrow.stream",
        }
    }
}

/// The `columns` of a JSON answer: name and type of each.
pub fn columns_json(schema: &SchemaRef) -> Value {
    Value::Array(
        schema
            .fields()
            .iter()
            .map(|f| serde_json::json!({"name": f.name(), "type": type_name(f.data_type())}))
            .collect(),
    )
}

/// A type as SQL users read it.
pub fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "TINYINT UNSIGNED".into(),
        DataType::UInt16 => "SMALLINT UNSIGNED".into(),
        DataType::UInt32 => "INT UNSIGNED".into(),
        DataType::UInt64 => "BIGINT UNSIGNED".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Map(_, _) => "MAP(VARCHAR, VARCHAR)".into(),
        DataType::Null => "NULL".into(),
        other => other.to_string(),
    }
}

fn options() -> FormatOptions<'static> {
    FormatOptions::default().with_display_error(true)
}

/// Each column of `batch` as JSON values, row by row.
pub fn rows_json(batch: &RecordBatch) -> Result<Vec<Vec<Value>>> {
    let cols: Vec<Vec<Value>> = batch.columns().iter().map(column_json).collect::<Result<_>>()?;
    Ok((0..batch.num_rows())
        .map(|r| cols.iter().map(|c| c[r].clone()).collect())
        .collect())
}

fn float(v: f64) -> Value {
    // NaN and infinities have no JSON number: their SQL spelling.
    serde_json::Number::from_f64(v)
        .map(Value::Number)
        .unwrap_or_else(|| Value::String(v.to_string()))
}

/// A column as JSON values: numbers as numbers, text as strings, maps as
/// objects, lists as arrays, structs as objects; anything else (times,
/// dates, intervals, binary) as Arrow prints it.
pub fn column_json(a: &ArrayRef) -> Result<Vec<Value>> {
    use datafusion::arrow::datatypes::*;
    let n = a.len();
    let mut out = Vec::with_capacity(n);
    macro_rules! prim {
        ($t:ty, $f:expr) => {{
            let p = a.as_primitive::<$t>();
            let f = $f;
            for i in 0..n {
                out.push(if p.is_null(i) { Value::Null } else { f(p.value(i)) });
            }
        }};
    }
    match a.data_type() {
        DataType::Null => out.resize(n, Value::Null),
        DataType::Boolean => {
            let b = a.as_boolean();
            for i in 0..n {
                out.push(if b.is_null(i) {
                    Value::Null
                } else {
                    Value::Bool(b.value(i))
                });
            }
        }
        DataType::Int8 => prim!(Int8Type, Value::from),
        DataType::Int16 => prim!(Int16Type, Value::from),
        DataType::Int32 => prim!(Int32Type, Value::from),
        DataType::Int64 => prim!(Int64Type, Value::from),
        DataType::UInt8 => prim!(UInt8Type, Value::from),
        DataType::UInt16 => prim!(UInt16Type, Value::from),
        DataType::UInt32 => prim!(UInt32Type, Value::from),
        DataType::UInt64 => prim!(UInt64Type, Value::from),
        DataType::Float32 => prim!(Float32Type, |v: f32| float(v as f64)),
        DataType::Float64 => prim!(Float64Type, float),
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            for i in 0..n {
                out.push(if s.is_null(i) {
                    Value::Null
                } else {
                    Value::String(s.value(i).to_string())
                });
            }
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            for i in 0..n {
                out.push(if s.is_null(i) {
                    Value::Null
                } else {
                    Value::String(s.value(i).to_string())
                });
            }
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            for i in 0..n {
                out.push(if s.is_null(i) {
                    Value::Null
                } else {
                    Value::String(s.value(i).to_string())
                });
            }
        }
        DataType::Decimal128(_, _) | DataType::Decimal256(_, _) => {
            let f = ArrayFormatter::try_new(a.as_ref(), &options())?;
            for i in 0..n {
                out.push(if a.is_null(i) {
                    Value::Null
                } else {
                    let t = f.value(i).to_string();
                    t.parse::<f64>().map(float).unwrap_or(Value::String(t))
                });
            }
        }
        DataType::Map(_, _) => {
            let m = a.as_map();
            let keys = column_json(m.keys())?;
            let values = column_json(m.values())?;
            let offsets = m.value_offsets();
            for i in 0..n {
                if m.is_null(i) {
                    out.push(Value::Null);
                    continue;
                }
                let mut obj = Map::new();
                for j in offsets[i] as usize..offsets[i + 1] as usize {
                    let k = match &keys[j] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    obj.insert(k, values[j].clone());
                }
                out.push(Value::Object(obj));
            }
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) => {
            for i in 0..n {
                if a.is_null(i) {
                    out.push(Value::Null);
                    continue;
                }
                let item: ArrayRef = match a.data_type() {
                    DataType::List(_) => a.as_list::<i32>().value(i),
                    DataType::LargeList(_) => a.as_list::<i64>().value(i),
                    _ => a.as_fixed_size_list().value(i),
                };
                out.push(Value::Array(column_json(&item)?));
            }
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let cols: Vec<Vec<Value>> = s.columns().iter().map(column_json).collect::<Result<_>>()?;
            for i in 0..n {
                if s.is_null(i) {
                    out.push(Value::Null);
                    continue;
                }
                let mut obj = Map::new();
                for (f, c) in fields.iter().zip(&cols) {
                    obj.insert(f.name().clone(), c[i].clone());
                }
                out.push(Value::Object(obj));
            }
        }
        _ => {
            let f = ArrayFormatter::try_new(a.as_ref(), &options())?;
            for i in 0..n {
                out.push(if a.is_null(i) {
                    Value::Null
                } else {
                    Value::String(f.value(i).to_string())
                });
            }
        }
    }
    Ok(out)
}

/// Writes batches in one of the streaming formats.
pub struct Encoder {
    format: Format,
    schema: SchemaRef,
    arrow: Option<StreamWriter<Vec<u8>>>,
    started: bool,
}

impl Encoder {
    pub fn new(format: Format, schema: SchemaRef) -> Result<Encoder> {
        let arrow = match format {
            Format::Arrow => Some(StreamWriter::try_new(Vec::new(), &schema)?),
            _ => None,
        };
        Ok(Encoder {
            format,
            schema,
            arrow,
            started: false,
        })
    }

    /// What comes before the first batch (CSV's header; Arrow's schema).
    pub fn header(&mut self) -> Result<Vec<u8>> {
        self.started = true;
        match self.format {
            Format::Csv => {
                let mut out = String::new();
                for (i, f) in self.schema.fields().iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    csv_field(&mut out, f.name());
                }
                out.push_str("\r\n");
                Ok(out.into_bytes())
            }
            Format::Arrow => Ok(self.take_arrow()),
            Format::Json | Format::Ndjson => Ok(Vec::new()),
        }
    }

    fn take_arrow(&mut self) -> Vec<u8> {
        self.arrow
            .as_mut()
            .map(|w| std::mem::take(w.get_mut()))
            .unwrap_or_default()
    }

    pub fn batch(&mut self, batch: &RecordBatch) -> Result<Vec<u8>> {
        match self.format {
            Format::Arrow => {
                if let Some(w) = self.arrow.as_mut() {
                    w.write(batch)?;
                }
                Ok(self.take_arrow())
            }
            Format::Ndjson => {
                let rows = rows_json(batch)?;
                let mut out = Vec::new();
                for row in rows {
                    let obj: Map<String, Value> = self
                        .schema
                        .fields()
                        .iter()
                        .zip(row)
                        .map(|(f, v)| (f.name().clone(), v))
                        .collect();
                    serde_json::to_writer(&mut out, &obj).map_err(|e| DataFusionError::External(Box::new(e)))?;
                    out.push(b'\n');
                }
                Ok(out)
            }
            Format::Csv => {
                let rows = rows_json(batch)?;
                let mut out = String::new();
                for row in rows {
                    for (i, v) in row.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        match v {
                            Value::Null => {}
                            Value::String(s) => csv_field(&mut out, s),
                            other => csv_field(&mut out, &other.to_string()),
                        }
                    }
                    out.push_str("\r\n");
                }
                Ok(out.into_bytes())
            }
            Format::Json => Err(DataFusionError::Internal("JSON answers are not streamed".into())),
        }
    }

    /// What comes after the last batch (Arrow's end-of-stream marker).
    pub fn finish(&mut self) -> Result<Vec<u8>> {
        match self.arrow.as_mut() {
            Some(w) => {
                w.finish()?;
                Ok(self.take_arrow())
            }
            None => Ok(Vec::new()),
        }
    }
}

/// Appends `s` as a CSV field, quoted when it must be.
fn csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\r', '\n']) || s.starts_with(' ') || s.ends_with(' ') {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// A JSON answer from `batches`: at most `cap` rows; `truncated` when more
/// were there.
pub struct JsonAnswer {
    pub columns: Value,
    pub rows: Vec<Vec<Value>>,
    pub truncated: bool,
}

impl JsonAnswer {
    pub fn new(schema: &SchemaRef) -> JsonAnswer {
        JsonAnswer {
            columns: columns_json(schema),
            rows: Vec::new(),
            truncated: false,
        }
    }

    /// Adds a batch; `false` once a row past the cap was seen (read no
    /// more: the answer is truncated).
    pub fn add(&mut self, batch: &RecordBatch, cap: usize) -> Result<bool> {
        let room = cap.saturating_sub(self.rows.len());
        if batch.num_rows() > room {
            self.truncated = true;
        }
        let batch = batch.slice(0, batch.num_rows().min(room));
        self.rows.extend(rows_json(&batch)?);
        Ok(!self.truncated)
    }

    pub fn to_json(&self) -> Value {
        serde_json::json!({"columns": self.columns, "rows": self.rows, "truncated": self.truncated})
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
                Arc::new(StringArray::from(vec![Some("a,b"), Some("x"), None])),
                Arc::new(Float64Array::from(vec![Some(0.5), Some(f64::NAN), None])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn json_rows_keep_types_and_nulls() {
        let rows = rows_json(&batch()).unwrap();
        assert_eq!(rows[0], vec![Value::from(1), Value::from("a,b"), Value::from(0.5)]);
        assert_eq!(rows[1], vec![Value::Null, Value::from("x"), Value::from("NaN")]);
        assert_eq!(rows[2][2], Value::Null);
    }

    #[test]
    fn json_answer_caps_rows_and_says_so() {
        let b = batch();
        let mut a = JsonAnswer::new(&b.schema());
        assert!(!a.add(&b, 2).unwrap());
        assert_eq!(a.rows.len(), 2);
        assert!(a.truncated);
        // Exactly the cap is not truncated, until one more row comes.
        let mut exact = JsonAnswer::new(&b.schema());
        assert!(exact.add(&b, 3).unwrap());
        assert!(!exact.truncated);
        assert!(!exact.add(&b.slice(0, 1), 3).unwrap());
        assert!(exact.truncated);
        assert_eq!(exact.rows.len(), 3);
    }

    #[test]
    fn csv_quotes_what_it_must() {
        let b = batch();
        let mut e = Encoder::new(Format::Csv, b.schema()).unwrap();
        let mut out = e.header().unwrap();
        out.extend(e.batch(&b).unwrap());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "n,s,f\r\n1,\"a,b\",0.5\r\n,x,NaN\r\n3,,\r\n"
        );
    }

    #[test]
    fn arrow_stream_reads_back() {
        let b = batch();
        let mut e = Encoder::new(Format::Arrow, b.schema()).unwrap();
        let mut out = e.header().unwrap();
        out.extend(e.batch(&b).unwrap());
        out.extend(e.finish().unwrap());
        let r = datafusion::arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(out), None).unwrap();
        let got: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
        assert_eq!(got, vec![b]);
    }
}
