//! Metric points ⇄ `ExportMetricsServiceRequest`.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1 as pm;

use super::common::*;
use super::{Decoded, check_time};
use crate::error::ModelError;
use crate::ids::{SpanId, TraceId};
use crate::metric::*;
use crate::resource::{Resource, Scope};

pub fn metrics_from_otlp(req: ExportMetricsServiceRequest) -> Decoded<MetricPoint> {
    let mut out = Decoded::default();
    let mut index = 0usize;
    for rm in req.resource_metrics {
        let resource = resource_from_otlp(rm.resource, rm.schema_url);
        for sm in rm.scope_metrics {
            let scope = scope_from_otlp(sm.scope, sm.schema_url);
            for m in sm.metrics {
                let ctx = Ctx {
                    resource: &resource,
                    scope: &scope,
                };
                if let Err(e) = metric_from_otlp(m, ctx, &mut out, &mut index) {
                    out.reject(e);
                }
            }
        }
    }
    out
}

#[derive(Clone, Copy)]
struct Ctx<'a> {
    resource: &'a Arc<Resource>,
    scope: &'a Arc<Scope>,
}

/// Decodes one metric's points into `out`; an error rejects the whole metric
/// (it has no data at all), while a bad point rejects only that point.
fn metric_from_otlp(
    m: pm::Metric,
    ctx: Ctx<'_>,
    out: &mut Decoded<MetricPoint>,
    index: &mut usize,
) -> Result<(), ModelError> {
    use pm::metric::Data;
    let data = m
        .data
        .ok_or_else(|| ModelError::new(format!("metric {:?} has no data", m.name)))?;
    let kind = match &data {
        Data::Gauge(_) => MetricKind::Gauge,
        Data::Sum(s) => MetricKind::Sum {
            temporality: Temporality::from_i32(s.aggregation_temporality),
            monotonic: s.is_monotonic,
        },
        Data::Histogram(h) => MetricKind::Histogram {
            temporality: Temporality::from_i32(h.aggregation_temporality),
        },
        Data::ExponentialHistogram(h) => MetricKind::ExponentialHistogram {
            temporality: Temporality::from_i32(h.aggregation_temporality),
        },
        Data::Summary(_) => MetricKind::Summary,
    };
    let desc = Arc::new(MetricDesc {
        name: m.name,
        description: m.description,
        unit: m.unit,
        metadata: attrs_from_otlp(m.metadata),
        kind,
    });
    let mut push = |r: Result<MetricPoint, ModelError>| {
        match r {
            Ok(p) => out.records.push(p),
            Err(e) => out.reject(e.at(format_args!("metric {:?} point {}", desc.name, *index))),
        }
        *index += 1;
    };
    let base = |attributes, start, time, flags, exemplars: Vec<pm::Exemplar>| -> Result<MetricPoint, ModelError> {
        check_time("start_time_unix_nano", start)?;
        check_time("time_unix_nano", time)?;
        Ok(MetricPoint {
            metric: desc.clone(),
            attributes: attrs_from_otlp(attributes),
            start_time_unix_nano: start,
            time_unix_nano: time,
            flags,
            exemplars: exemplars
                .into_iter()
                .map(exemplar_from_otlp)
                .collect::<Result<_, _>>()?,
            value: PointValue::default(),
            resource: ctx.resource.clone(),
            scope: ctx.scope.clone(),
        })
    };
    match data {
        Data::Gauge(pm::Gauge { data_points }) | Data::Sum(pm::Sum { data_points, .. }) => {
            for p in data_points {
                let value = p.value.map(number_from_otlp);
                push(
                    base(
                        p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        p.exemplars,
                    )
                    .map(|mut mp| {
                        mp.value = PointValue::Number(value);
                        mp
                    }),
                );
            }
        }
        Data::Histogram(h) => {
            for p in h.data_points {
                let value = HistogramValue {
                    count: p.count,
                    sum: p.sum,
                    bucket_counts: p.bucket_counts,
                    explicit_bounds: p.explicit_bounds,
                    min: p.min,
                    max: p.max,
                };
                let r = if !value.bucket_counts.is_empty()
                    && value.bucket_counts.len() != value.explicit_bounds.len() + 1
                {
                    Err(ModelError::new(format!(
                        "histogram has {} bucket counts for {} explicit bounds (want bounds + 1)",
                        value.bucket_counts.len(),
                        value.explicit_bounds.len()
                    )))
                } else {
                    base(
                        p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        p.exemplars,
                    )
                    .map(|mut mp| {
                        mp.value = PointValue::Histogram(value);
                        mp
                    })
                };
                push(r);
            }
        }
        Data::ExponentialHistogram(h) => {
            for p in h.data_points {
                let value = ExpHistogramValue {
                    count: p.count,
                    sum: p.sum,
                    scale: p.scale,
                    zero_count: p.zero_count,
                    positive: p.positive.map(|b| ExpBuckets {
                        offset: b.offset,
                        bucket_counts: b.bucket_counts,
                    }),
                    negative: p.negative.map(|b| ExpBuckets {
                        offset: b.offset,
                        bucket_counts: b.bucket_counts,
                    }),
                    min: p.min,
                    max: p.max,
                    zero_threshold: p.zero_threshold,
                };
                push(
                    base(
                        p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        p.exemplars,
                    )
                    .map(|mut mp| {
                        mp.value = PointValue::ExponentialHistogram(value);
                        mp
                    }),
                );
            }
        }
        Data::Summary(s) => {
            for p in s.data_points {
                let value = SummaryValue {
                    count: p.count,
                    sum: p.sum,
                    quantiles: p.quantile_values.into_iter().map(|q| (q.quantile, q.value)).collect(),
                };
                push(
                    base(
                        p.attributes,
                        p.start_time_unix_nano,
                        p.time_unix_nano,
                        p.flags,
                        Vec::new(),
                    )
                    .map(|mut mp| {
                        mp.value = PointValue::Summary(value);
                        mp
                    }),
                );
            }
        }
    }
    Ok(())
}

fn number_from_otlp(v: pm::number_data_point::Value) -> Number {
    match v {
        pm::number_data_point::Value::AsInt(i) => Number::Int(i),
        pm::number_data_point::Value::AsDouble(d) => Number::Double(d),
    }
}

fn exemplar_from_otlp(e: pm::Exemplar) -> Result<Exemplar, ModelError> {
    check_time("exemplar time_unix_nano", e.time_unix_nano)?;
    // Exemplar ids are kept as sent (only empty means "none"): the all-zero
    // canonical form applies to parent and log ids, not here.
    let trace_id = if e.trace_id.is_empty() {
        None
    } else {
        Some(TraceId::from_bytes(&e.trace_id).map_err(|err| err.at("exemplar"))?)
    };
    let span_id = if e.span_id.is_empty() {
        None
    } else {
        Some(SpanId::from_bytes(&e.span_id).map_err(|err| err.at("exemplar"))?)
    };
    Ok(Exemplar {
        filtered_attributes: attrs_from_otlp(e.filtered_attributes),
        time_unix_nano: e.time_unix_nano,
        value: e.value.map(|v| match v {
            pm::exemplar::Value::AsInt(i) => Number::Int(i),
            pm::exemplar::Value::AsDouble(d) => Number::Double(d),
        }),
        span_id,
        trace_id,
    })
}

fn exemplar_to_otlp(e: &Exemplar) -> pm::Exemplar {
    pm::Exemplar {
        filtered_attributes: attrs_to_otlp(&e.filtered_attributes),
        time_unix_nano: e.time_unix_nano,
        span_id: e.span_id.map(|s| s.0.to_vec()).unwrap_or_default(),
        trace_id: e.trace_id.map(|t| t.0.to_vec()).unwrap_or_default(),
        value: e.value.map(|v| match v {
            Number::Int(i) => pm::exemplar::Value::AsInt(i),
            Number::Double(d) => pm::exemplar::Value::AsDouble(d),
        }),
    }
}

/// Encodes points, one `Metric` per run of points sharing a description.
pub fn metrics_to_otlp(points: &[MetricPoint]) -> ExportMetricsServiceRequest {
    let mut req = ExportMetricsServiceRequest::default();
    for by_resource in runs(points, |a, b| Arc::ptr_eq(&a.resource, &b.resource)) {
        let (resource, schema_url) = resource_to_otlp(&by_resource[0].resource);
        let mut rm = pm::ResourceMetrics {
            resource,
            scope_metrics: Vec::new(),
            schema_url,
        };
        for by_scope in runs(by_resource, |a, b| Arc::ptr_eq(&a.scope, &b.scope)) {
            let (scope, schema_url) = scope_to_otlp(&by_scope[0].scope);
            let metrics = runs(by_scope, |a, b| Arc::ptr_eq(&a.metric, &b.metric))
                .into_iter()
                .map(metric_to_otlp)
                .collect();
            rm.scope_metrics.push(pm::ScopeMetrics {
                scope,
                metrics,
                schema_url,
            });
        }
        req.resource_metrics.push(rm);
    }
    req
}

fn metric_to_otlp(points: &[MetricPoint]) -> pm::Metric {
    use pm::metric::Data;
    let desc = &points[0].metric;
    let number_points = || {
        points
            .iter()
            .map(|p| pm::NumberDataPoint {
                attributes: attrs_to_otlp(&p.attributes),
                start_time_unix_nano: p.start_time_unix_nano,
                time_unix_nano: p.time_unix_nano,
                exemplars: p.exemplars.iter().map(exemplar_to_otlp).collect(),
                flags: p.flags,
                value: match p.value {
                    PointValue::Number(Some(Number::Int(i))) => Some(pm::number_data_point::Value::AsInt(i)),
                    PointValue::Number(Some(Number::Double(d))) => Some(pm::number_data_point::Value::AsDouble(d)),
                    _ => None,
                },
            })
            .collect()
    };
    let data = match desc.kind {
        MetricKind::Gauge => Data::Gauge(pm::Gauge {
            data_points: number_points(),
        }),
        MetricKind::Sum { temporality, monotonic } => Data::Sum(pm::Sum {
            data_points: number_points(),
            aggregation_temporality: temporality.as_i32(),
            is_monotonic: monotonic,
        }),
        MetricKind::Histogram { temporality } => Data::Histogram(pm::Histogram {
            aggregation_temporality: temporality.as_i32(),
            data_points: points
                .iter()
                .map(|p| {
                    let h = match &p.value {
                        PointValue::Histogram(h) => h.clone(),
                        _ => HistogramValue::default(),
                    };
                    pm::HistogramDataPoint {
                        attributes: attrs_to_otlp(&p.attributes),
                        start_time_unix_nano: p.start_time_unix_nano,
                        time_unix_nano: p.time_unix_nano,
                        count: h.count,
                        sum: h.sum,
                        bucket_counts: h.bucket_counts,
                        explicit_bounds: h.explicit_bounds,
                        exemplars: p.exemplars.iter().map(exemplar_to_otlp).collect(),
                        flags: p.flags,
                        min: h.min,
                        max: h.max,
                    }
                })
                .collect(),
        }),
        MetricKind::ExponentialHistogram { temporality } => Data::ExponentialHistogram(pm::ExponentialHistogram {
            aggregation_temporality: temporality.as_i32(),
            data_points: points
                .iter()
                .map(|p| {
                    let h = match &p.value {
                        PointValue::ExponentialHistogram(h) => h.clone(),
                        _ => ExpHistogramValue::default(),
                    };
                    let buckets = |b: Option<ExpBuckets>| {
                        b.map(|b| pm::exponential_histogram_data_point::Buckets {
                            offset: b.offset,
                            bucket_counts: b.bucket_counts,
                        })
                    };
                    pm::ExponentialHistogramDataPoint {
                        attributes: attrs_to_otlp(&p.attributes),
                        start_time_unix_nano: p.start_time_unix_nano,
                        time_unix_nano: p.time_unix_nano,
                        count: h.count,
                        sum: h.sum,
                        scale: h.scale,
                        zero_count: h.zero_count,
                        positive: buckets(h.positive),
                        negative: buckets(h.negative),
                        flags: p.flags,
                        exemplars: p.exemplars.iter().map(exemplar_to_otlp).collect(),
                        min: h.min,
                        max: h.max,
                        zero_threshold: h.zero_threshold,
                    }
                })
                .collect(),
        }),
        MetricKind::Summary => Data::Summary(pm::Summary {
            data_points: points
                .iter()
                .map(|p| {
                    let s = match &p.value {
                        PointValue::Summary(s) => s.clone(),
                        _ => SummaryValue::default(),
                    };
                    pm::SummaryDataPoint {
                        attributes: attrs_to_otlp(&p.attributes),
                        start_time_unix_nano: p.start_time_unix_nano,
                        time_unix_nano: p.time_unix_nano,
                        count: s.count,
                        sum: s.sum,
                        quantile_values: s
                            .quantiles
                            .iter()
                            .map(|(q, v)| pm::summary_data_point::ValueAtQuantile {
                                quantile: *q,
                                value: *v,
                            })
                            .collect(),
                        flags: p.flags,
                    }
                })
                .collect(),
        }),
    };
    pm::Metric {
        name: desc.name.clone(),
        description: desc.description.clone(),
        unit: desc.unit.clone(),
        metadata: attrs_to_otlp(&desc.metadata),
        data: Some(data),
    }
}
