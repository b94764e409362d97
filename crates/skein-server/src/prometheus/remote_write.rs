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
//! stored exactly (a custom-bucket schema, fractional counts) or whose
//! buckets span more indexes than the request has bytes (a sparse
//! histogram is stored dense, so a few bytes must not grow to gigabytes)
//! refuses the whole request (400, naming the series) before anything is
//! stored.

use std::sync::Arc;

use prost::Message;
use skein_model::metric::{ExpBuckets, Temporality};
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
    // Dense buckets the request's native histograms may expand to: about
    // one per byte it holds (a histogram a few bytes long can span any
    // range, and is stored dense), and room for a small request's.
    let mut bucket_room = raw.len().saturating_add(1 << 16);
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
        // Only a series that has histograms pays for their metric.
        if !ts.histograms.is_empty() {
            let metric = Arc::new(MetricDesc {
                name: name.clone(),
                kind: MetricKind::ExponentialHistogram {
                    temporality: Temporality::Cumulative,
                },
                ..Default::default()
            });
            for h in &ts.histograms {
                let time = stored_time(&ts.labels, h.timestamp)?;
                let value = h.to_exponential(bucket_room).map_err(|e| {
                    format!(
                        "series {} has a native histogram Skein cannot store: {e}",
                        describe(&ts.labels)
                    )
                })?;
                let dense = |b: &Option<ExpBuckets>| b.as_ref().map_or(0, |b| b.bucket_counts.len());
                bucket_room -= dense(&value.positive) + dense(&value.negative);
                records.push(MetricPoint {
                    metric: metric.clone(),
                    attributes: attributes.clone(),
                    time_unix_nano: time,
                    flags: if h.is_stale() { NO_RECORDED_VALUE } else { 0 },
                    value: PointValue::ExponentialHistogram(value),
                    resource: resource.clone(),
                    scope: scope.clone(),
                    ..Default::default()
                });
            }
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

    /// What any decoded request must be: named points, and native
    /// histograms PromQL can read, within the request's bucket room.
    fn check(raw_len: usize, d: &Decoded<MetricPoint>) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut dense = 0;
        for p in &d.records {
            proptest::prop_assert!(!p.metric.name.is_empty());
            if let PointValue::ExponentialHistogram(e) = &p.value {
                dense += e.positive.as_ref().map_or(0, |b| b.bucket_counts.len());
                dense += e.negative.as_ref().map_or(0, |b| b.bucket_counts.len());
                if let Some((_, Some(h))) = skein_promql::naming::native_histogram(p) {
                    let _ = (h.buckets(), h.quantile(0.9), h.fraction(0.0, 1.0));
                }
            }
        }
        proptest::prop_assert!(dense <= raw_len + (1 << 16));
        Ok(())
    }

    fn sample_request() -> Vec<u8> {
        let mut ts = series(&[("__name__", "h"), ("job", "j")], &[(5, 1.0)]);
        ts.histograms = vec![
            Histogram::from_buckets(1, 3, (0.001, 2), &[(-4, 1), (-3, 2), (7, 5)], &[(2, 1)], 9.0),
            Histogram::from_buckets(2, -2, (0.0, 0), &[(0, 1)], &[], 0.5),
        ];
        WriteRequest { timeseries: vec![ts] }.encode_to_vec()
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = decode(&data, 1 << 20);
            // The same bytes as the protobuf inside a good snappy body.
            let body = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            if let Ok(d) = decode(&body, 1 << 20) {
                check(data.len(), &d)?;
            }
        }

        #[test]
        fn damaged_requests_never_panic(
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 1..=255u8), 1..4),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let mut raw = sample_request();
            for (at, x) in &edits {
                let i = at.index(raw.len());
                raw[i] ^= x;
            }
            for raw in [&raw[..], &raw[..cut.index(raw.len() + 1)]] {
                let body = snap::raw::Encoder::new().compress_vec(raw).unwrap();
                if let Ok(d) = decode(&body, 1 << 20) {
                    check(raw.len(), &d)?;
                }
            }
        }
    }

    #[test]
    fn a_sparse_histogram_cannot_grow_past_its_requests_room() {
        // A few bytes: two buckets two million indexes apart.
        let mut ts = series(&[("__name__", "h")], &[]);
        ts.histograms = vec![Histogram::from_buckets(
            1,
            0,
            (0.0, 0),
            &[(0, 1), (200_000, 1)],
            &[],
            1.0,
        )];
        let e = decode(
            &encode(&WriteRequest {
                timeseries: vec![ts.clone()],
            }),
            1 << 20,
        )
        .unwrap_err();
        assert!(e.contains("spanning 200001 indexes"), "{e}");
        // The room is the request's, not each histogram's: many wide ones
        // add up.
        ts.histograms = (0..100)
            .map(|t| Histogram::from_buckets(t, 0, (0.0, 0), &[(0, 1), (20_000, 1)], &[], 1.0))
            .collect();
        let e = decode(&encode(&WriteRequest { timeseries: vec![ts] }), 1 << 20).unwrap_err();
        assert!(e.contains("room for"), "{e}");
    }
}
