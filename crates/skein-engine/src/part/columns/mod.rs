//! Each signal's Parquet column layout and its conversion from and to
//! records.
//!
//! Layout rules: ids are fixed-size binary, times are `TIMESTAMP(NANOS, UTC)`,
//! enums are small integers with OTLP's numbering, and anything nested
//! (attributes, events, links, resource, scope, distributions) is a string
//! column in the OTLP/JSON mapping — typed, lossless and readable by any
//! engine with JSON functions (DuckDB: `attributes::JSON`). Empty lists are
//! stored as NULL. Readers look columns up by name and treat a missing one
//! as empty, so later format versions can add columns without a break.

pub(crate) mod logs;
pub(crate) mod metrics;
mod spans;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, Int64Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int8Type, Int64Type, TimestampNanosecondType, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef, TimeUnit};
use parking_lot::Mutex;
use skein_model::json::{OtlpResource, OtlpScope, resource_from_json, scope_from_json, to_json_string};
use skein_model::{KeyValue, Resource, Scope};

use crate::error::{Error, Result};
use crate::record::Record;

pub use spans::{SPAN_LLM_COLUMNS, SPAN_SUMMARY_COLUMNS};

/// Version of the part layout, written into every part's metadata.
pub const FORMAT_VERSION: u32 = 1;

/// A record type that can be stored in Parquet parts.
pub trait Columnar: Record + crate::text::TextRecord {
    fn schema() -> SchemaRef;
    /// The columns `from_batch` reads: every column but those derived for
    /// SQL engines (service name, typed GenAI fields, series ids), which
    /// point reads and scans then need not decode.
    fn record_columns() -> &'static [&'static str];
    fn to_batch(rows: &[&Self]) -> Result<RecordBatch>;
    /// Decodes a batch; resource and scope JSON are parsed through `shared`.
    fn from_batch(batch: &RecordBatch, shared: &SharedParse) -> Result<Vec<Self>>;
    /// The columns a record's searchable text is made of (see
    /// `text::TextRecord`): what a text-index build reads.
    fn text_columns() -> &'static [&'static str] {
        Self::record_columns()
    }
    /// Decodes a batch of [`text_columns`](Self::text_columns) into records
    /// holding their text and nothing else.
    fn text_records(batch: &RecordBatch) -> Result<Vec<Self>> {
        Self::from_batch(batch, &SharedParse::default())
    }
}

pub(crate) fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

pub(crate) fn field(name: &str, dt: DataType, nullable: bool) -> Field {
    Field::new(name, dt, nullable)
}

/// Writes attribute lists into a string column through one reused buffer,
/// rather than a fresh string per row.
#[derive(Default)]
pub(crate) struct AttrsJson(String);

impl AttrsJson {
    /// Appends `attrs` as OTLP/JSON, or NULL when there are none.
    pub fn append(&mut self, column: &mut arrow_array::builder::StringBuilder, attrs: &[KeyValue]) {
        if attrs.is_empty() {
            column.append_null();
        } else {
            self.0.clear();
            skein_model::json::push_attrs(&mut self.0, attrs);
            column.append_value(&self.0);
        }
    }
}

/// About the bytes `attrs` take as OTLP/JSON, for sizing a column; rather
/// more than less.
pub(crate) fn attrs_json_len_hint(attrs: &[KeyValue]) -> usize {
    attrs.iter().map(|kv| 40 + kv.key.len() + kv.value.approx_size()).sum()
}

/// The distinct resources and scopes of a batch's rows, each serialized to
/// JSON once (and its service name looked up once): rows refer to them by
/// slot.
#[derive(Default)]
pub(crate) struct SharedJson<'a> {
    resource_slots: crate::hash::FastMap<*const Resource, u32>,
    /// Each resource's JSON and service name (looked up once, not per
    /// row: it is a scan of the resource's attributes).
    resources: Vec<(String, &'a str)>,
    scope_slots: crate::hash::FastMap<*const Scope, u32>,
    scopes: Vec<String>,
}

impl<'a> SharedJson<'a> {
    /// The slot of `r`, serializing it if it is new.
    pub fn resource(&mut self, r: &'a Arc<Resource>) -> u32 {
        let next = self.resources.len() as u32;
        let slot = *self.resource_slots.entry(Arc::as_ptr(r)).or_insert(next);
        if slot == next {
            self.resources
                .push((to_json_string(&OtlpResource(r)), r.service_name()));
        }
        slot
    }

    pub fn scope(&mut self, s: &'a Arc<Scope>) -> u32 {
        let next = self.scopes.len() as u32;
        let slot = *self.scope_slots.entry(Arc::as_ptr(s)).or_insert(next);
        if slot == next {
            self.scopes.push(to_json_string(&OtlpScope(s)));
        }
        slot
    }

    pub fn resource_json(&self, slot: u32) -> &str {
        &self.resources[slot as usize].0
    }

    pub fn service(&self, slot: u32) -> &'a str {
        self.resources[slot as usize].1
    }

    pub fn scope_json(&self, slot: u32) -> &str {
        &self.scopes[slot as usize]
    }
}

/// Builders that append a run of nulls at once.
pub(crate) trait NullRuns: ArrayBuilder {
    fn append_null_run(&mut self, n: usize);
}

macro_rules! null_runs {
    ($($builder:ty),*) => {$(
        impl NullRuns for $builder {
            fn append_null_run(&mut self, n: usize) {
                self.append_nulls(n);
            }
        }
    )*};
}

null_runs!(
    StringBuilder,
    Int64Builder,
    arrow_array::builder::Int8Builder,
    arrow_array::builder::Float64Builder,
    arrow_array::builder::BooleanBuilder
);

/// A nullable column filled in one pass over the rows where most rows have
/// no value (events, links, status messages, GenAI fields): the nulls
/// between values are appended as runs, not by a call per row, which was
/// a tenth of a batch conversion.
pub(crate) struct Sparse<B> {
    builder: B,
    /// The first row not yet appended.
    next: usize,
}

impl<B: NullRuns> Sparse<B> {
    pub fn new(builder: B) -> Self {
        Sparse { builder, next: 0 }
    }

    /// The builder, positioned at `row` (rows skipped since the last call
    /// become nulls), to append `row`'s value. Rows must ascend.
    pub fn at(&mut self, row: usize) -> &mut B {
        debug_assert!(row >= self.next, "sparse column rows must ascend");
        self.builder.append_null_run(row.saturating_sub(self.next));
        self.next = row + 1;
        &mut self.builder
    }

    /// The column of `rows` rows, the ones never given a value null.
    pub fn finish(mut self, rows: usize) -> ArrayRef {
        self.builder.append_null_run(rows.saturating_sub(self.next));
        self.builder.finish()
    }
}

/// Resources and scopes parsed from a part's JSON columns, each distinct
/// string once. A part holds one for its point reads: a trace lookup decodes
/// a handful of rows, and parsing their resource JSON again every time took
/// a tenth of the lookup. Records decoded through it share `Arc`s.
///
/// Bounded by the JSON text it keeps (`SHARED_TEXT_BYTES` per kind): past
/// that, new strings are parsed every time instead of kept, so memory stays
/// O(parts) however many distinct resources a part holds.
#[derive(Default)]
pub struct SharedParse {
    resources: Mutex<Interned<Resource>>,
    scopes: Mutex<Interned<Scope>>,
}

const SHARED_TEXT_BYTES: usize = 64 << 10;

struct Interned<T> {
    parsed: HashMap<String, Arc<T>>,
    text_bytes: usize,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned {
            parsed: HashMap::new(),
            text_bytes: 0,
        }
    }
}

impl SharedParse {
    pub fn resource(&self, json: Option<&str>) -> Result<Arc<Resource>> {
        shared(&self.resources, json, resource_from_json, "resource")
    }
    pub fn scope(&self, json: Option<&str>) -> Result<Arc<Scope>> {
        shared(&self.scopes, json, scope_from_json, "scope")
    }
}

fn shared<T>(
    interned: &Mutex<Interned<T>>,
    json: Option<&str>,
    parse: fn(&serde_json::Value) -> std::result::Result<T, skein_model::ModelError>,
    what: &str,
) -> Result<Arc<T>> {
    let json = json.unwrap_or("{}");
    if let Some(r) = interned.lock().parsed.get(json) {
        return Ok(r.clone());
    }
    // Parsed outside the lock; a concurrent reader may parse the same string
    // too, and the first insert wins.
    let parsed = Arc::new(parse(&parse_json(json, what)?)?);
    let mut m = interned.lock();
    if let Some(r) = m.parsed.get(json) {
        return Ok(r.clone());
    }
    if m.text_bytes + json.len() <= SHARED_TEXT_BYTES {
        m.text_bytes += json.len();
        m.parsed.insert(json.to_string(), parsed.clone());
    }
    Ok(parsed)
}

pub(crate) fn parse_json(text: &str, what: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| Error::corrupt(format!("part column {what}"), e.to_string()))
}

pub(crate) fn parse_attrs(text: Option<&str>) -> Result<Vec<KeyValue>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => skein_model::json_attrs::attrs_from_json_str(t)
            .map_err(|e| Error::corrupt("part column attributes", e.to_string())),
    }
}

/// Typed, by-name access to a batch's columns; a missing column reads as
/// NULL everywhere (a part written before the column existed).
pub(crate) struct Cols<'a> {
    batch: &'a RecordBatch,
}

impl<'a> Cols<'a> {
    pub fn new(batch: &'a RecordBatch) -> Self {
        Cols { batch }
    }

    fn col(&self, name: &str) -> Option<&'a ArrayRef> {
        self.batch.column_by_name(name)
    }

    fn check<T>(&self, name: &str, v: Option<T>) -> Result<Option<T>> {
        match (self.col(name), v) {
            (Some(_), None) => Err(Error::corrupt("part", format!("column {name} has an unexpected type"))),
            (_, v) => Ok(v),
        }
    }

    pub fn str(&self, name: &str) -> Result<Option<&'a arrow_array::StringArray>> {
        self.check(name, self.col(name).and_then(|c| c.as_string_opt::<i32>()))
    }
    pub fn fixed(&self, name: &str) -> Result<Option<&'a arrow_array::FixedSizeBinaryArray>> {
        self.check(name, self.col(name).and_then(|c| c.as_fixed_size_binary_opt()))
    }
    pub fn i64(&self, name: &str) -> Result<Option<&'a arrow_array::PrimitiveArray<Int64Type>>> {
        self.check(name, self.col(name).and_then(|c| c.as_primitive_opt::<Int64Type>()))
    }
    pub fn ts(&self, name: &str) -> Result<Option<&'a arrow_array::PrimitiveArray<TimestampNanosecondType>>> {
        self.check(
            name,
            self.col(name)
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>()),
        )
    }
    pub fn u32(&self, name: &str) -> Result<Option<&'a arrow_array::PrimitiveArray<UInt32Type>>> {
        self.check(name, self.col(name).and_then(|c| c.as_primitive_opt::<UInt32Type>()))
    }
    pub fn u64(&self, name: &str) -> Result<Option<&'a arrow_array::PrimitiveArray<UInt64Type>>> {
        self.check(name, self.col(name).and_then(|c| c.as_primitive_opt::<UInt64Type>()))
    }
    pub fn i8(&self, name: &str) -> Result<Option<&'a arrow_array::PrimitiveArray<Int8Type>>> {
        self.check(name, self.col(name).and_then(|c| c.as_primitive_opt::<Int8Type>()))
    }
    pub fn f64(&self, name: &str) -> Result<Option<&'a arrow_array::PrimitiveArray<Float64Type>>> {
        self.check(name, self.col(name).and_then(|c| c.as_primitive_opt::<Float64Type>()))
    }
    pub fn bool(&self, name: &str) -> Result<Option<&'a arrow_array::BooleanArray>> {
        self.check(name, self.col(name).and_then(|c| c.as_boolean_opt()))
    }
}

/// Row accessors that read NULL (or a missing column) as a default.
pub(crate) fn get_str(a: Option<&arrow_array::StringArray>, i: usize) -> Option<&str> {
    a.filter(|a| a.is_valid(i)).map(|a| a.value(i))
}
pub(crate) fn get_string(a: Option<&arrow_array::StringArray>, i: usize) -> String {
    get_str(a, i).unwrap_or_default().to_string()
}
pub(crate) fn get_fixed(a: Option<&arrow_array::FixedSizeBinaryArray>, i: usize) -> Option<&[u8]> {
    a.filter(|a| a.is_valid(i)).map(|a| a.value(i))
}
pub(crate) fn get_prim<T: arrow_array::ArrowPrimitiveType>(
    a: Option<&arrow_array::PrimitiveArray<T>>,
    i: usize,
) -> Option<T::Native> {
    a.filter(|a| a.is_valid(i)).map(|a| a.value(i))
}

/// Converts a validated u64 ns time to the i64 Parquet stores.
pub(crate) fn ts(t: u64) -> i64 {
    // Ingest rejects times beyond i64::MAX (skein_model::otlp::MAX_TIME_NS).
    t.min(i64::MAX as u64) as i64
}
pub(crate) fn from_ts(t: Option<i64>) -> u64 {
    t.unwrap_or(0).max(0) as u64
}

#[cfg(test)]
mod tests {
    use skein_model::{KeyValue, Link};

    use super::*;
    use crate::testdata;

    proptest::proptest! {
        /// A sparse column holds exactly the values given, at their rows,
        /// and NULL everywhere else (before the first, between, after the
        /// last, or throughout).
        #[test]
        fn sparse_columns_hold_values_at_their_rows(
            values in proptest::collection::btree_map(0usize..200, proptest::prelude::any::<i64>(), 0..40),
            extra in 0usize..5,
        ) {
            let rows = values.keys().next_back().map_or(0, |r| r + 1) + extra;
            let mut ints = Sparse::new(Int64Builder::new());
            let mut texts = Sparse::new(StringBuilder::new());
            for (&row, &v) in &values {
                ints.at(row).append_value(v);
                texts.at(row).append_value(v.to_string());
            }
            let (ints, texts) = (ints.finish(rows), texts.finish(rows));
            let (ints, texts) = (ints.as_primitive::<Int64Type>(), texts.as_string::<i32>());
            proptest::prop_assert_eq!(ints.len(), rows);
            proptest::prop_assert_eq!(texts.len(), rows);
            for row in 0..rows {
                let want = values.get(&row);
                proptest::prop_assert_eq!(ints.is_valid(row).then(|| ints.value(row)), want.copied());
                proptest::prop_assert_eq!(texts.is_valid(row).then(|| texts.value(row).to_string()), want.map(|v| v.to_string()));
            }
        }
    }

    /// Records decoded from `record_columns` alone equal the records
    /// themselves: no column `from_batch` needs is left out.
    fn decodes_from_record_columns_alone<R: Columnar + PartialEq>(records: &[R]) {
        let refs: Vec<&R> = records.iter().collect();
        let full = R::to_batch(&refs).unwrap();
        let schema = full.schema();
        let idx: Vec<usize> = R::record_columns()
            .iter()
            .map(|c| schema.index_of(c).unwrap())
            .collect();
        assert!(idx.len() < full.num_columns(), "some columns are derived");
        let projected = full.project(&idx).unwrap();
        assert_eq!(R::from_batch(&projected, &SharedParse::default()).unwrap(), records);
    }

    #[test]
    fn record_columns_hold_everything_records_need() {
        // Every field away from its default somewhere.
        let mut spans = testdata::spans(4, 5);
        for (i, s) in spans.iter_mut().enumerate() {
            s.trace_state = format!("k={i}");
            s.flags = i as u32;
            s.status.message = format!("m{i}");
            s.dropped_attributes_count = 1;
            s.dropped_events_count = 2;
            s.dropped_links_count = 3;
            s.attributes.push(KeyValue::new("gen_ai.request.model", "m"));
            s.events.push(skein_model::Event {
                time_unix_nano: s.start_time_unix_nano,
                name: "e".into(),
                attributes: vec![KeyValue::new("a", 1i64)],
                dropped_attributes_count: 1,
            });
            s.links.push(Link {
                trace_id: s.trace_id,
                span_id: s.span_id,
                trace_state: "t".into(),
                attributes: Vec::new(),
                dropped_attributes_count: 2,
                flags: 1,
            });
        }
        decodes_from_record_columns_alone(&spans);
        let mut logs = testdata::logs(20);
        for (i, l) in logs.iter_mut().enumerate() {
            l.flags = i as u32;
            l.dropped_attributes_count = 4;
            l.event_name = format!("ev{i}");
        }
        decodes_from_record_columns_alone(&logs);
        let mut points = testdata::metric_points(25);
        for (i, p) in points.iter_mut().enumerate() {
            p.flags = i as u32;
            let mut desc = (*p.metric).clone();
            desc.metadata = vec![KeyValue::new("md", i as i64)];
            p.metric = std::sync::Arc::new(desc);
        }
        decodes_from_record_columns_alone(&points);
    }
}
