//! Bad input: invalid records are rejected one by one with a message naming
//! the problem, while the valid records of the same batch are stored and
//! nothing else changes; NaN survives storage bit for bit; and a damaged WAL
//! stops the engine from starting unless salvage is asked for.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skein_engine::Durability;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, LogQuery, MetricQuery, SpanQuery, testdata};
use skein_model::metric::{Exemplar, HistogramValue, MetricDesc, MetricKind, Number, PointValue};
use skein_model::{AnyValue, Event, KeyValue, LogRecord, MetricPoint, Resource, Span, SpanId, TraceId};

fn opts(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o
}

fn all_spans(e: &Engine) -> Vec<Span> {
    let r = e
        .search_spans(&SpanQuery {
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
    assert!(r.next_cursor.is_none());
    let mut v: Vec<Span> = r.records.iter().map(|s| (**s).clone()).collect();
    v.sort_by_key(|s| (s.trace_id, s.span_id));
    v
}

fn all_logs(e: &Engine) -> Vec<LogRecord> {
    let r = e
        .search_logs(&LogQuery {
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
    let mut v: Vec<LogRecord> = r.records.iter().map(|l| (**l).clone()).collect();
    v.sort_by_key(|l| (l.effective_time(), l.body.display_string()));
    v
}

fn all_points(e: &Engine) -> Vec<MetricPoint> {
    let r = e
        .search_metrics(&MetricQuery {
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
    let mut v: Vec<MetricPoint> = r.records.iter().map(|p| (**p).clone()).collect();
    v.sort_by_key(|p| (p.time_unix_nano, p.metric.name.clone()));
    v
}

fn sorted<T: Clone, K: Ord>(v: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort_by_key(key);
    v
}

/// A valid span of its own trace.
fn span(n: u64) -> Span {
    let mut s = testdata::spans(1, 1).remove(0);
    s.trace_id = TraceId::from_u128(0xabc0_0000 + n as u128);
    s.span_id = SpanId::from_u64(0x10 + n);
    s.name = format!("valid {n}");
    s
}

fn many_attrs(n: usize) -> Vec<KeyValue> {
    (0..n).map(|i| KeyValue::new(format!("k{i}"), i as i64)).collect()
}

/// Asserts `err` is the message of record `index` of the batch and names
/// the problem by all of `words`.
fn assert_error(err: &str, what: &str, index: usize, words: &[&str]) {
    assert!(
        err.starts_with(&format!("{what} {index}: ")),
        "{err:?} is not about {what} {index}"
    );
    for w in words {
        assert!(err.contains(w), "{err:?} does not say {w:?}");
    }
}

#[test]
fn invalid_spans_are_rejected_and_the_rest_of_the_batch_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    // Data from before, in a part and in the hot tier: it must not change.
    let before = testdata::spans(5, 4);
    e.ingest_spans(before[..10].to_vec()).unwrap();
    e.flush().unwrap();
    e.ingest_spans(before[10..].to_vec()).unwrap();
    let appends = e.stats().wal_appends;

    let mut zero_trace = span(1);
    zero_trace.trace_id = TraceId::default();
    let mut zero_span = span(2);
    zero_span.span_id = SpanId::default();
    let mut late_start = span(3);
    late_start.start_time_unix_nano = i64::MAX as u64 + 1;
    late_start.end_time_unix_nano = i64::MAX as u64 + 2;
    let mut late_end = span(4);
    late_end.end_time_unix_nano = u64::MAX;
    let mut attrs = span(5);
    attrs.attributes = many_attrs(1025);
    let mut resource_attrs = span(6);
    resource_attrs.resource = Arc::new(Resource {
        attributes: many_attrs(2000),
        ..Default::default()
    });
    let mut event_attrs = span(7);
    event_attrs.events = vec![Event {
        time_unix_nano: event_attrs.start_time_unix_nano,
        name: "big".into(),
        attributes: many_attrs(1025),
        dropped_attributes_count: 0,
    }];
    let mut huge = span(8);
    huge.attributes = vec![KeyValue::new("blob", "x".repeat(9 << 20))];
    // Exactly at the limits: accepted.
    let mut at_limits = span(9);
    at_limits.attributes = many_attrs(1024);
    let mut latest_start = span(10);
    latest_start.start_time_unix_nano = i64::MAX as u64;
    latest_start.end_time_unix_nano = i64::MAX as u64;

    let valid = vec![span(0), at_limits.clone(), latest_start.clone(), span(11)];
    let batch = vec![
        span(0),
        zero_trace,
        zero_span,
        late_start,
        late_end,
        attrs,
        at_limits,
        resource_attrs,
        event_attrs,
        latest_start,
        huge,
        span(11),
    ];
    let report = e.ingest_spans(batch).unwrap();
    assert_eq!((report.accepted, report.rejected), (4, 8), "{report:?}");
    assert_eq!(report.errors.len(), 8, "{report:?}");
    let errs = &report.errors;
    assert_error(&errs[0], "span", 1, &["trace_id", "all zeros"]);
    assert_error(&errs[1], "span", 2, &["span_id", "all zeros"]);
    assert_error(
        &errs[2],
        "span",
        3,
        &["start_time_unix_nano", &(i64::MAX as u64 + 1).to_string(), "2262"],
    );
    assert_error(&errs[3], "span", 4, &["end_time_unix_nano", &u64::MAX.to_string()]);
    assert_error(&errs[4], "span", 5, &["span has 1025 attributes", "limit of 1024"]);
    assert_error(&errs[5], "span", 7, &["resource has 2000 attributes", "limit of 1024"]);
    assert_error(&errs[6], "span", 8, &["event has 1025 attributes", "limit of 1024"]);
    assert_error(
        &errs[7],
        "span",
        10,
        &["record of", "bytes exceeds the 8388608 byte record limit"],
    );
    assert_eq!(e.stats().wal_appends, appends + 1, "one WAL record for the valid spans");

    let mut want = before.clone();
    want.extend(valid.iter().cloned());
    let want = sorted(&want, |s| (s.trace_id, s.span_id));
    assert_eq!(all_spans(&e), want, "the valid spans and nothing else");
    for s in &valid {
        let t = e.get_trace(s.trace_id).unwrap();
        assert_eq!(t.spans.len(), 1);
        assert_eq!(*t.spans[0], *s);
    }
    assert!(e.get_trace(TraceId::default()).unwrap().spans.is_empty());
    let (svc, _) = e.services(skein_engine::Window::ALL).unwrap();
    assert_eq!(svc.iter().map(|s| s.spans).sum::<u64>(), want.len() as u64);
    assert_eq!((e.stats().logs, e.stats().metric_points), (0, 0));
    // …and so it stays through a flush, a compaction and a restart.
    e.flush().unwrap();
    e.compact().unwrap();
    assert_eq!(all_spans(&e), want);
    drop(e);
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(all_spans(&e), want);
    assert_eq!(e.stats().spans, want.len() as u64);
}

#[test]
fn a_wholly_invalid_batch_writes_nothing_and_caps_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let appends = e.stats().wal_appends;
    let batch: Vec<Span> = (0..20)
        .map(|i| {
            let mut s = span(i);
            s.trace_id = TraceId::default();
            s
        })
        .collect();
    let report = e.ingest_spans(batch).unwrap();
    assert_eq!((report.accepted, report.rejected), (0, 20));
    assert_eq!(report.errors.len(), skein_model::otlp::MAX_ERROR_MESSAGES);
    for (i, err) in report.errors.iter().enumerate() {
        assert_error(err, "span", i, &["trace_id is all zeros"]);
    }
    assert_eq!(e.stats().wal_appends, appends, "nothing reached the WAL");
    assert_eq!(e.stats().spans, 0);
    assert!(all_spans(&e).is_empty());
}

#[test]
fn invalid_logs_and_metric_points_are_rejected_alone() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let logs = testdata::logs(6);
    let points = testdata::metric_points(6);
    e.ingest_spans(testdata::spans(2, 3)).unwrap();

    let mut sev99 = logs[1].clone();
    sev99.severity_number = 99;
    let mut negative = logs[2].clone();
    negative.severity_number = -1;
    let mut late = logs[3].clone();
    late.time_unix_nano = u64::MAX;
    let mut log_attrs = logs[4].clone();
    log_attrs.attributes = many_attrs(1025);
    let report = e
        .ingest_logs(vec![logs[0].clone(), sev99, negative, late, log_attrs, logs[5].clone()])
        .unwrap();
    assert_eq!((report.accepted, report.rejected), (2, 4), "{report:?}");
    assert_error(&report.errors[0], "log", 1, &["severity_number 99", "0-24"]);
    assert_error(&report.errors[1], "log", 2, &["severity_number -1", "0-24"]);
    assert_error(&report.errors[2], "log", 3, &["time_unix_nano", "2262"]);
    assert_error(&report.errors[3], "log", 4, &["log record has 1025 attributes"]);

    let mut unnamed = points[1].clone();
    unnamed.metric = Arc::new(MetricDesc {
        name: String::new(),
        ..(*points[1].metric).clone()
    });
    let mut point_attrs = points[2].clone();
    point_attrs.attributes = many_attrs(1025);
    let report = e
        .ingest_metrics(vec![points[0].clone(), unnamed, point_attrs, points[3].clone()])
        .unwrap();
    assert_eq!((report.accepted, report.rejected), (2, 2), "{report:?}");
    assert_error(&report.errors[0], "metric", 1, &["metric name is empty"]);
    assert_error(&report.errors[1], "metric", 2, &["metric point has 1025 attributes"]);

    let want_logs = sorted(&[logs[0].clone(), logs[5].clone()], |l| {
        (l.effective_time(), l.body.display_string())
    });
    let want_points = sorted(&[points[0].clone(), points[3].clone()], |p| {
        (p.time_unix_nano, p.metric.name.clone())
    });
    for stage in ["hot", "flushed"] {
        assert_eq!(all_logs(&e), want_logs, "{stage}");
        assert_eq!(all_points(&e), want_points, "{stage}");
        assert_eq!(all_spans(&e).len(), 6, "{stage}: spans unaffected");
        let (s, _) = e.summary(skein_engine::Window::ALL, None).unwrap();
        assert_eq!((s.logs, s.metric_points, s.spans), (2, 2, 6), "{stage}");
        e.flush().unwrap();
    }
}

/// NaNs of every sign and payload. `-NaN` is what x86 computes for `0.0 / 0.0`.
fn nan_payloads() -> [(&'static str, f64); 3] {
    [
        ("nan", f64::NAN),
        ("negative_nan", -f64::NAN),
        ("payload_nan", f64::from_bits(0x7ff8_0000_0000_0bad)),
    ]
}

fn bits(v: &AnyValue) -> u64 {
    match v {
        AnyValue::Double(d) => d.to_bits(),
        other => panic!("expected a double, got {other:?}"),
    }
}

fn find<'a>(attrs: &'a [KeyValue], key: &str) -> &'a AnyValue {
    &attrs
        .iter()
        .find(|kv| kv.key == key)
        .unwrap_or_else(|| panic!("no {key}"))
        .value
}

/// A span carrying `nans` in its own, an event's and its resource's attributes.
fn nan_span(nans: &[(&str, f64)]) -> Span {
    let mut s = span(1);
    let attrs: Vec<KeyValue> = nans.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect();
    s.attributes = attrs.clone();
    s.events = vec![Event {
        time_unix_nano: s.start_time_unix_nano,
        name: "e".into(),
        attributes: attrs.clone(),
        dropped_attributes_count: 0,
    }];
    let mut res = (*s.resource).clone();
    res.attributes.extend(attrs);
    s.resource = Arc::new(res);
    s
}

/// Ingests a span with `nans`, then checks every stage (hot, flushed,
/// compacted, reopened) returns their exact bits and finds them by value.
fn check_span_nans(nans: &[(&str, f64)]) {
    let dir = tempfile::tempdir().unwrap();
    let s = nan_span(nans);
    let mut e = Some(Engine::open(opts(dir.path())).unwrap());
    e.as_ref().unwrap().ingest_spans(vec![s.clone()]).unwrap();
    for stage in ["hot", "flushed", "compacted", "reopened"] {
        match stage {
            "flushed" => e.as_ref().unwrap().flush().unwrap(),
            "compacted" => {
                let engine = e.as_ref().unwrap();
                engine.ingest_spans(vec![span(2)]).unwrap();
                engine.flush().unwrap();
                engine.compact().unwrap();
            }
            "reopened" => {
                drop(e.take());
                e = Some(Engine::open(opts(dir.path())).unwrap());
            }
            _ => {}
        }
        let engine = e.as_ref().unwrap();
        let t = engine.get_trace(s.trace_id).unwrap();
        assert_eq!(t.spans.len(), 1, "{stage}");
        let got = &t.spans[0];
        for (k, v) in nans {
            for (what, attrs) in [
                ("span", &got.attributes),
                ("event", &got.events[0].attributes),
                ("resource", &got.resource.attributes),
            ] {
                // Every NaN is stored as the canonical NaN (a documented
                // normalization): the same bits in every tier.
                let want = if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() };
                assert_eq!(
                    bits(find(attrs, k)),
                    want,
                    "{stage}: {what} attribute {k}: {:#x} came back as {:#x}",
                    v.to_bits(),
                    bits(find(attrs, k))
                );
            }
            // A NaN can be searched for (typed equality compares doubles by bits).
            for scope in [AttrScope::Record, AttrScope::Event, AttrScope::Resource] {
                let q = SpanQuery {
                    attributes: vec![AttrFilter::eq(scope, *k, *v)],
                    limit: 10,
                    ..Default::default()
                };
                assert_eq!(
                    engine.search_spans(&q).unwrap().records.len(),
                    1,
                    "{stage}: {scope:?} {k}"
                );
            }
        }
    }
}

#[test]
fn nan_in_span_attributes_is_canonical_in_every_tier() {
    check_span_nans(&nan_payloads()[..1]);
}

/// Ingests metric points with `value_nans` in their Float64 value columns
/// (gauge value, histogram sum and min) and `json_nans` in the fields stored
/// as OTLP/JSON (labels, exemplar values, bucket bounds); checks every stage
/// returns the exact bits, and that retries stay one record.
fn check_metric_nans(value_nans: &[(&str, f64)], json_nans: &[(&str, f64)]) {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let base = testdata::metric_points(1).remove(0);
    let histogram = Arc::new(MetricDesc {
        name: "nan.histogram".into(),
        kind: MetricKind::Histogram {
            temporality: skein_model::metric::Temporality::Delta,
        },
        ..Default::default()
    });
    let mut points = Vec::new();
    for (i, &(k, nan)) in value_nans.iter().enumerate() {
        let json = json_nans.get(i).map(|p| p.1);
        points.push(MetricPoint {
            time_unix_nano: base.time_unix_nano + i as u64,
            value: PointValue::Number(Some(Number::Double(nan))),
            attributes: [KeyValue::new("which", k)]
                .into_iter()
                .chain(json.map(|j| KeyValue::new("label", j)))
                .collect(),
            exemplars: json
                .map(|j| Exemplar {
                    value: Some(Number::Double(j)),
                    time_unix_nano: base.time_unix_nano,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..base.clone()
        });
        points.push(MetricPoint {
            metric: histogram.clone(),
            time_unix_nano: base.time_unix_nano + 10 + i as u64,
            value: PointValue::Histogram(HistogramValue {
                count: 1,
                sum: Some(nan),
                bucket_counts: vec![0, 1],
                explicit_bounds: vec![json.unwrap_or(1.0)],
                min: Some(nan),
                max: None,
            }),
            attributes: vec![KeyValue::new("which", k)],
            ..base.clone()
        });
    }
    e.ingest_metrics(points.clone()).unwrap();
    // A retry of the same points is still the same records.
    e.ingest_metrics(points.clone()).unwrap();
    let doubles = |p: &MetricPoint| -> Vec<String> {
        let mut v = match &p.value {
            PointValue::Number(Some(Number::Double(d))) => vec![d.to_bits()],
            PointValue::Histogram(h) => vec![
                h.sum.unwrap().to_bits(),
                h.explicit_bounds[0].to_bits(),
                h.min.unwrap().to_bits(),
            ],
            other => panic!("{other:?}"),
        };
        v.extend(p.attributes.iter().filter_map(|kv| match kv.value {
            AnyValue::Double(d) => Some(d.to_bits()),
            _ => None,
        }));
        v.extend(p.exemplars.iter().filter_map(|x| match x.value {
            Some(Number::Double(d)) => Some(d.to_bits()),
            _ => None,
        }));
        v.iter().map(|b| format!("{b:#x}")).collect()
    };
    // Every NaN is stored as the canonical NaN (a documented normalization).
    let normalized: Vec<MetricPoint> = points
        .iter()
        .map(|p| {
            let mut p = p.clone();
            skein_engine::validate::Normalize::normalize(&mut p);
            p
        })
        .collect();
    let want: Vec<Vec<String>> = sorted(&normalized, |p| p.time_unix_nano).iter().map(doubles).collect();
    for stage in ["hot", "flushed", "retried after flush", "compacted"] {
        match stage {
            "flushed" => e.flush().unwrap(),
            "retried after flush" => {
                e.ingest_metrics(points.clone()).unwrap();
            }
            "compacted" => {
                e.flush().unwrap();
                e.compact().unwrap();
            }
            _ => {}
        }
        let got = all_points(&e);
        let got: Vec<Vec<String>> = sorted(&got, |p| p.time_unix_nano).iter().map(doubles).collect();
        assert_eq!(got.len(), want.len(), "{stage}: one record per point");
        assert_eq!(got, want, "{stage}");
    }
}

#[test]
fn nan_metric_values_are_canonical_in_every_tier() {
    check_metric_nans(&nan_payloads(), &[nan_payloads()[0]; 3]);
}

/// NaNs with a sign bit (x86's `0.0 / 0.0`) or a payload are normalized to
/// the canonical NaN at ingest, because parts keep some doubles as OTLP/JSON
/// ("NaN"); so every tier returns the same bits, content keys stay stable,
/// and a retry after a flush is still one record.
#[test]
fn non_canonical_nans_are_normalized_and_retries_stay_one_record() {
    check_span_nans(&nan_payloads());
    check_metric_nans(&nan_payloads(), &nan_payloads());
}

fn wal_segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

/// Frame layout (see `wal::frame`): after the 8-byte segment header, each
/// frame is `[len u32][crc u32][payload; len]`.
const SEGMENT_HEADER: usize = 8;

#[test]
fn a_corrupt_wal_frame_refuses_to_open_unless_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let spans = testdata::spans(6, 5);
    {
        let mut o = opts(dir.path());
        o.durability = Durability::Fsync;
        let e = Engine::open(o).unwrap();
        for batch in spans.chunks(10) {
            e.ingest_spans(batch.to_vec()).unwrap();
        }
        // Dropped without close: the spans are only in the WAL.
    }
    let segments = wal_segments(dir.path());
    let seg = segments
        .iter()
        .find(|p| std::fs::metadata(p).unwrap().len() > SEGMENT_HEADER as u64)
        .expect("a WAL segment with frames")
        .clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    let len = u32::from_le_bytes(bytes[SEGMENT_HEADER..SEGMENT_HEADER + 4].try_into().unwrap()) as usize;
    let frame_end = SEGMENT_HEADER + 8 + len;
    assert!(frame_end < bytes.len(), "more frames follow the first");
    let middle = SEGMENT_HEADER + (8 + len) / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();

    let err = Engine::open(opts(dir.path()))
        .err()
        .expect("refuses to open")
        .to_string();
    let name = seg.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains(&name), "{err:?} does not name the segment {name}");
    assert!(err.contains("WAL segment"), "{err}");
    assert!(err.contains("checksum"), "{err}");
    assert!(err.contains("salvage"), "{err:?} does not say how to proceed");
    // Refusing changed nothing: it refuses again.
    assert_eq!(std::fs::read(&seg).unwrap(), bytes);
    assert!(Engine::open(opts(dir.path())).is_err());

    let mut salvage = opts(dir.path());
    salvage.wal_recovery = skein_engine::RecoveryMode::Salvage;
    let e = Engine::open(salvage).unwrap();
    // The log was cut at the first frame: nothing of it is replayed.
    assert_eq!(e.stats().spans, 0);
    // The engine works normally afterwards, across flushes and restarts.
    e.ingest_spans(spans[..5].to_vec()).unwrap();
    e.flush().unwrap();
    e.ingest_spans(spans[5..8].to_vec()).unwrap();
    drop(e);
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(all_spans(&e), sorted(&spans[..8], |s| (s.trace_id, s.span_id)));
    e.flush().unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(e.stats().spans, 8);
}
