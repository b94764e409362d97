//! Metric points: one data point of a gauge, sum, histogram, exponential
//! histogram or summary, carrying its metric's description.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{SpanId, TraceId};
use crate::resource::{Resource, Scope};
use crate::value::{KeyValue, attributes_size};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Temporality {
    #[default]
    Unspecified,
    Delta,
    Cumulative,
}

impl Temporality {
    pub fn from_i32(v: i32) -> Temporality {
        match v {
            1 => Temporality::Delta,
            2 => Temporality::Cumulative,
            _ => Temporality::Unspecified,
        }
    }
    pub fn as_i32(self) -> i32 {
        match self {
            Temporality::Unspecified => 0,
            Temporality::Delta => 1,
            Temporality::Cumulative => 2,
        }
    }
}

/// The type of a metric and its type-specific properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum MetricKind {
    #[default]
    Gauge,
    Sum {
        temporality: Temporality,
        monotonic: bool,
    },
    Histogram {
        temporality: Temporality,
    },
    ExponentialHistogram {
        temporality: Temporality,
    },
    Summary,
}

impl MetricKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            MetricKind::Gauge => "gauge",
            MetricKind::Sum { .. } => "sum",
            MetricKind::Histogram { .. } => "histogram",
            MetricKind::ExponentialHistogram { .. } => "exponential_histogram",
            MetricKind::Summary => "summary",
        }
    }
}

/// What a metric is; shared by all points of one OTLP `Metric`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MetricDesc {
    pub name: String,
    pub description: String,
    pub unit: String,
    pub metadata: Vec<KeyValue>,
    pub kind: MetricKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Number {
    Int(i64),
    Double(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Double(d) => d,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistogramValue {
    pub count: u64,
    pub sum: Option<f64>,
    pub bucket_counts: Vec<u64>,
    pub explicit_bounds: Vec<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// No finite non-zero f64 falls in an exponential bucket whose index is
/// beyond this, at any scale up to 8 (the finest Prometheus has): bucket
/// `i` of scale `s` starts at `2^(i / 2^s)`, and f64s lie within
/// `2^-1075 .. 2^1024`. A bucket out there counts nothing real.
pub const MAX_EXP_BUCKET_INDEX: i64 = 1100 << 8;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExpBuckets {
    pub offset: i32,
    pub bucket_counts: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExpHistogramValue {
    pub count: u64,
    pub sum: Option<f64>,
    pub scale: i32,
    pub zero_count: u64,
    pub positive: Option<ExpBuckets>,
    pub negative: Option<ExpBuckets>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub zero_threshold: f64,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SummaryValue {
    pub count: u64,
    pub sum: f64,
    /// (quantile, value) pairs.
    pub quantiles: Vec<(f64, f64)>,
}

/// The value of a point. Its variant always agrees with the metric's kind:
/// gauges and sums hold `Number`, the others their own shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PointValue {
    /// A gauge or sum point; `None` when the sender set no value.
    Number(Option<Number>),
    Histogram(HistogramValue),
    ExponentialHistogram(ExpHistogramValue),
    Summary(SummaryValue),
}

impl Default for PointValue {
    fn default() -> Self {
        PointValue::Number(None)
    }
}

impl PointValue {
    /// One number standing for the point: the value of a gauge or sum, the
    /// sum of a distribution (or its count when no sum was reported).
    pub fn scalar(&self) -> Option<f64> {
        match self {
            PointValue::Number(n) => n.map(Number::as_f64),
            PointValue::Histogram(h) => h.sum.or(Some(h.count as f64)),
            PointValue::ExponentialHistogram(h) => h.sum.or(Some(h.count as f64)),
            PointValue::Summary(s) => Some(s.sum),
        }
    }

    pub fn count(&self) -> Option<u64> {
        match self {
            PointValue::Number(_) => None,
            PointValue::Histogram(h) => Some(h.count),
            PointValue::ExponentialHistogram(h) => Some(h.count),
            PointValue::Summary(s) => Some(s.count),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Exemplar {
    pub filtered_attributes: Vec<KeyValue>,
    pub time_unix_nano: u64,
    pub value: Option<Number>,
    pub span_id: Option<SpanId>,
    pub trace_id: Option<TraceId>,
}

/// One metric data point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MetricPoint {
    #[serde(skip)]
    pub metric: Arc<MetricDesc>,
    pub attributes: Vec<KeyValue>,
    pub start_time_unix_nano: u64,
    pub time_unix_nano: u64,
    pub flags: u32,
    pub exemplars: Vec<Exemplar>,
    pub value: PointValue,
    #[serde(skip)]
    pub resource: Arc<Resource>,
    #[serde(skip)]
    pub scope: Arc<Scope>,
}

impl MetricPoint {
    pub fn service_name(&self) -> &str {
        self.resource.service_name()
    }

    pub fn approx_size(&self) -> usize {
        let value = match &self.value {
            PointValue::Number(_) => 0,
            PointValue::Histogram(h) => (h.bucket_counts.len() + h.explicit_bounds.len()) * 8,
            PointValue::ExponentialHistogram(h) => {
                (h.positive.as_ref().map_or(0, |b| b.bucket_counts.len())
                    + h.negative.as_ref().map_or(0, |b| b.bucket_counts.len()))
                    * 8
            }
            PointValue::Summary(s) => s.quantiles.len() * 16,
        };
        std::mem::size_of::<MetricPoint>() + attributes_size(&self.attributes) + value + self.exemplars.len() * 64
    }
}
