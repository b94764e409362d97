//! The series scan (`Engine::scan_metric_series`) against a naive model:
//! the points handed over, whole or as samples of a described series, are
//! exactly the ingested points the names, filters and window select, over
//! parts and the hot tier, whatever the mix of kinds, units, scopes,
//! resources and attributes that make series distinct.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::Config;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, Sample, SeriesSink, Window};
use skein_model::metric::{HistogramValue, MetricDesc, MetricKind, Number, PointValue, Temporality};
use skein_model::{AnyValue, KeyValue, MetricPoint, Resource, Scope};

/// One generated point: name, kind, unit, scope, host, attribute, value,
/// flags; its time is its position.
type Gen = (u8, u8, bool, bool, u8, u8, Option<i64>, bool);

fn point(i: usize, g: &Gen) -> MetricPoint {
    let &(name, kind, unit, scope, host, attr, value, stale) = g;
    let kind_v = match kind % 3 {
        0 => MetricKind::Gauge,
        1 => MetricKind::Sum {
            temporality: Temporality::Cumulative,
            monotonic: true,
        },
        _ => MetricKind::Histogram {
            temporality: Temporality::Cumulative,
        },
    };
    let value = match kind_v {
        MetricKind::Histogram { .. } => PointValue::Histogram(HistogramValue {
            count: 3,
            sum: Some(value.unwrap_or(0) as f64),
            bucket_counts: vec![1, 2],
            explicit_bounds: vec![5.0],
            min: None,
            max: None,
        }),
        // Odd values as doubles, even ones as ints: both columns read.
        _ => PointValue::Number(value.map(|v| {
            if v % 2 == 0 {
                Number::Int(v)
            } else {
                Number::Double(v as f64 / 2.0)
            }
        })),
    };
    let mut resource = Resource::with_service("svc");
    resource
        .attributes
        .push(KeyValue::new("host.name", AnyValue::Str(format!("h{}", host % 3))));
    // The same attribute key, as a string or an int: two series.
    let attr_v = match attr % 4 {
        3 => AnyValue::Int(1),
        a => AnyValue::Str(a.to_string()),
    };
    MetricPoint {
        metric: Arc::new(MetricDesc {
            name: format!("m{}", name % 2),
            description: String::new(),
            unit: if unit { "ms".into() } else { String::new() },
            metadata: Vec::new(),
            kind: kind_v,
        }),
        attributes: vec![KeyValue::new("k", attr_v)],
        start_time_unix_nano: 0,
        time_unix_nano: 1_000_000_000 + i as u64 * 1_000_000,
        flags: stale as u32,
        exemplars: Vec::new(),
        value,
        resource: Arc::new(resource),
        scope: Arc::new(Scope {
            name: if scope { "lib".into() } else { String::new() },
            ..Default::default()
        }),
    }
}

/// Rebuilds every point the scan hands over.
#[derive(Default)]
struct Collect {
    described: Vec<MetricPoint>,
    got: Vec<MetricPoint>,
}

impl SeriesSink for Collect {
    fn point(&mut self, p: &MetricPoint) {
        self.got.push(p.clone());
    }
    fn series(&mut self, _key: u64, p: &MetricPoint) -> Option<u32> {
        // Skip every third series: its samples must not come.
        if self.described.len() % 3 == 2 {
            self.described.push(p.clone());
            return None;
        }
        self.described.push(p.clone());
        Some((self.described.len() - 1) as u32)
    }
    fn samples(&mut self, series: u32, samples: &[Sample]) {
        assert!(samples.is_sorted_by_key(|s| s.time), "a batch is ascending by time");
        for s in samples {
            let mut p = self.described[series as usize].clone();
            p.time_unix_nano = s.time;
            p.value = PointValue::Number(s.value);
            p.flags = s.flags;
            self.got.push(p);
        }
    }
}

fn key(p: &MetricPoint) -> String {
    format!(
        "{:?}",
        (
            p.time_unix_nano,
            &p.metric,
            &p.attributes,
            &p.resource,
            &p.scope,
            &p.value,
            p.flags
        )
    )
}

fn check(gens: &[Gen], flush_at: &[usize], names: Option<Vec<String>>, filter: Option<u8>, from: usize, to: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = EngineOptions::new(dir.path());
    o.background = false;
    let e = Engine::open(o).unwrap();
    let points: Vec<MetricPoint> = gens.iter().enumerate().map(|(i, g)| point(i, g)).collect();
    let mut start = 0;
    let mut in_parts = 0;
    for &end in flush_at.iter().chain([&points.len()]) {
        let end = end.clamp(start, points.len());
        if end > start {
            e.ingest_metrics(points[start..end].to_vec()).unwrap();
        }
        if end < points.len() {
            e.flush().unwrap();
            in_parts = end;
        }
        start = end;
    }
    let filters: Vec<AttrFilter> = filter
        .map(|a| AttrFilter::eq(AttrScope::Record, "k", AnyValue::Str(a.to_string())))
        .into_iter()
        .collect();
    let w = Window::new(
        1_000_000_000 + from as u64 * 1_000_000,
        1_000_000_000 + to as u64 * 1_000_000,
    );
    let mut sink = Collect::default();
    e.scan_metric_series(names.as_deref(), &filters, w, &mut sink).unwrap();

    let mut skipped: Vec<String> = Vec::new();
    for (i, d) in sink.described.iter().enumerate() {
        if i % 3 == 2 {
            skipped.push(format!("{:?}", (&d.metric, &d.attributes, &d.resource, &d.scope)));
        }
    }
    // Only part rows are read as samples; hot points come whole.
    let is_skipped = |p: &MetricPoint| {
        p.time_unix_nano < 1_000_000_000 + in_parts as u64 * 1_000_000
            && matches!(p.value, PointValue::Number(_))
            && skipped.contains(&format!("{:?}", (&p.metric, &p.attributes, &p.resource, &p.scope)))
    };
    let mut want: Vec<String> = points
        .iter()
        .filter(|p| w.contains(p.time_unix_nano))
        .filter(|p| names.as_ref().is_none_or(|ns| ns.contains(&p.metric.name)))
        .filter(|p| {
            filter.is_none_or(|a| {
                p.attributes
                    .iter()
                    .any(|kv| kv.key == "k" && kv.value == AnyValue::Str(a.to_string()))
            })
        })
        .filter(|p| !is_skipped(p))
        .map(key)
        .collect();
    let mut got: Vec<String> = sink.got.iter().map(key).collect();
    want.sort();
    got.sort();
    // A point in two sources at once is the same point: one is kept.
    got.dedup();
    want.dedup();
    // Named differences only: the lists are long.
    let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
    let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "extra {extra:?}\nmissing {missing:?}"
    );
    assert_eq!(got.len(), want.len());
}

fn generated() -> impl Strategy<Value = Gen> {
    (
        0u8..2,
        0u8..3,
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        0u8..4,
        prop::option::weighted(0.9, -50i64..50),
        prop::bool::weighted(0.1),
    )
}

proptest! {
    #![proptest_config(Config { cases: 32, ..Config::default() })]

    #[test]
    fn the_series_scan_hands_over_exactly_the_selected_points(
        gens in prop::collection::vec(generated(), 1..120),
        flush_at in prop::collection::vec(0usize..120, 0..3),
        name in prop::option::of(0u8..2),
        filter in prop::option::of(0u8..4),
        from in 0usize..60,
        len in 1usize..130,
    ) {
        let mut flush_at = flush_at;
        flush_at.sort();
        let names = name.map(|n| vec![format!("m{n}")]);
        check(&gens, &flush_at, names, filter, from, from + len);
    }
}

#[test]
fn a_series_met_in_two_parts_is_described_once() {
    let gens: Vec<Gen> = (0..40).map(|i| (0, 1, false, false, 0, 0, Some(i), false)).collect();
    check(&gens, &[10, 20, 30], None, None, 0, 40);
    let dir = tempfile::tempdir().unwrap();
    let mut o = EngineOptions::new(dir.path());
    o.background = false;
    let e = Engine::open(o).unwrap();
    for chunk in gens.chunks(10).enumerate() {
        let pts = chunk
            .1
            .iter()
            .enumerate()
            .map(|(i, g)| point(chunk.0 * 10 + i, g))
            .collect();
        e.ingest_metrics(pts).unwrap();
        e.flush().unwrap();
    }
    let mut sink = Collect::default();
    e.scan_metric_series(None, &[], Window::new(0, u64::MAX), &mut sink)
        .unwrap();
    assert_eq!(sink.described.len(), 1, "one series, described once across four parts");
    assert_eq!(sink.got.len(), 40);
}

/// The sample tables under a data directory.
fn sample_tables(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let metrics = dir.join("parts").join("metrics");
    let mut out: Vec<_> = std::fs::read_dir(metrics)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "samples"))
        .collect();
    out.sort();
    out
}

/// [`Collect`] keeping every series (which are skipped depends on the
/// order a scan describes them in, which a sample table changes).
#[derive(Default)]
struct CollectAll(Collect);

impl SeriesSink for CollectAll {
    fn point(&mut self, p: &MetricPoint) {
        self.0.point(p);
    }
    fn series(&mut self, _key: u64, p: &MetricPoint) -> Option<u32> {
        self.0.described.push(p.clone());
        Some((self.0.described.len() - 1) as u32)
    }
    fn samples(&mut self, series: u32, samples: &[Sample]) {
        self.0.samples(series, samples);
    }
}

/// Every point a scan of the whole store hands over, canonically.
fn scan_all(e: &Engine) -> Vec<String> {
    let mut sink = CollectAll::default();
    e.scan_metric_series(None, &[], Window::ALL, &mut sink).unwrap();
    let mut got: Vec<String> = sink.0.got.iter().map(key).collect();
    got.sort();
    got.dedup();
    got
}

#[test]
fn sample_tables_go_with_their_parts_and_a_part_without_one_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        let mut o = EngineOptions::new(dir.path());
        o.background = false;
        o
    };
    let mut e = Engine::open(opts()).unwrap();
    let gens: Vec<Gen> = (0..300u16)
        .map(|i| {
            let b = i as u8;
            (
                b % 2,
                b % 3,
                b.is_multiple_of(5),
                b.is_multiple_of(7),
                b % 3,
                b % 4,
                Some(i as i64),
                b.is_multiple_of(11),
            )
        })
        .collect();
    let points: Vec<MetricPoint> = gens.iter().enumerate().map(|(i, g)| point(i, g)).collect();
    for chunk in points.chunks(100) {
        e.ingest_metrics(chunk.to_vec()).unwrap();
        e.flush().unwrap();
    }
    // One table per part; the answers are the same before and after.
    assert_eq!(sample_tables(dir.path()).len(), 3);
    let answer = scan_all(&e);
    assert_eq!(answer.len(), points.len());
    e.compact().unwrap();
    let after = sample_tables(dir.path());
    assert_eq!(after.len(), 1, "the replaced parts' tables go with them: {after:?}");
    assert_eq!(scan_all(&e), answer);

    // An orphan (a crash between the table and its part) is removed on
    // open; a lost table leaves its part read from its rows.
    e.close().unwrap();
    drop(e);
    let orphan = after[0].with_file_name("00000000000fffff.samples");
    std::fs::copy(&after[0], &orphan).unwrap();
    std::fs::remove_file(&after[0]).unwrap();
    e = Engine::open(opts()).unwrap();
    assert!(!orphan.exists());
    assert!(sample_tables(dir.path()).is_empty());
    assert_eq!(scan_all(&e), answer);
}
