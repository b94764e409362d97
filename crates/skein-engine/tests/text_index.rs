//! Full-text search through the engine's indexes against a scan of what was
//! ingested: records with prompts stored as payloads (shared system prompts,
//! unique user turns, big log bodies), spread over hot tiers, flushed and
//! compacted parts and restarts, answer every text query exactly as the
//! naive model does over the records as they were sent. The words searched
//! for lie past the payloads' 200-character previews, so only an index that
//! holds the whole payload text (or a re-check that reads it) finds them.

use std::collections::BTreeSet;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::Config;
use skein_engine::{Engine, EngineOptions, LogQuery, SpanQuery, TextQuery, Window};
use skein_model::corpus::Corpus;
use skein_model::{AnyValue, Event, KeyValue, LogRecord, Span, Status, StatusCode};

const END_NS: u64 = skein_engine::testdata::END_NS;

/// Filler that pushes the telling words past a payload's preview.
fn filler(seed: usize) -> String {
    let words = [
        "the",
        "assistant",
        "helps",
        "with",
        "orders",
        "and",
        "refunds",
        "politely",
    ];
    (0..60)
        .map(|i| words[(i * 7 + seed) % words.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// A few shared system prompts, each with its own deep word.
fn system_prompt(i: usize) -> String {
    let deep = ["PoolTimeout", "checkout_service", "東京都", "Straße"][i % 4];
    format!("You are agent {i}. {} Remember: {deep} matters.", filler(i))
}

/// A user turn: unique per span, with a rare deep word on some.
fn user_turn(n: usize) -> String {
    let rare = if n.is_multiple_of(5) { " zebra" } else { "" };
    format!("{} question number {n}{rare}", filler(n))
}

/// A big log body (stored as a payload above the 4 KiB threshold): a
/// stack trace with its deep frame, shared by some logs.
fn big_body(i: usize) -> String {
    let frames = (0..120)
        .map(|f| format!("  at com.example.Worker.step{f}(Worker.java:{f})"))
        .collect::<Vec<_>>()
        .join("\n");
    let cause = ["ConnectionRefusedError", "deadline exceeded"][i % 2];
    format!("java.lang.IllegalStateException: worker failed\n{frames}\nCaused by: {cause}")
}

#[derive(Debug, Clone)]
enum Step {
    Spans(Vec<(u8, u8)>),
    Logs(Vec<(u8, u8)>),
    Flush,
    /// Builds the indexes of the parts flushed without one.
    IndexText,
    Compact,
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => prop::collection::vec((0..4u8, any::<u8>()), 1..20).prop_map(Step::Spans),
        3 => prop::collection::vec((any::<u8>(), any::<u8>()), 1..20).prop_map(Step::Logs),
        2 => Just(Step::Flush),
        1 => Just(Step::IndexText),
        1 => Just(Step::Compact),
        1 => Just(Step::Reopen),
    ]
}

fn span(n: usize, prompt: u8, kind: u8) -> Span {
    let mut s = Corpus::with_shape(100_000, 1, 3, 3, END_NS).trace(n as u64).remove(0);
    s.attributes.clear();
    match kind % 4 {
        // An LLM call: a shared system prompt and a unique turn.
        0 | 1 => {
            let messages = format!(
                r#"[{{"role":"system","content":"{}"}},{{"role":"user","content":"{}"}}]"#,
                system_prompt(prompt as usize),
                user_turn(n)
            );
            s.attributes.push(KeyValue::new("gen_ai.input.messages", messages));
            // The same system prompt alone, shared verbatim across spans.
            s.attributes.push(KeyValue::new(
                "gen_ai.system_instructions",
                system_prompt(prompt as usize),
            ));
            // Short content stays inline, still searchable as payload text.
            s.attributes
                .push(KeyValue::new("gen_ai.output.messages", "ok, refund issued"));
        }
        2 => {
            s.status = Status {
                code: StatusCode::Error,
                message: "upstream PoolTimeout after 30s".into(),
            };
            s.events.push(Event {
                name: "exception".into(),
                time_unix_nano: s.start_time_unix_nano,
                attributes: vec![
                    KeyValue::new("exception.type", "ConnectionRefusedError"),
                    KeyValue::new("exception.stacktrace", big_body(n)),
                ],
                dropped_attributes_count: 0,
            });
        }
        _ => s.name = "GET /checkout".into(),
    }
    s
}

fn log(n: usize, body: u8) -> LogRecord {
    let mut l = skein_engine::testdata::logs(1).remove(0);
    l.time_unix_nano = END_NS - 1_000_000 + n as u64;
    l.observed_time_unix_nano = l.time_unix_nano;
    l.body = match body % 4 {
        0 => AnyValue::Str(big_body(body as usize / 4)),
        1 => AnyValue::Str(format!("connection refused by db.query {n}")),
        2 => AnyValue::Str(format!("user zebra logged in {n}")),
        _ => AnyValue::Str(user_turn(n)),
    };
    l.attributes = vec![KeyValue::new("n", n as i64)];
    l
}

const QUERIES: [&str; 14] = [
    "PoolTimeout",
    "payload:checkout_service",
    "東京",
    "strasse",
    "zebra",
    "payload:zebra",
    "body:zebra",
    "ConnectionRefusedError",
    "\"deadline exceeded\"",
    "Worker.step119",
    "refund* AND NOT zebra",
    "message:PoolTimeout",
    "name:checkout",
    "politely -payload:strasse",
];

fn options(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.durability = skein_engine::Durability::None;
    o.compaction.fanout = 2;
    o
}

fn check(e: &Engine, spans: &[Span], logs: &[LogRecord]) -> Result<(), TestCaseError> {
    for text in QUERIES {
        let q = TextQuery::parse(text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let want: BTreeSet<_> = spans
            .iter()
            .filter(|s| skein_engine::text::matches(&q, *s, None))
            .map(|s| (s.trace_id, s.span_id))
            .collect();
        let got = e
            .search_spans(&SpanQuery {
                text: Some(q.clone()),
                window: Window::ALL,
                limit: 100_000,
                ..Default::default()
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got: BTreeSet<_> = got.records.iter().map(|s| (s.trace_id, s.span_id)).collect();
        prop_assert_eq!(&got, &want, "spans {:?}", text);

        let want: BTreeSet<i64> = logs
            .iter()
            .filter(|l| skein_engine::text::matches(&q, *l, None))
            .filter_map(|l| l.attributes[0].value.as_i64())
            .collect();
        let got = e
            .search_logs(&LogQuery {
                text: Some(q),
                window: Window::ALL,
                limit: 100_000,
                ..Default::default()
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got: BTreeSet<i64> = got
            .records
            .iter()
            .filter_map(|l| l.attributes[0].value.as_i64())
            .collect();
        prop_assert_eq!(&got, &want, "logs {:?}", text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config { cases: 12, failure_persistence: None, ..Config::default() })]

    #[test]
    fn text_search_matches_a_scan_of_what_was_sent(steps in prop::collection::vec(step(), 1..14)) {
        let dir = tempfile::tempdir().unwrap();
        let mut e = Engine::open(options(dir.path())).unwrap();
        let (mut spans, mut logs) = (Vec::new(), Vec::new());
        for s in &steps {
            match s {
                Step::Spans(v) => {
                    // Distinct spans: one trace each.
                    let batch: Vec<Span> =
                        v.iter().enumerate().map(|(i, &(p, k))| span(spans.len() + i, p, k)).collect();
                    spans.extend(batch.iter().cloned());
                    e.ingest_spans(batch).unwrap();
                }
                Step::Logs(v) => {
                    let batch: Vec<LogRecord> =
                        v.iter().enumerate().map(|(i, &(_, b))| log(logs.len() + i, b)).collect();
                    logs.extend(batch.iter().cloned());
                    e.ingest_logs(batch).unwrap();
                }
                Step::Flush => e.flush().unwrap(),
                Step::IndexText => {
                    e.index_text().unwrap();
                    prop_assert_eq!(e.stats().text_index_backlog_parts, 0);
                }
                Step::Compact => {
                    e.flush().unwrap();
                    e.compact().unwrap();
                }
                Step::Reopen => {
                    e.close().unwrap();
                    drop(e);
                    e = Engine::open(options(dir.path())).unwrap();
                }
            }
            check(&e, &spans, &logs)?;
        }
    }
}

/// Parts get a text index after they are flushed, and the hot tier one
/// too, and queries use them (the explain names it); a part not indexed yet
/// is scanned, with the same answers; with full-text indexes off the
/// answers are the same, and no index file is written.
#[test]
fn indexes_are_built_used_and_optional() {
    let q = TextQuery::parse("zebra").unwrap();
    let mut answers = Vec::new();
    for on in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(dir.path());
        o.full_text = on;
        let e = Engine::open(o).unwrap();
        e.ingest_logs((0..40).map(|i| log(i, (i % 4) as u8)).collect()).unwrap();
        e.ingest_spans((0..40).map(|i| span(i, (i % 4) as u8, (i % 4) as u8)).collect())
            .unwrap();
        // Metric points hold no text: their parts get no index.
        e.ingest_metrics(skein_engine::testdata::metric_points(40)).unwrap();
        let hot = e
            .search_logs(&LogQuery {
                text: Some(q.clone()),
                limit: 1000,
                ..Default::default()
            })
            .unwrap();
        e.flush().unwrap();
        let search = || {
            e.search_logs(&LogQuery {
                text: Some(q.clone()),
                limit: 1000,
                ..Default::default()
            })
            .unwrap()
        };
        let unindexed = search();
        let backlog = e.stats().text_index_backlog_parts;
        assert_eq!(e.index_text().unwrap(), if on { 2 } else { 0 });
        let stats = e.stats();
        let flushed = search();
        let txt: Vec<_> = walk(dir.path()).into_iter().filter(|p| p.ends_with(".txt")).collect();
        assert_eq!(unindexed.records, flushed.records, "a part not indexed yet is scanned");
        assert_eq!(stats.text_index_backlog_parts, 0);
        if on {
            assert_eq!(backlog, 2, "a span and a log part, flushed without an index");
            assert_eq!(stats.text_index_builds, 2);
            assert!(
                hot.explain.index_used.iter().any(|i| i == "text index"),
                "{:?}",
                hot.explain
            );
            assert!(
                flushed.explain.index_used.iter().any(|i| i == "text index"),
                "{:?}",
                flushed.explain
            );
            assert_eq!(txt.len(), 2, "one text index per span or log part: {txt:?}");
            assert!(!txt.iter().any(|t| t.contains("metrics")), "{txt:?}");
            assert!(
                walk(dir.path())
                    .iter()
                    .any(|p| p.contains("metrics") && p.ends_with(".parquet"))
            );
            assert!(stats.text_index_bytes > 0);
        } else {
            assert_eq!(backlog, 0);
            assert!(!flushed.explain.index_used.iter().any(|i| i == "text index"));
            assert!(txt.is_empty(), "{txt:?}");
            assert_eq!(stats.text_index_bytes, 0);
        }
        assert_eq!(hot.records.len(), flushed.records.len());
        answers.push(
            flushed
                .records
                .iter()
                .map(|l| l.attributes[0].clone())
                .collect::<Vec<_>>(),
        );
    }
    assert!(!answers[0].is_empty());
    assert_eq!(answers[0], answers[1]);
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

/// Compaction merges its inputs' text indexes (it does not rebuild them)
/// when each has one, duplicates dropped by the merge included: answers
/// stay those of a scan. An input without an index (written with full
/// text off) makes the output's index be built from its rows instead.
#[test]
fn compaction_merges_text_indexes_and_rebuilds_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<LogRecord> = (0..60).map(|i| log(i, (i % 4) as u8)).collect();
    let spans: Vec<Span> = (0..60).map(|i| span(i, (i % 4) as u8, (i % 4) as u8)).collect();
    let e = Engine::open(options(dir.path())).unwrap();
    // Three parts per signal, the second re-sending half of the first (the
    // merge drops those rows as duplicates) among rows of its own.
    for (batch, range) in [(0, 0..30), (1, 15..45), (2, 45..60)] {
        e.ingest_logs(logs[range.clone()].to_vec()).unwrap();
        e.ingest_spans(spans[range].to_vec()).unwrap();
        e.flush().unwrap();
        e.index_text().unwrap();
        assert_eq!(e.stats().parts, 2 * (batch + 1), "one part per signal per flush");
    }
    e.compact().unwrap();
    let st = e.stats();
    assert!(st.compactions >= 2, "{st:?}");
    assert_eq!(
        st.text_index_merges, st.compactions,
        "every merge merged the indexes: {st:?}"
    );
    assert_eq!(st.text_index_rebuilds, 0);
    assert_eq!(st.logs, 60, "duplicates are gone");
    check(&e, &spans, &logs).unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(options(dir.path())).unwrap();
    check(&e, &spans, &logs).unwrap();
    e.close().unwrap();
    drop(e);

    // A part written with full text off, merged with one not indexed yet.
    let dir = tempfile::tempdir().unwrap();
    let mut off = options(dir.path());
    off.full_text = false;
    let e = Engine::open(off).unwrap();
    e.ingest_logs(logs[..30].to_vec()).unwrap();
    e.flush().unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(options(dir.path())).unwrap();
    e.ingest_logs(logs[30..].to_vec()).unwrap();
    e.flush().unwrap();
    e.compact().unwrap();
    let st = e.stats();
    assert_eq!((st.text_index_merges, st.text_index_rebuilds), (0, 1), "{st:?}");
    check(&e, &[], &logs).unwrap();
}

/// A part far bigger than the text index's first window: pages of newest
/// hits, taken with cursors, walk it window by window (words found only in
/// the oldest rows included, and a severity filter beside the text), and
/// together they are exactly the records a scan matches, newest first.
#[test]
fn pages_of_hits_walk_a_big_part_window_by_window() {
    const N: usize = 30_000;
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(options(dir.path())).unwrap();
    let body = |n: usize| {
        let mut words = vec![format!("record{n}")];
        if n.is_multiple_of(3) {
            words.push("common".into());
        }
        if [5, 4_100, 20_000, N - 1].contains(&n) {
            words.push("rare".into());
        }
        if n < 700 {
            words.push("oldest".into());
        }
        words.join(" ")
    };
    let logs: Vec<LogRecord> = (0..N)
        .map(|n| {
            let mut l = log(n, 1);
            l.body = AnyValue::Str(body(n));
            l.severity_number = if n.is_multiple_of(2) { 17 } else { 9 };
            l
        })
        .collect();
    for batch in logs.chunks(5_000) {
        e.ingest_logs(batch.to_vec()).unwrap();
    }
    e.flush().unwrap();
    e.index_text().unwrap();
    assert_eq!(e.stats().parts, 1, "one part holds them all");
    for (text, min_severity, limit) in [
        ("common", None, 250),
        ("rare", None, 2),
        ("oldest", None, 100),
        ("common AND NOT oldest", Some(17), 999),
        ("nowhere", None, 10),
    ] {
        let q = TextQuery::parse(text).unwrap();
        let want: Vec<i64> = logs
            .iter()
            .rev()
            .filter(|l| skein_engine::text::matches(&q, *l, None))
            .filter(|l| min_severity.is_none_or(|s| l.severity_number >= s))
            .filter_map(|l| l.attributes[0].value.as_i64())
            .collect();
        let (mut got, mut cursor) = (Vec::new(), None);
        loop {
            let page = e
                .search_logs(&LogQuery {
                    text: Some(q.clone()),
                    min_severity,
                    window: Window::ALL,
                    limit,
                    cursor,
                    ..Default::default()
                })
                .unwrap();
            assert!(page.explain.index_used.iter().any(|i| i == "text index"));
            got.extend(page.records.iter().filter_map(|l| l.attributes[0].value.as_i64()));
            cursor = page.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(got, want, "{text}");
    }
}

/// With background threads on, a part flushed without its index gets one
/// once flushing has caught up; after a restart its index file is loaded,
/// not built again.
#[test]
fn the_backlog_is_indexed_in_the_background_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<LogRecord> = (0..200).map(|i| log(i, (i % 4) as u8)).collect();
    let mut o = options(dir.path());
    o.background = true;
    let e = Engine::open(o).unwrap();
    e.ingest_logs(logs.clone()).unwrap();
    e.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while e.stats().text_index_backlog_parts > 0 {
        assert!(std::time::Instant::now() < deadline, "not indexed: {:?}", e.stats());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(e.stats().text_index_builds, 1);
    check(&e, &[], &logs).unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(options(dir.path())).unwrap();
    let st = e.stats();
    assert_eq!((st.text_index_backlog_parts, st.text_index_builds), (0, 0), "{st:?}");
    assert!(st.text_index_bytes > 0);
    check(&e, &[], &logs).unwrap();
}

/// A part whose index cannot be stored is a `text_index` fault (degraded,
/// not down) for as long as the part is there unindexed, and is not tried
/// again until a restart; its text queries scan it meanwhile.
#[test]
fn a_part_that_cannot_be_indexed_is_a_fault_and_is_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<LogRecord> = (0..50).map(|i| log(i, (i % 4) as u8)).collect();
    let e = Engine::open(options(dir.path())).unwrap();
    e.ingest_logs(logs.clone()).unwrap();
    e.flush().unwrap();
    let part = walk(dir.path())
        .into_iter()
        .find(|p| p.contains("logs") && p.ends_with(".parquet"))
        .unwrap();
    // A directory where the index file goes: storing it fails.
    let blocker = Path::new(&part).with_extension("txt");
    std::fs::create_dir(&blocker).unwrap();
    std::fs::write(blocker.join("keep"), b"x").unwrap();
    let err = e.index_text().unwrap_err().to_string();
    assert!(err.contains("full-text index of logs part"), "{err}");
    let fault = e.faults().into_iter().find(|f| f.kind.as_str() == "text_index");
    assert!(fault.is_some_and(|f| f.kind.degrades_only()));
    assert_eq!(e.stats().text_index_backlog_parts, 1);
    check(&e, &[], &logs).unwrap();
    // Not tried again while the engine runs, even once it could be.
    std::fs::remove_dir_all(&blocker).unwrap();
    assert!(e.index_text().is_err());
    e.close().unwrap();
    drop(e);
    let e = Engine::open(options(dir.path())).unwrap();
    assert_eq!(e.index_text().unwrap(), 1);
    assert!(e.faults().is_empty(), "{:?}", e.faults());
    check(&e, &[], &logs).unwrap();
}

/// A hot tier left half full when ingest stops is frozen only at its age
/// limit: the backlog is indexed meanwhile, not held back waiting for it.
#[test]
fn a_half_full_hot_tier_holds_the_backlog_back_only_while_ingest_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<LogRecord> = (0..400).map(|i| log(i, (i % 4) as u8)).collect();
    let e = Engine::open(options(dir.path())).unwrap();
    e.ingest_logs(logs[..200].to_vec()).unwrap();
    e.flush().unwrap();
    e.ingest_logs(logs[200..].to_vec()).unwrap();
    let hot = e.stats().hot_bytes as usize;
    // Dropped unclosed: the second batch stays in the WAL, and comes back
    // into the hot tier when the engine opens again.
    drop(e);
    let mut o = options(dir.path());
    o.background = true;
    o.hot_max_bytes = hot * 3 / 2;
    o.hot_max_age = std::time::Duration::from_secs(3600);
    let e = Engine::open(o).unwrap();
    let st = e.stats();
    assert_eq!((st.hot_records, st.text_index_backlog_parts), (200, 1), "{st:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while e.stats().text_index_backlog_parts > 0 {
        assert!(std::time::Instant::now() < deadline, "held back: {:?}", e.stats());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let st = e.stats();
    assert_eq!(
        (st.hot_records, st.frozen_tiers),
        (200, 0),
        "the tier was not frozen: {st:?}"
    );
    check(&e, &[], &logs).unwrap();
}
