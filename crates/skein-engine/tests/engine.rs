//! End-to-end behaviour of the engine as a library: ingest, flush, compact,
//! restart, and every query, against known data.

use std::sync::Arc;

use skein_engine::testdata;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, LogQuery, MetricQuery, SpanQuery, Window};
use skein_model::corpus::Corpus;
use skein_model::{AnyValue, Span, StatusCode};

fn opts(dir: &std::path::Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o
}

fn ids(spans: &[Arc<Span>]) -> Vec<(String, String)> {
    spans
        .iter()
        .map(|s| (s.trace_id.to_hex(), s.span_id.to_hex()))
        .collect()
}

#[test]
fn trace_lookup_spans_hot_tier_and_parts_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(200, 10, 5, 10, testdata::END_NS);
    {
        let e = Engine::open(opts(dir.path())).unwrap();
        let r = e.ingest_spans(corpus.spans(0..100)).unwrap();
        assert_eq!(r.accepted, 1000);
        e.flush().unwrap();
        e.ingest_spans(corpus.spans(100..200)).unwrap();
        // Trace 150 is only in the hot tier, trace 50 only in a part.
        for t in [50, 150] {
            let got = e.get_trace(corpus.trace_id(t)).unwrap();
            assert_eq!(got.spans.len(), 10, "trace {t}");
            let mut want: Vec<Span> = corpus.trace(t);
            want.sort_by_key(|s| (s.start_time_unix_nano, s.span_id));
            let got: Vec<Span> = got.spans.iter().map(|s| (**s).clone()).collect();
            assert_eq!(got, want, "trace {t} is returned exactly as ingested");
        }
        assert_eq!(e.stats().spans, 2000);
        // Dropped without close: the hot tier must come back from the WAL.
    }
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(e.stats().spans, 2000);
    let got = e.get_trace(corpus.trace_id(150)).unwrap();
    assert_eq!(got.spans.len(), 10);
    let miss = e.get_trace(skein_model::TraceId::from_u128(12345)).unwrap();
    assert!(miss.spans.is_empty());
}

#[test]
fn reingesting_a_span_replaces_it_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let corpus = Corpus::with_shape(10, 10, 5, 10, testdata::END_NS);
    e.ingest_spans(corpus.spans(0..10)).unwrap();
    e.flush().unwrap();
    // A client retries the same batch: no duplicates.
    e.ingest_spans(corpus.spans(0..10)).unwrap();
    let t = e.get_trace(corpus.trace_id(3)).unwrap();
    assert_eq!(t.spans.len(), 10);
    // A span is re-sent with new content and a new start time.
    let mut changed = corpus.trace(3)[4].clone();
    changed.name = "changed".into();
    changed.start_time_unix_nano += 1_000_000;
    changed.end_time_unix_nano += 1_000_000;
    e.ingest_spans(vec![changed.clone()]).unwrap();
    e.flush().unwrap();
    let t = e.get_trace(corpus.trace_id(3)).unwrap();
    assert_eq!(t.spans.len(), 10);
    assert_eq!(t.spans.iter().filter(|s| s.name == "changed").count(), 1);
    // The bound counts every stored version: the first part's 10 and the
    // second's (the retry, with the change).
    assert_eq!(e.trace_rows_upper_bound(corpus.trace_id(3)), 20);
    assert_eq!(e.trace_rows_upper_bound(skein_model::TraceId::from_u128(7)), 0);
    // Search for the old name must not return the replaced version.
    let old_name = corpus.trace(3)[4].name.clone();
    let q = SpanQuery {
        name: Some(old_name),
        trace_id: Some(corpus.trace_id(3)),
        limit: 100,
        ..Default::default()
    };
    let r = e.search_spans(&q).unwrap();
    assert!(
        r.records.iter().all(|s| s.span_id != changed.span_id),
        "stale version returned"
    );
    let all = e
        .search_spans(&SpanQuery {
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(all.records.len(), 100, "one copy of each span: {:#?}", all.explain);
    // Compaction resolves the duplicates physically, and keeps the newest.
    e.compact().unwrap();
    assert_eq!(e.stats().spans, 100);
    let t = e.get_trace(corpus.trace_id(3)).unwrap();
    assert_eq!(t.spans.iter().filter(|s| s.name == "changed").count(), 1);
    assert_eq!(e.trace_rows_upper_bound(corpus.trace_id(3)), 10);
}

#[test]
fn search_filters_paginate_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let corpus = Corpus::with_shape(300, 10, 5, 10, testdata::END_NS);
    e.ingest_spans(corpus.spans(0..100)).unwrap();
    e.flush().unwrap();
    e.ingest_spans(corpus.spans(100..200)).unwrap();
    e.flush().unwrap();
    e.ingest_spans(corpus.spans(200..300)).unwrap();
    let q = SpanQuery {
        attributes: vec![AttrFilter::eq(AttrScope::Record, "benchmark.group", "group-3")],
        limit: 50,
        ..Default::default()
    };
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let r = e.search_spans(&SpanQuery { cursor, ..q.clone() }).unwrap();
        all.extend(r.records.iter().cloned());
        cursor = r.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let mut want: Vec<Span> = corpus
        .spans(0..300)
        .into_iter()
        .filter(|s| s.attributes[0].value == AnyValue::Str("group-3".into()))
        .collect();
    want.sort_by(|a, b| {
        (b.start_time_unix_nano, b.trace_id, b.span_id).cmp(&(a.start_time_unix_nano, a.trace_id, a.span_id))
    });
    assert_eq!(all.len(), want.len());
    let want_ids: Vec<_> = want.iter().map(|s| (s.trace_id.to_hex(), s.span_id.to_hex())).collect();
    assert_eq!(ids(&all), want_ids);
    // Explain says the postings were used and parts were read.
    let r = e.search_spans(&q).unwrap();
    assert!(
        r.explain.index_used.iter().any(|i| i.starts_with("postings")),
        "{:?}",
        r.explain
    );
}

/// A page of indexed results decodes the rows it returns plus one (to know
/// a next page exists), not a second, doubled chunk.
#[test]
fn a_page_of_indexed_results_decodes_one_row_more_than_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let corpus = Corpus::with_shape(2000, 10, 5, 10, testdata::END_NS);
    e.ingest_spans(corpus.spans(0..2000)).unwrap();
    e.flush().unwrap();
    let q = SpanQuery {
        attributes: vec![AttrFilter::eq(AttrScope::Record, "benchmark.group", "group-3")],
        limit: 50,
        ..Default::default()
    };
    let r = e.search_spans(&q).unwrap();
    assert_eq!(r.records.len(), 50);
    assert!(r.next_cursor.is_some());
    assert_eq!(r.explain.rows_decoded, 51, "{:?}", r.explain);
}

#[test]
fn aggregates_match_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let corpus = Corpus::with_shape(400, 10, 4, 10, testdata::END_NS);
    let spans = corpus.spans(0..400);
    e.ingest_spans(spans[..2000].to_vec()).unwrap();
    e.flush().unwrap();
    e.ingest_spans(spans[2000..].to_vec()).unwrap();
    let (services, _) = e.services(Window::ALL).unwrap();
    assert_eq!(services.len(), 4);
    for svc in &services {
        let mine: Vec<&Span> = spans.iter().filter(|s| s.service_name() == svc.service).collect();
        assert_eq!(svc.spans, mine.len() as u64);
        let errors = mine.iter().filter(|s| s.status.code == StatusCode::Error).count() as u64;
        assert_eq!(svc.errors, errors);
        let mut d: Vec<u64> = mine.iter().map(|s| s.duration_ns()).collect();
        d.sort_unstable();
        let p95 = d[((0.95 * d.len() as f64).ceil() as usize).max(1) - 1] as f64;
        assert!(
            (svc.p95_ns as f64 - p95).abs() <= p95 * 0.011,
            "{} vs {p95}",
            svc.p95_ns
        );
    }
    // A window that straddles the part scans its rows: same answer as naive.
    let mid = corpus.trace_start(100);
    let w = Window::new(mid, corpus.trace_start(300));
    let (svc_w, _) = e.services(w).unwrap();
    let total: u64 = svc_w.iter().map(|s| s.spans).sum();
    let naive = spans.iter().filter(|s| w.contains(s.start_time_unix_nano)).count() as u64;
    assert_eq!(total, naive);
}

#[test]
fn logs_and_metrics_are_stored_searched_and_summarised() {
    let dir = tempfile::tempdir().unwrap();
    let logs = testdata::logs(200);
    let points = testdata::metric_points(50);
    {
        let e = Engine::open(opts(dir.path())).unwrap();
        e.ingest_logs(logs[..100].to_vec()).unwrap();
        e.ingest_metrics(points[..25].to_vec()).unwrap();
        e.flush().unwrap();
        e.ingest_logs(logs[100..].to_vec()).unwrap();
        e.ingest_metrics(points[25..].to_vec()).unwrap();
        // A retried log batch is idempotent.
        e.ingest_logs(logs[..10].to_vec()).unwrap();
        e.close().unwrap();
    }
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(e.stats().logs, 200 + 10, "the retry is a duplicate until compaction");
    let r = e
        .search_logs(&LogQuery {
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.records.len(), 200, "queries see one copy");
    e.compact().unwrap();
    assert_eq!(e.stats().logs, 200);
    let r = e
        .search_logs(&LogQuery {
            min_severity: Some(17),
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.records.len(), logs.iter().filter(|l| l.severity_number >= 17).count());
    let r = e
        .search_logs(&LogQuery {
            body_contains: Some("DOGS".into()),
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    let want = logs
        .iter()
        .filter(|l| l.body.as_str().is_some_and(|b| b.contains("dogs")))
        .count();
    assert_eq!(r.records.len(), want);
    let mut got: Vec<_> = r.records.iter().map(|l| (**l).clone()).collect();
    got.sort_by_key(|l| l.time_unix_nano);
    let mut want: Vec<_> = logs
        .iter()
        .filter(|l| l.body.as_str().is_some_and(|b| b.contains("dogs")))
        .cloned()
        .collect();
    want.sort_by_key(|l| l.time_unix_nano);
    assert_eq!(got, want, "logs come back exactly");
    let m = e
        .search_metrics(&MetricQuery {
            name: Some("metric.histogram".into()),
            limit: 100,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(m.records.len(), 10);
    let mut got: Vec<_> = e
        .search_metrics(&MetricQuery {
            limit: 100,
            ..Default::default()
        })
        .unwrap()
        .records
        .iter()
        .map(|p| (**p).clone())
        .collect();
    got.sort_by_key(|p| p.time_unix_nano);
    assert_eq!(got, points, "every metric kind round-trips through parts");
    let (s, _) = e.summary(Window::ALL, None).unwrap();
    assert_eq!(s.logs, 200);
    assert_eq!(s.metric_points, 50);
    assert_eq!(s.metric_series, 15, "5 metrics x 3 hosts");
    assert_eq!(s.logs_by_severity.get("error"), Some(&50));
}

#[test]
fn page_cache_serves_repeated_reads_without_changing_answers() {
    // Small pages and row groups, so reads cross many pages and groups; one
    // engine without a cache, one with a roomy cache, one with a cache too
    // small to hold a page for long (constant eviction).
    let corpus = Corpus::with_shape(2000, 10, 5, 20, testdata::END_NS);
    let open = |dir: &std::path::Path, cache: u64| {
        let mut o = opts(dir);
        o.page_cache_bytes = cache;
        o.writer.page_rows = 64;
        o.writer.row_group_rows = 4096;
        let e = Engine::open(o).unwrap();
        for b in 0..4 {
            e.ingest_spans(corpus.spans(b * 500..(b + 1) * 500)).unwrap();
            e.flush().unwrap();
        }
        e.compact().unwrap();
        e
    };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let engines = [
        open(dirs[0].path(), 0),
        open(dirs[1].path(), 64 << 20),
        open(dirs[2].path(), 2 << 10),
    ];
    assert_eq!(engines[0].stats().page_cache.capacity_bytes, 0);
    // A page is cached from its second miss on: three rounds.
    for round in 0..3 {
        for t in (0..2000).step_by(97) {
            let mut want = corpus.trace(t);
            want.sort_by_key(|s| (s.start_time_unix_nano, s.span_id));
            for (i, e) in engines.iter().enumerate() {
                let got: Vec<Span> = e
                    .get_trace(corpus.trace_id(t))
                    .unwrap()
                    .spans
                    .iter()
                    .map(|s| (**s).clone())
                    .collect();
                assert_eq!(got, want, "trace {t}, engine {i}, round {round}");
            }
        }
        for g in 0..20 {
            let q = SpanQuery {
                attributes: vec![AttrFilter::eq(
                    AttrScope::Record,
                    "benchmark.group",
                    format!("group-{g}"),
                )],
                limit: 37,
                ..Default::default()
            };
            let want: Vec<Span> = engines[0]
                .search_spans(&q)
                .unwrap()
                .records
                .iter()
                .map(|s| (**s).clone())
                .collect();
            assert_eq!(want.len(), 37);
            for e in &engines[1..] {
                let got: Vec<Span> = e
                    .search_spans(&q)
                    .unwrap()
                    .records
                    .iter()
                    .map(|s| (**s).clone())
                    .collect();
                assert_eq!(got, want, "group {g}, round {round}");
            }
        }
    }
    let roomy = engines[1].stats().page_cache;
    assert!(
        roomy.hits > roomy.misses,
        "repeated reads are served from the cache: {roomy:?}"
    );
    assert!(roomy.bytes > 0 && roomy.bytes <= roomy.capacity_bytes);
    let tiny = engines[2].stats().page_cache;
    assert!(tiny.bytes <= tiny.capacity_bytes, "{tiny:?}");
    assert!(tiny.misses > roomy.misses, "a tiny cache evicts: {tiny:?} vs {roomy:?}");
    let off = engines[0].stats().page_cache;
    assert_eq!((off.hits, off.misses), (0, 0));
}

#[test]
fn flushed_parts_carry_the_hot_tiers_statistics_exactly() {
    // A flush hands the hot tier's statistics to the part instead of
    // recomputing them; rebuilding the sidecar from the Parquet file
    // recomputes them row by row, and every aggregate must agree.
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(300, 10, 6, 10, testdata::END_NS);
    let logs = testdata::logs(500);
    let aggregates = |e: &Engine| {
        let (services, _) = e.services(Window::ALL).unwrap();
        let (ops, _) = e.operations(None, Window::ALL).unwrap();
        let (summary, _) = e.summary(Window::ALL, None).unwrap();
        serde_json::to_value((services, ops, summary)).unwrap()
    };
    let before = {
        let e = Engine::open(opts(dir.path())).unwrap();
        e.ingest_spans(corpus.spans(0..150)).unwrap();
        e.ingest_logs(logs.clone()).unwrap();
        e.flush().unwrap();
        e.ingest_spans(corpus.spans(150..300)).unwrap();
        e.flush().unwrap();
        assert_eq!(e.stats().hot_records, 0);
        let v = aggregates(&e);
        e.close().unwrap();
        v
    };
    let mut removed = 0;
    for sig in ["spans", "logs"] {
        for f in std::fs::read_dir(dir.path().join("parts").join(sig)).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "idx") {
                std::fs::remove_file(p).unwrap();
                removed += 1;
            }
        }
    }
    assert_eq!(removed, 3, "two span parts and one log part");
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(aggregates(&e), before);
}
