//! The metric-point part layout.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema, SchemaRef};
use serde_json::{Value, json};
use skein_model::json::{double_json, json_f64, json_i64, json_u64};
use skein_model::metric::*;
use skein_model::{SpanId, TraceId};

use super::*;
use crate::stats::{series_id, series_key};

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        field("time_unix_nano", ts_type(), false),
        field("start_time_unix_nano", ts_type(), true),
        field("service_name", DataType::Utf8, false),
        field("metric_name", DataType::Utf8, false),
        // gauge, sum, histogram, exponential_histogram or summary.
        field("metric_type", DataType::Utf8, false),
        field("temporality", DataType::Int8, false),
        field("is_monotonic", DataType::Boolean, false),
        field("unit", DataType::Utf8, true),
        field("description", DataType::Utf8, true),
        field("metadata", DataType::Utf8, true),
        field("attributes", DataType::Utf8, true),
        // Hash of name, resource and point attributes: one per series.
        field("series_id", DataType::UInt64, false),
        // Hash of the series as a scan reads it: `series_id`, kind, unit
        // and scope (see `stats::series_key`).
        field("series_key", DataType::UInt64, false),
        field("value_double", DataType::Float64, true),
        field("value_int", DataType::Int64, true),
        field("count", DataType::UInt64, true),
        field("sum", DataType::Float64, true),
        field("min", DataType::Float64, true),
        field("max", DataType::Float64, true),
        // Buckets or quantiles of distribution points, in OTLP/JSON.
        field("distribution", DataType::Utf8, true),
        field("flags", DataType::UInt32, false),
        field("exemplars", DataType::Utf8, true),
        field("resource", DataType::Utf8, false),
        field("scope", DataType::Utf8, false),
    ]))
});

fn u64s(v: &[u64]) -> Value {
    Value::Array(v.iter().map(|c| Value::from(c.to_string())).collect())
}
fn f64s(v: &[f64]) -> Value {
    Value::Array(v.iter().map(|d| double_json(*d)).collect())
}

fn buckets_json(b: &ExpBuckets) -> Value {
    json!({"offset": b.offset, "bucketCounts": u64s(&b.bucket_counts)})
}

fn distribution_json(v: &PointValue) -> Option<String> {
    let j = match v {
        PointValue::Number(_) => return None,
        PointValue::Histogram(h) => json!({
            "bucketCounts": u64s(&h.bucket_counts),
            "explicitBounds": f64s(&h.explicit_bounds),
        }),
        PointValue::ExponentialHistogram(h) => {
            let mut m = serde_json::Map::new();
            m.insert("scale".into(), h.scale.into());
            m.insert("zeroCount".into(), h.zero_count.to_string().into());
            m.insert("zeroThreshold".into(), double_json(h.zero_threshold));
            if let Some(p) = &h.positive {
                m.insert("positive".into(), buckets_json(p));
            }
            if let Some(n) = &h.negative {
                m.insert("negative".into(), buckets_json(n));
            }
            Value::Object(m)
        }
        PointValue::Summary(s) => json!({
            "quantileValues": s.quantiles.iter().map(|(q, v)| json!({"quantile": double_json(*q), "value": double_json(*v)})).collect::<Vec<_>>(),
        }),
    };
    Some(j.to_string())
}

fn number_json(n: &Option<Number>) -> Value {
    match n {
        Some(Number::Int(i)) => json!({"asInt": i.to_string()}),
        Some(Number::Double(d)) => json!({"asDouble": double_json(*d)}),
        None => json!({}),
    }
}

fn exemplars_json(ex: &[Exemplar]) -> Option<String> {
    if ex.is_empty() {
        return None;
    }
    let v: Vec<Value> = ex
        .iter()
        .map(|e| {
            let mut o = number_json(&e.value);
            let m = o.as_object_mut().expect("object");
            m.insert("timeUnixNano".into(), e.time_unix_nano.to_string().into());
            if let Some(s) = e.span_id {
                m.insert("spanId".into(), s.to_hex().into());
            }
            if let Some(t) = e.trace_id {
                m.insert("traceId".into(), t.to_hex().into());
            }
            if !e.filtered_attributes.is_empty() {
                m.insert(
                    "filteredAttributes".into(),
                    serde_json::to_value(skein_model::json::OtlpAttrs(&e.filtered_attributes)).unwrap_or_default(),
                );
            }
            o
        })
        .collect();
    Some(Value::Array(v).to_string())
}

fn exemplars_from_json(text: &str) -> Result<Vec<Exemplar>> {
    let v = parse_json(text, "exemplars")?;
    let Value::Array(arr) = v else {
        return Err(Error::corrupt("metric part", "exemplars is not an array"));
    };
    arr.iter()
        .map(|e| {
            Ok(Exemplar {
                filtered_attributes: match e.get("filteredAttributes") {
                    Some(a) => skein_model::json::attrs_from_json(a)?,
                    None => Vec::new(),
                },
                time_unix_nano: e.get("timeUnixNano").and_then(json_u64).unwrap_or(0),
                value: number_from_json(e),
                span_id: e
                    .get("spanId")
                    .and_then(Value::as_str)
                    .map(SpanId::from_hex)
                    .transpose()?,
                trace_id: e
                    .get("traceId")
                    .and_then(Value::as_str)
                    .map(TraceId::from_hex)
                    .transpose()?,
            })
        })
        .collect()
}

fn number_from_json(v: &Value) -> Option<Number> {
    if let Some(i) = v.get("asInt").and_then(json_i64) {
        return Some(Number::Int(i));
    }
    v.get("asDouble").and_then(json_f64).map(Number::Double)
}

fn u64_list(v: Option<&Value>) -> Vec<u64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(json_u64).collect())
        .unwrap_or_default()
}
fn f64_list(v: Option<&Value>) -> Vec<f64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(json_f64).collect())
        .unwrap_or_default()
}
fn buckets_from(v: Option<&Value>) -> Option<ExpBuckets> {
    v.map(|b| ExpBuckets {
        offset: b.get("offset").and_then(json_i64).unwrap_or(0) as i32,
        bucket_counts: u64_list(b.get("bucketCounts")),
    })
}

fn kind_of(metric_type: &str, temporality: i8, monotonic: bool) -> MetricKind {
    let temporality = Temporality::from_i32(temporality as i32);
    match metric_type {
        "sum" => MetricKind::Sum { temporality, monotonic },
        "histogram" => MetricKind::Histogram { temporality },
        "exponential_histogram" => MetricKind::ExponentialHistogram { temporality },
        "summary" => MetricKind::Summary,
        _ => MetricKind::Gauge,
    }
}

fn temporality_of(k: &MetricKind) -> (Temporality, bool) {
    match *k {
        MetricKind::Sum { temporality, monotonic } => (temporality, monotonic),
        MetricKind::Histogram { temporality } | MetricKind::ExponentialHistogram { temporality } => {
            (temporality, false)
        }
        MetricKind::Gauge | MetricKind::Summary => (Temporality::Unspecified, false),
    }
}

impl Columnar for MetricPoint {
    fn schema() -> SchemaRef {
        SCHEMA.clone()
    }

    fn record_columns() -> &'static [&'static str] {
        &[
            "time_unix_nano",
            "start_time_unix_nano",
            "metric_name",
            "metric_type",
            "temporality",
            "is_monotonic",
            "unit",
            "description",
            "metadata",
            "attributes",
            "value_double",
            "value_int",
            "count",
            "sum",
            "min",
            "max",
            "distribution",
            "flags",
            "exemplars",
            "resource",
            "scope",
        ]
    }

    fn to_batch(rows: &[&MetricPoint]) -> Result<RecordBatch> {
        let n = rows.len();
        let mut time = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut start = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut service = StringBuilder::new();
        let mut name = StringBuilder::new();
        let mut mtype = StringBuilder::new();
        let mut temporality = Int8Builder::with_capacity(n);
        let mut monotonic = BooleanBuilder::with_capacity(n);
        let mut unit = StringBuilder::new();
        let mut description = StringBuilder::new();
        let mut metadata = StringBuilder::new();
        let mut attributes = StringBuilder::new();
        let mut series = UInt64Builder::with_capacity(n);
        let mut key = UInt64Builder::with_capacity(n);
        let mut vd = Float64Builder::with_capacity(n);
        let mut vi = Int64Builder::with_capacity(n);
        let mut count = UInt64Builder::with_capacity(n);
        let mut sum = Float64Builder::with_capacity(n);
        let mut min = Float64Builder::with_capacity(n);
        let mut max = Float64Builder::with_capacity(n);
        let mut dist = StringBuilder::new();
        let mut flags = UInt32Builder::with_capacity(n);
        let mut exemplars = StringBuilder::new();
        let mut resource = StringBuilder::new();
        let mut scope = StringBuilder::new();
        let mut shared = SharedJson::default();
        let mut json = AttrsJson::default();
        for p in rows {
            let m = &p.metric;
            time.append_value(ts(p.time_unix_nano));
            start.append_option((p.start_time_unix_nano != 0).then(|| ts(p.start_time_unix_nano)));
            let res = shared.resource(&p.resource);
            service.append_value(shared.service(res));
            name.append_value(&m.name);
            mtype.append_value(m.kind.as_str());
            let (t, mono) = temporality_of(&m.kind);
            temporality.append_value(t.as_i32() as i8);
            monotonic.append_value(mono);
            unit.append_option((!m.unit.is_empty()).then_some(&m.unit));
            description.append_option((!m.description.is_empty()).then_some(&m.description));
            json.append(&mut metadata, &m.metadata);
            json.append(&mut attributes, &p.attributes);
            let id = series_id(p);
            series.append_value(id);
            key.append_value(series_key(p, id));
            let (d, i, c, s, lo, hi) = match &p.value {
                PointValue::Number(Some(Number::Double(d))) => (Some(*d), None, None, None, None, None),
                PointValue::Number(Some(Number::Int(i))) => (None, Some(*i), None, None, None, None),
                PointValue::Number(None) => (None, None, None, None, None, None),
                PointValue::Histogram(h) => (None, None, Some(h.count), h.sum, h.min, h.max),
                PointValue::ExponentialHistogram(h) => (None, None, Some(h.count), h.sum, h.min, h.max),
                PointValue::Summary(sm) => (None, None, Some(sm.count), Some(sm.sum), None, None),
            };
            vd.append_option(d);
            vi.append_option(i);
            count.append_option(c);
            sum.append_option(s);
            min.append_option(lo);
            max.append_option(hi);
            dist.append_option(distribution_json(&p.value));
            flags.append_value(p.flags);
            exemplars.append_option(exemplars_json(&p.exemplars));
            resource.append_value(shared.resource_json(res));
            let slot = shared.scope(&p.scope);
            scope.append_value(shared.scope_json(slot));
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(time.finish()),
            Arc::new(start.finish()),
            Arc::new(service.finish()),
            Arc::new(name.finish()),
            Arc::new(mtype.finish()),
            Arc::new(temporality.finish()),
            Arc::new(monotonic.finish()),
            Arc::new(unit.finish()),
            Arc::new(description.finish()),
            Arc::new(metadata.finish()),
            Arc::new(attributes.finish()),
            Arc::new(series.finish()),
            Arc::new(key.finish()),
            Arc::new(vd.finish()),
            Arc::new(vi.finish()),
            Arc::new(count.finish()),
            Arc::new(sum.finish()),
            Arc::new(min.finish()),
            Arc::new(max.finish()),
            Arc::new(dist.finish()),
            Arc::new(flags.finish()),
            Arc::new(exemplars.finish()),
            Arc::new(resource.finish()),
            Arc::new(scope.finish()),
        ];
        Ok(RecordBatch::try_new(SCHEMA.clone(), cols)?)
    }

    fn from_batch(batch: &RecordBatch, shared: &SharedParse) -> Result<Vec<MetricPoint>> {
        let c = Cols::new(batch);
        let time = c.ts("time_unix_nano")?;
        let start = c.ts("start_time_unix_nano")?;
        let name = c.str("metric_name")?;
        let mtype = c.str("metric_type")?;
        let temporality = c.i8("temporality")?;
        let monotonic = c.bool("is_monotonic")?;
        let unit = c.str("unit")?;
        let description = c.str("description")?;
        let metadata = c.str("metadata")?;
        let attributes = c.str("attributes")?;
        let vd = c.f64("value_double")?;
        let vi = c.i64("value_int")?;
        let count = c.u64("count")?;
        let sum = c.f64("sum")?;
        let min = c.f64("min")?;
        let max = c.f64("max")?;
        let dist = c.str("distribution")?;
        let flags = c.u32("flags")?;
        let exemplars = c.str("exemplars")?;
        let resource = c.str("resource")?;
        let scope = c.str("scope")?;
        let mut descs: HashMap<DescKey, Arc<MetricDesc>> = HashMap::new();
        let mut out = Vec::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            let monotonic_v = monotonic
                .filter(|a| arrow_array::Array::is_valid(*a, i))
                .is_some_and(|a| a.value(i));
            let kind = kind_of(
                get_str(mtype, i).unwrap_or("gauge"),
                get_prim(temporality, i).unwrap_or(0),
                monotonic_v,
            );
            let key = (
                get_string(name, i),
                get_string(description, i),
                get_string(unit, i),
                get_str(metadata, i).map(str::to_string),
                MetricKindKey(kind),
            );
            let desc = match descs.get(&key) {
                Some(d) => d.clone(),
                None => {
                    let d = Arc::new(MetricDesc {
                        name: key.0.clone(),
                        description: key.1.clone(),
                        unit: key.2.clone(),
                        metadata: parse_attrs(key.3.as_deref())?,
                        kind,
                    });
                    descs.insert(key, d.clone());
                    d
                }
            };
            let dist_v = get_str(dist, i).map(|t| parse_json(t, "distribution")).transpose()?;
            let dist_v = dist_v.unwrap_or(Value::Null);
            let value = match kind {
                MetricKind::Gauge | MetricKind::Sum { .. } => PointValue::Number(
                    get_prim(vi, i)
                        .map(Number::Int)
                        .or_else(|| get_prim(vd, i).map(Number::Double)),
                ),
                MetricKind::Histogram { .. } => PointValue::Histogram(HistogramValue {
                    count: get_prim(count, i).unwrap_or(0),
                    sum: get_prim(sum, i),
                    bucket_counts: u64_list(dist_v.get("bucketCounts")),
                    explicit_bounds: f64_list(dist_v.get("explicitBounds")),
                    min: get_prim(min, i),
                    max: get_prim(max, i),
                }),
                MetricKind::ExponentialHistogram { .. } => PointValue::ExponentialHistogram(ExpHistogramValue {
                    count: get_prim(count, i).unwrap_or(0),
                    sum: get_prim(sum, i),
                    scale: dist_v.get("scale").and_then(json_i64).unwrap_or(0) as i32,
                    zero_count: dist_v.get("zeroCount").and_then(json_u64).unwrap_or(0),
                    positive: buckets_from(dist_v.get("positive")),
                    negative: buckets_from(dist_v.get("negative")),
                    min: get_prim(min, i),
                    max: get_prim(max, i),
                    zero_threshold: dist_v.get("zeroThreshold").and_then(json_f64).unwrap_or(0.0),
                }),
                MetricKind::Summary => PointValue::Summary(SummaryValue {
                    count: get_prim(count, i).unwrap_or(0),
                    sum: get_prim(sum, i).unwrap_or(0.0),
                    quantiles: dist_v
                        .get("quantileValues")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .map(|q| {
                                    (
                                        q.get("quantile").and_then(json_f64).unwrap_or(0.0),
                                        q.get("value").and_then(json_f64).unwrap_or(0.0),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                }),
            };
            out.push(MetricPoint {
                metric: desc,
                attributes: parse_attrs(get_str(attributes, i))?,
                start_time_unix_nano: from_ts(get_prim(start, i)),
                time_unix_nano: from_ts(get_prim(time, i)),
                flags: get_prim(flags, i).unwrap_or(0),
                exemplars: get_str(exemplars, i)
                    .map(exemplars_from_json)
                    .transpose()?
                    .unwrap_or_default(),
                value,
                resource: shared.resource(get_str(resource, i))?,
                scope: shared.scope(get_str(scope, i))?,
            });
        }
        Ok(out)
    }
}

/// The columns [`sample_rows`] reads: a point's series key and sample,
/// none of its strings.
pub(crate) const SAMPLE_COLUMNS: &[&str] = &["time_unix_nano", "series_key", "value_double", "value_int", "flags"];

/// A row as a series scan first reads it (see [`sample_rows`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SampleRow {
    pub time: u64,
    /// `stats::series_key`; `None` in a part written before the column.
    pub key: Option<u64>,
    /// The number, if the point is a number point with one.
    pub value: Option<Number>,
    pub flags: u32,
}

/// The [`SampleRow`]s of a batch of [`SAMPLE_COLUMNS`]: what a series scan
/// needs of every row, with no string read.
pub(crate) fn sample_rows(batch: &RecordBatch) -> Result<Vec<SampleRow>> {
    let c = Cols::new(batch);
    let time = c.ts("time_unix_nano")?;
    let key = c.u64("series_key")?;
    let vd = c.f64("value_double")?;
    let vi = c.i64("value_int")?;
    let flags = c.u32("flags")?;
    Ok((0..batch.num_rows())
        .map(|i| SampleRow {
            time: from_ts(get_prim(time, i)),
            key: get_prim(key, i),
            value: get_prim(vi, i)
                .map(Number::Int)
                .or_else(|| get_prim(vd, i).map(Number::Double)),
            flags: get_prim(flags, i).unwrap_or(0),
        })
        .collect())
}

/// Whether each row of a batch (of the part's columns) is a number point:
/// a gauge's or a sum's, as [`Columnar::from_batch`] reads it.
pub(crate) fn number_samples(batch: &RecordBatch) -> Result<Vec<bool>> {
    let mtype = Cols::new(batch).str("metric_type")?;
    Ok((0..batch.num_rows())
        .map(|i| {
            matches!(
                kind_of(get_str(mtype, i).unwrap_or("gauge"), 0, false),
                MetricKind::Gauge | MetricKind::Sum { .. }
            )
        })
        .collect())
}

/// Name, description, unit, metadata JSON and kind: one metric description.
type DescKey = (String, String, String, Option<String>, MetricKindKey);

/// `MetricKind` as a hash-map key component.
#[derive(PartialEq, Eq, Hash)]
struct MetricKindKey(MetricKind);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn sample_rows_carry_the_series_key_and_number_of_each_row() {
        let points = testdata::metric_points(10);
        let refs: Vec<&MetricPoint> = points.iter().collect();
        let batch = MetricPoint::to_batch(&refs).unwrap();
        let wanted: Vec<usize> = SAMPLE_COLUMNS
            .iter()
            .map(|c| batch.schema().index_of(c).unwrap())
            .collect();
        let rows = sample_rows(&batch.project(&wanted).unwrap()).unwrap();
        for (p, r) in points.iter().zip(&rows) {
            assert_eq!(r.time, p.time_unix_nano);
            assert_eq!(r.key, Some(series_key(p, series_id(p))));
            let number = match p.value {
                PointValue::Number(n) => n,
                _ => None,
            };
            assert_eq!(r.value, number);
        }
        // Equal keys exactly for equal series: a point differing only in
        // time and value shares its key; one in another scope does not.
        let mut later = points[0].clone();
        later.time_unix_nano += 1;
        later.value = PointValue::Number(Some(Number::Int(7)));
        assert_eq!(series_key(&later, series_id(&later)), rows[0].key.unwrap());
        let mut scoped = points[0].clone();
        scoped.scope = Arc::new(skein_model::Scope {
            name: "other".into(),
            ..Default::default()
        });
        assert_ne!(series_key(&scoped, series_id(&scoped)), rows[0].key.unwrap());
        // A part written before the column: no keys, so rows are read whole.
        let old: Vec<usize> = ["time_unix_nano", "value_double", "value_int", "flags"]
            .iter()
            .map(|c| batch.schema().index_of(c).unwrap())
            .collect();
        let rows = sample_rows(&batch.project(&old).unwrap()).unwrap();
        assert!(rows.iter().all(|r| r.key.is_none()));
    }
}
