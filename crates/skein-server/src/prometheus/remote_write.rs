//! Prometheus remote write 1.0 intake: a snappy-compressed (block format)
//! protobuf `WriteRequest`, stored as gauge points named by `__name__`,
//! and native histograms as cumulative exponential histogram points.
//!
//! A series is stored so that PromQL reads it back under its own labels
//! (see `skein_promql::naming`): the metric is a gauge named `__name__`
//! without a unit, `job` and `instance` become the resource's
//! `service.name` and `service.instance.id` (so Skein's service views see
//! the job), every other label a string attribute. A staleness marker is
//! stored as a point flagged "no recorded value" (a NaN's payload does not
//! survive storage). A native histogram keeps its schema as the scale
//! and its buckets (index `i` stored as OTLP's `i - 1`), so PromQL reads
//! the same histogram back; a gauge histogram is stored as a counter one.
//! Metadata and exemplars are not read.
//!
//! A request is all or nothing: a series without `__name__`, a label
//! without a name, a negative timestamp or a histogram that cannot be
//! stored exactly (a custom-bucket schema, fractional counts) refuses the
//! whole request (400, naming the series) before anything is stored.

use std::sync::Arc;

use prost::Message;
use skein_model::metric::Temporality;
use skein_model::otlp::Decoded;
use skein_model::{KeyValue, MetricDesc, MetricKind, MetricPoint, Number, PointValue, Resource, Scope};

pub use skein_model::remote_write::{Histogram, Label, Sample, TimeSeries, WriteRequest, encode};

/// Point flag: no recorded value (OTLP's `FLAG_NO_RECORDED_VALUE`).
const NO_RECORDED_VALUE: u32 = 1;

fn describe(labels: &[Label]) -> String {
    let inner: Vec<String> = labels.iter().map(|l| format!("{}={:?}", l.name, l.value)).collect();
    format!("{{{}}}", inner.join(", "))
}

/// A sample's time in Unix nanoseconds; a negative one refuses the
/// request.
fn stored_time(labels: &[Label], ms: i64) -> Result<u64, String> {
    u64::try_from(ms).map(|ms| ms.saturating_mul(1_000_000)).map_err(|_| {
        format!(
            "series {} has a sample at a negative timestamp ({ms} ms)",
            describe(labels)
        )
    })
}

/// Decodes a remote-write body (snappy block format, then protobuf) into
/// metric points; `limit` bounds the decompressed size.
pub fn decode(body: &[u8], limit: usize) -> Result<Decoded<MetricPoint>, String> {
    let len = snap::raw::decompress_len(body)
        .map_err(|e| format!("remote write body is not snappy-compressed (block format): {e}"))?;
    if len > limit {
        return Err(format!(
            "remote write body decompresses to {len} bytes, over the {limit} byte limit (--max-body-bytes)"
        ));
    }
    let raw = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| format!("remote write body is not snappy-compressed (block format): {e}"))?;
    let req = WriteRequest::decode(raw.as_slice())
        .map_err(|e| format!("remote write body is not a protobuf WriteRequest: {e}"))?;
    let scope = Arc::new(Scope::default());
    let mut records = Vec::new();
    for ts in req.timeseries {
        let mut name = None;
        let mut attributes = Vec::with_capacity(ts.labels.len());
        let mut resource = Vec::new();
        for l in &ts.labels {
            match l.name.as_str() {
                "" => return Err(format!("series {} has a label without a name", describe(&ts.labels))),
                "__name__" => name = Some(l.value.clone()),
                "job" => resource.push(KeyValue::new("service.name", l.value.clone())),
                "instance" => resource.push(KeyValue::new("service.instance.id", l.value.clone())),
                _ if l.value.is_empty() => {}
                _ => attributes.push(KeyValue::new(l.name.clone(), l.value.clone())),
            }
        }
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            return Err(format!("series {} has no __name__ label", describe(&ts.labels)));
        };
        let resource = Arc::new(Resource {
            attributes: resource,
            ..Default::default()
        });
        let histogram_metric = Arc::new(MetricDesc {
            name: name.clone(),
            kind: MetricKind::ExponentialHistogram {
                temporality: Temporality::Cumulative,
            },
            ..Default::default()
        });
        for h in &ts.histograms {
            let time = stored_time(&ts.labels, h.timestamp)?;
            let value = h.to_exponential().map_err(|e| {
                format!(
                    "series {} has a native histogram Skein cannot store: {e}",
                    describe(&ts.labels)
                )
            })?;
            records.push(MetricPoint {
                metric: histogram_metric.clone(),
                attributes: attributes.clone(),
                time_unix_nano: time,
                flags: if h.is_stale() { NO_RECORDED_VALUE } else { 0 },
                value: PointValue::ExponentialHistogram(value),
                resource: resource.clone(),
                scope: scope.clone(),
                ..Default::default()
            });
        }
        let metric = Arc::new(MetricDesc {
            name,
            kind: MetricKind::Gauge,
            ..Default::default()
        });
        for s in &ts.samples {
            let time = stored_time(&ts.labels, s.timestamp)?;
            let stale = skein_promql::is_stale_nan(s.value);
            records.push(MetricPoint {
                metric: metric.clone(),
                attributes: attributes.clone(),
                time_unix_nano: time,
                flags: if stale { NO_RECORDED_VALUE } else { 0 },
                value: PointValue::Number(if stale { None } else { Some(Number::Double(s.value)) }),
                resource: resource.clone(),
                scope: scope.clone(),
                ..Default::default()
            });
        }
    }
    Ok(Decoded {
        records,
        rejected: 0,
        errors: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> TimeSeries {
        TimeSeries {
            labels: labels
                .iter()
                .map(|(n, v)| Label {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            samples: samples
                .iter()
                .map(|&(timestamp, value)| Sample { value, timestamp })
                .collect(),
            histograms: Vec::new(),
        }
    }

    #[test]
    fn native_histograms_are_read_back_as_the_same_histograms() {
        let stale = f64::from_bits(skein_promql::STALE_NAN_BITS);
        let mut ts = series(&[("__name__", "latency_seconds"), ("job", "api")], &[]);
        ts.histograms = vec![
            Histogram::from_buckets(1000, 2, (0.001, 1), &[(-3, 2), (0, 5), (1, 1)], &[(4, 1)], 3.25),
            Histogram {
                sum: stale,
                timestamp: 2000,
                ..Default::default()
            },
        ];
        let d = decode(&encode(&WriteRequest { timeseries: vec![ts] }), 1 << 20).unwrap();
        assert_eq!(d.records.len(), 2);
        let (labels, h) = skein_promql::naming::native_histogram(&d.records[0]).unwrap();
        assert_eq!(
            labels.pairs()[0],
            ("__name__".to_string(), "latency_seconds".to_string())
        );
        assert_eq!(labels.get("job"), Some("api"));
        let h = h.unwrap();
        assert_eq!(
            (h.schema, h.count, h.sum, h.zero_count, h.zero_threshold),
            (2, 10.0, 3.25, 1.0, 0.001)
        );
        assert_eq!(
            (h.positive.offset, h.positive.counts.as_slice()),
            (-3, &[2.0, 0.0, 0.0, 5.0, 1.0][..])
        );
        assert_eq!((h.negative.offset, h.negative.counts.as_slice()), (4, &[1.0][..]));
        let (_, marker) = skein_promql::naming::native_histogram(&d.records[1]).unwrap();
        assert!(marker.is_none(), "a stale NaN sum marks the series stale");

        let mut ts = series(&[("__name__", "custom")], &[]);
        ts.histograms = vec![Histogram::from_buckets(1000, -53, (0.0, 0), &[(0, 1)], &[], 1.0)];
        let e = decode(&encode(&WriteRequest { timeseries: vec![ts] }), 1 << 20).unwrap_err();
        assert!(e.contains("{__name__=\"custom\"}") && e.contains("schema -53"), "{e}");
    }

    #[test]
    fn samples_become_gauge_points_read_back_under_their_own_labels() {
        let stale = f64::from_bits(skein_promql::STALE_NAN_BITS);
        let req = WriteRequest {
            timeseries: vec![series(
                &[
                    ("__name__", "up"),
                    ("job", "node"),
                    ("instance", "h:9100"),
                    ("zone", "a"),
                ],
                &[(1000, 1.0), (2000, stale)],
            )],
        };
        let d = decode(&encode(&req), 1 << 20).unwrap();
        assert_eq!(d.records.len(), 2);
        let s = skein_promql::naming::samples(&d.records[0]);
        assert_eq!(s.len(), 1);
        let l = &s[0].0;
        assert_eq!(
            l.pairs(),
            [
                ("__name__".to_string(), "up".to_string()),
                ("instance".into(), "h:9100".into()),
                ("job".into(), "node".into()),
                ("zone".into(), "a".into())
            ]
        );
        assert_eq!(s[0].1, 1.0);
        assert!(skein_promql::is_stale_nan(
            skein_promql::naming::samples(&d.records[1])[0].1
        ));
    }

    #[test]
    fn bad_bodies_and_nameless_series_refuse_the_whole_request() {
        let e = decode(b"definitely not snappy", 1 << 20).unwrap_err();
        assert!(e.contains("snappy"), "{e}");
        let not_proto = snap::raw::Encoder::new().compress_vec(b"\xff\xff\xff").unwrap();
        let e = decode(&not_proto, 1 << 20).unwrap_err();
        assert!(e.contains("protobuf"), "{e}");
        let req = WriteRequest {
            timeseries: vec![
                series(&[("__name__", "ok")], &[(1, 1.0)]),
                series(&[("job", "x")], &[(1, 1.0)]),
            ],
        };
        let e = decode(&encode(&req), 1 << 20).unwrap_err();
        assert!(e.contains("has no __name__ label") && e.contains("job=\"x\""), "{e}");
    }
}
