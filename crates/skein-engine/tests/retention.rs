//! Retention by age: expired records are never answered by any query path
//! (before a round removes them as after), a round drops whole parts,
//! rewrites the part that straddles the line, kills expired hot rows and
//! collects their payloads, and the disk really drops. Disk pressure:
//! ingest refused before anything is written, eviction of the oldest parts.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use skein_engine::{
    Clock, Engine, EngineOptions, Error, FaultKind, LogQuery, MetricQuery, MinFreeDisk, OnDiskFull, Retention,
    SpanQuery, TextQuery, UsageGroupBy, Window,
};
use skein_model::{AnyValue, KeyValue, LogRecord, Resource, Span, SpanId, TraceId};

const T0: u64 = skein_engine::testdata::END_NS;
const DAY: u64 = 86_400_000_000_000;
const SPANS_PER_DAY: usize = 4;
const LOGS_PER_DAY: usize = 3;
const POINTS_PER_DAY: usize = 2;

fn kv(k: &str, v: impl Into<AnyValue>) -> KeyValue {
    KeyValue::new(k, v)
}

/// A payload-sized value unique to `tag`.
fn big(tag: &str) -> String {
    format!("{tag} ").repeat(6000 / (tag.len() + 1) + 1)
}

/// Day `d`'s spans (trace `d + 1`, an LLM call each, one with a payload),
/// `late` marking a second batch of the same day sent later.
fn spans(d: u64, late: bool) -> Vec<Span> {
    let trace = TraceId::from_u128(1 + d as u128 + if late { 1000 } else { 0 });
    (0..SPANS_PER_DAY as u64)
        .map(|n| {
            let start = T0 + d * DAY + 3_600_000_000_000 + n * 1_000_000;
            let mut attributes = vec![
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.request.model", "gpt-4o-2024-08-06"),
                kv("gen_ai.usage.input_tokens", 100i64),
                kv("gen_ai.usage.output_tokens", 10i64),
                kv("session.id", format!("s{d}{}", if late { "late" } else { "" })),
            ];
            if n == 0 {
                attributes.push(kv("prompt", big(&format!("spanpayload{d}{late}"))));
            }
            Span {
                trace_id: trace,
                span_id: SpanId((n + 1).to_be_bytes()),
                name: format!("op{d}"),
                start_time_unix_nano: start,
                end_time_unix_nano: start + 5_000_000,
                attributes,
                resource: Arc::new(Resource::with_service("svc")),
                ..Default::default()
            }
        })
        .collect()
}

fn logs(d: u64, late: bool) -> Vec<LogRecord> {
    let trace = TraceId::from_u128(1 + d as u128 + if late { 1000 } else { 0 });
    (0..LOGS_PER_DAY as u64)
        .map(|n| LogRecord {
            time_unix_nano: T0 + d * DAY + 3_600_000_000_000 + n * 1_000_000,
            severity_number: 9,
            body: AnyValue::Str(if n == 0 {
                big(&format!("logpayload{d}{late}"))
            } else {
                format!("logword{d} number {n}{}", if late { " late" } else { "" })
            }),
            trace_id: Some(trace),
            resource: Arc::new(Resource::with_service("svc")),
            ..Default::default()
        })
        .collect()
}

fn points(d: u64) -> Vec<skein_model::MetricPoint> {
    let mut ps = skein_engine::testdata::metric_points(POINTS_PER_DAY);
    for (n, p) in ps.iter_mut().enumerate() {
        p.time_unix_nano = T0 + d * DAY + 3_600_000_000_000 + n as u64;
        p.start_time_unix_nano = p.time_unix_nano - 1;
    }
    ps
}

fn ingest_day(e: &Engine, d: u64) {
    assert_eq!(e.ingest_spans(spans(d, false)).unwrap().accepted, SPANS_PER_DAY as u64);
    assert_eq!(e.ingest_logs(logs(d, false)).unwrap().accepted, LOGS_PER_DAY as u64);
    assert_eq!(e.ingest_metrics(points(d)).unwrap().accepted, POINTS_PER_DAY as u64);
}

/// Bytes of every file under `dir` (what `du` counts, near enough).
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            dir_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

fn options(dir: &Path, now: &Arc<AtomicU64>, retention: &str) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.retention = retention.parse::<Retention>().unwrap();
    o.clock = Clock::manual(now.clone());
    o
}

fn span_days(e: &Engine) -> Vec<u64> {
    let r = e
        .search_spans(&SpanQuery {
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    let mut days: Vec<u64> = r.records.iter().map(|s| (s.start_time_unix_nano - T0) / DAY).collect();
    days.sort();
    days.dedup();
    days
}

fn log_text_hits(e: &Engine, text: &str) -> usize {
    e.search_logs(&LogQuery {
        text: Some(TextQuery::parse(text).unwrap()),
        limit: 1000,
        ..Default::default()
    })
    .unwrap()
    .records
    .len()
}

/// What every query path answers once the line is at day 5 (days 0–4
/// expired; day 9 and a late batch of day 1 in the hot tier).
fn assert_only_days_from_5(e: &Engine, floor: u64) {
    let live_days = 5u64; // days 5..=9
    assert_eq!(span_days(e), vec![5, 6, 7, 8, 9]);
    let r = e
        .search_logs(&LogQuery {
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.records.len() as u64, live_days * LOGS_PER_DAY as u64);
    assert!(r.records.iter().all(|l| l.time_unix_nano >= floor));
    let r = e
        .search_metrics(&MetricQuery {
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.records.len() as u64, live_days * POINTS_PER_DAY as u64);
    // Trace lookups (spans, logs): none of an expired trace.
    for d in [0, 1, 3, 4] {
        assert!(
            e.get_trace(TraceId::from_u128(1 + d)).unwrap().spans.is_empty(),
            "day {d}"
        );
        assert!(e.trace_logs(TraceId::from_u128(1 + d)).unwrap().is_empty(), "day {d}");
    }
    assert!(
        e.get_trace(TraceId::from_u128(1001)).unwrap().spans.is_empty(),
        "late day 1"
    );
    assert_eq!(
        e.get_trace(TraceId::from_u128(1 + 6)).unwrap().spans.len(),
        SPANS_PER_DAY
    );
    assert_eq!(e.trace_logs(TraceId::from_u128(1 + 9)).unwrap().len(), LOGS_PER_DAY);
    // Full text.
    for d in [0, 1, 3, 4] {
        assert_eq!(log_text_hits(e, &format!("logword{d}")), 0, "day {d}");
    }
    assert_eq!(log_text_hits(e, "logword6"), LOGS_PER_DAY - 1);
    let text_spans = e
        .search_spans(&SpanQuery {
            text: Some(TextQuery::parse("spanpayload3false").unwrap()),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert!(text_spans.records.is_empty(), "a payload's text of an expired span");
    // Aggregations.
    let (services, _) = e.services(Window::ALL).unwrap();
    assert_eq!(
        services.iter().map(|s| s.spans).sum::<u64>(),
        live_days * SPANS_PER_DAY as u64
    );
    let (summary, _) = e.summary(Window::ALL, None).unwrap();
    assert_eq!(summary.spans, live_days * SPANS_PER_DAY as u64);
    assert_eq!(summary.logs, live_days * LOGS_PER_DAY as u64);
    assert_eq!(summary.metric_points, live_days * POINTS_PER_DAY as u64);
    // LLM views.
    let (usage, _) = e.llm_usage(Window::ALL, UsageGroupBy::Model, false).unwrap();
    assert_eq!(usage.totals.calls, live_days * SPANS_PER_DAY as u64);
    let (page, _) = e.sessions(Window::ALL, 100, None).unwrap();
    let mut ids: Vec<String> = page.sessions.iter().map(|s| s.session_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["s5", "s6", "s7", "s8", "s9"]);
    assert!(e.session("s1", Window::ALL).unwrap().is_none());
    assert!(e.session("s1late", Window::ALL).unwrap().is_none());
    assert!(e.session("s6", Window::ALL).unwrap().is_some());
    // Timelines, a day a bucket.
    let w = Window::new(T0, T0 + 10 * DAY);
    let (_, series, _) = e.service_series(w, 10, None).unwrap();
    let per_day: Vec<u64> = (0..10).map(|i| series.iter().map(|s| s.spans[i]).sum()).collect();
    assert_eq!(per_day, [0, 0, 0, 0, 0, 4, 4, 4, 4, 4]);
    // Counted from columns, and (with a filter every log passes) from the
    // matches: both within retention's line.
    for body_contains in [None, Some(String::new())] {
        let q = LogQuery {
            window: w,
            body_contains,
            ..Default::default()
        };
        let (_, bands, _) = e.log_series(&q, 10).unwrap();
        let per_day: Vec<u64> = (0..10).map(|i| bands.values().map(|v| v[i]).sum()).collect();
        assert_eq!(per_day, [0, 0, 0, 0, 0, 3, 3, 3, 3, 3]);
    }
}

#[test]
fn expired_records_are_never_answered_and_a_round_frees_their_disk() {
    let dir = tempfile::tempdir().unwrap();
    // The clock starts before the data: nothing is expired yet.
    let now = Arc::new(AtomicU64::new(T0));
    let e = Engine::open(options(dir.path(), &now, "5d")).unwrap();
    // Days 0, 1, 2 a part each; 3–6 one part (it will straddle the line);
    // 7, 8 a part each; day 9 and a late batch of day 1 stay hot.
    for d in 0..3 {
        ingest_day(&e, d);
        e.flush().unwrap();
    }
    for d in 3..7 {
        ingest_day(&e, d);
    }
    e.flush().unwrap();
    for d in 7..9 {
        ingest_day(&e, d);
        e.flush().unwrap();
    }
    ingest_day(&e, 9);
    e.ingest_spans(spans(1, true)).unwrap();
    e.ingest_logs(logs(1, true)).unwrap();
    assert_eq!(span_days(&e), (0..10).collect::<Vec<_>>());
    let parts_before = e.stats().parts;
    assert_eq!(parts_before, 6 * 3);

    // Day 10 + a little: days 0–4 are past 5 days.
    now.store(T0 + 10 * DAY, Ordering::SeqCst);
    let floor = T0 + 5 * DAY;
    // Answered as expired before any round ran …
    assert_only_days_from_5(&e, floor);
    // … and refused on arrival.
    let r = e.ingest_spans(spans(2, true)).unwrap();
    assert_eq!((r.accepted, r.rejected), (0, SPANS_PER_DAY as u64));
    assert!(
        r.errors[0].contains("older than the retention of spans"),
        "{:?}",
        r.errors
    );

    let bytes_before = dir_bytes(dir.path());
    let payloads_before = e.stats().payloads.payloads;
    let report = e.enforce_retention().unwrap();
    assert_eq!(report.parts_dropped, 3 * 3, "{report:?}");
    assert_eq!(report.parts_rewritten, 3, "{report:?}");
    let per_day = (SPANS_PER_DAY + LOGS_PER_DAY + POINTS_PER_DAY) as u64;
    let late = (SPANS_PER_DAY + LOGS_PER_DAY) as u64;
    assert_eq!(report.records_expired, 5 * per_day + late, "{report:?}");
    assert_only_days_from_5(&e, floor);
    let s = e.stats();
    assert_eq!(s.spans, 5 * SPANS_PER_DAY as u64);
    assert_eq!(s.logs, 5 * LOGS_PER_DAY as u64);
    assert_eq!(s.metric_points, 5 * POINTS_PER_DAY as u64);
    assert_eq!(s.parts, 3 * 3, "the straddler and days 7, 8");
    // The payloads of expired records are gone: one span's and one log's
    // per live day remain.
    assert_eq!(s.payloads.payloads, 2 * 5, "had {payloads_before}");
    assert_eq!(s.retention.parts_dropped, 9);
    assert_eq!(s.retention.records_expired, report.records_expired);
    e.flush().unwrap();
    let bytes_after = dir_bytes(dir.path());
    assert!(
        bytes_after * 10 < bytes_before * 7,
        "disk went from {bytes_before} to {bytes_after} bytes"
    );
    // A second round finds nothing to do.
    assert_eq!(e.enforce_retention().unwrap().records_expired, 0);
    drop(e);

    // Reopened keeping everything for ever: the expired records are gone
    // from the parts, their text entries and the log, not only hidden.
    let e = Engine::open(options(dir.path(), &now, "forever")).unwrap();
    assert_only_days_from_5(&e, floor);
    assert_eq!(e.stats().spans, 5 * SPANS_PER_DAY as u64);
}

#[test]
fn each_signal_has_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    let e = Engine::open(options(dir.path(), &now, "spans=2d,logs=6d,metrics=forever")).unwrap();
    for d in 0..8 {
        ingest_day(&e, d);
        e.flush().unwrap();
    }
    now.store(T0 + 8 * DAY, Ordering::SeqCst);
    e.enforce_retention().unwrap();
    let s = e.stats();
    assert_eq!(s.spans, 2 * SPANS_PER_DAY as u64);
    assert_eq!(s.logs, 6 * LOGS_PER_DAY as u64);
    assert_eq!(s.metric_points, 8 * POINTS_PER_DAY as u64);
    let (summary, _) = e.summary(Window::ALL, None).unwrap();
    assert_eq!(
        (summary.spans, summary.logs, summary.metric_points),
        (s.spans, s.logs, s.metric_points)
    );
}

#[test]
fn below_the_free_space_floor_ingest_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    {
        let e = Engine::open(options(dir.path(), &now, "forever")).unwrap();
        ingest_day(&e, 0);
        e.flush().unwrap();
    }
    let mut o = options(dir.path(), &now, "forever");
    // No filesystem has this much free.
    o.min_free_disk = MinFreeDisk::Bytes(u64::MAX);
    let e = Engine::open(o).unwrap();
    let appends = e.stats().wal_appends;
    let err = e.ingest_spans(spans(1, false)).unwrap_err();
    assert!(matches!(err, Error::DiskFull { .. }), "{err}");
    assert!(err.is_disk_full() && err.is_unavailable());
    assert!(err.to_string().contains("below --min-free-disk"), "{err}");
    let faults = e.faults();
    assert_eq!(faults.iter().map(|f| f.kind).collect::<Vec<_>>(), [FaultKind::Disk]);
    assert!(FaultKind::Disk.degrades_only());
    assert!(e.ingest_logs(logs(1, false)).is_err());
    let s = e.stats();
    assert_eq!(s.wal_appends, appends, "nothing reached the log");
    assert_eq!(s.failures["disk"], 2);
    // Queries go on.
    assert_eq!(span_days(&e), [0]);
}

#[test]
fn under_evict_the_oldest_parts_go_first_until_the_floor_is_met() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    {
        let e = Engine::open(options(dir.path(), &now, "forever")).unwrap();
        for d in 0..3 {
            ingest_day(&e, d);
            e.flush().unwrap();
        }
        ingest_day(&e, 3);
    }
    let mut o = options(dir.path(), &now, "forever");
    o.min_free_disk = MinFreeDisk::Bytes(u64::MAX);
    o.on_disk_full = OnDiskFull::Evict;
    let e = Engine::open(o).unwrap();
    assert_eq!(span_days(&e), [0, 1, 2, 3]);
    let report = e.enforce_retention().unwrap();
    // The floor cannot be met: every part goes, the hot tier stays.
    assert_eq!(report.parts_evicted, 3 * 3, "{report:?}");
    assert_eq!(e.stats().parts, 0);
    assert_eq!(span_days(&e), [3]);
    assert_eq!(e.stats().retention.parts_evicted, 9);
    assert_eq!(e.stats().payloads.payloads, 2, "day 3's, still in the hot tier");
}

#[test]
fn evicted_records_do_not_come_back_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    let wal = dir.path().join("wal");
    let saved = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(options(dir.path(), &now, "forever")).unwrap();
        ingest_day(&e, 0);
        copy_dir(&wal, saved.path());
        e.flush().unwrap();
    }
    // A crash after the flush wrote its parts and before it removed the
    // log segment they cover: the segment is still there, its records
    // skipped on replay because the parts hold them.
    std::fs::remove_dir_all(&wal).unwrap();
    copy_dir(saved.path(), &wal);
    {
        let mut o = options(dir.path(), &now, "forever");
        o.min_free_disk = MinFreeDisk::Bytes(u64::MAX);
        o.on_disk_full = OnDiskFull::Evict;
        let e = Engine::open(o).unwrap();
        assert_eq!(span_days(&e), [0]);
        let report = e.enforce_retention().unwrap();
        assert_eq!(report.parts_evicted, 3, "{report:?}");
        assert!(span_days(&e).is_empty());
    }
    // The floor that keeps them out is a file `skein verify` knows.
    let v = skein_engine::backup::verify(&skein_engine::backup::Location::Dir(dir.path().to_path_buf())).unwrap();
    assert!(v.ok() && !v.notes.iter().any(|n| n.contains("replay-floor")), "{v:?}");
    let e = Engine::open(options(dir.path(), &now, "forever")).unwrap();
    assert!(span_days(&e).is_empty(), "evicted records stay evicted after a replay");
    // Records written after the eviction are not mistaken for the evicted
    // ones: they survive the next replay.
    ingest_day(&e, 2);
    drop(e);
    let e = Engine::open(options(dir.path(), &now, "forever")).unwrap();
    assert_eq!(span_days(&e), [2]);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn retention_runs_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    let mut o = options(dir.path(), &now, "1d");
    o.background = true;
    o.retention_interval = Duration::from_millis(20);
    let e = Engine::open(o).unwrap();
    ingest_day(&e, 0);
    e.flush().unwrap();
    ingest_day(&e, 5);
    e.flush().unwrap();
    now.store(T0 + 5 * DAY + DAY / 2, Ordering::SeqCst);
    // Polled: the round comes when it comes (the deadline only turns a
    // hang into a failure).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while e.stats().retention.parts_dropped < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no retention round: {:?}",
            e.stats().retention
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(span_days(&e), [5]);
    assert!(e.faults().is_empty(), "{:?}", e.faults());
}

#[test]
fn closing_does_not_wait_for_the_next_round() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    let mut o = options(dir.path(), &now, "1d");
    o.background = true;
    // Were the retention thread left asleep, this would take a day.
    o.retention_interval = Duration::from_secs(86_400);
    let e = Engine::open(o).unwrap();
    ingest_day(&e, 0);
    e.close().unwrap();
}
