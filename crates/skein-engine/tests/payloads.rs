//! The payload store through the engine: big and GenAI content values are
//! stored once, come back byte-identical from every tier (hot, replayed
//! WAL, flushed parts, compacted parts), and damage is never returned as
//! valid.

use std::path::Path;

use proptest::prelude::*;
use skein_engine::payload::as_ref_value;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, LogQuery, PayloadRef, SpanQuery};
use skein_model::corpus::Corpus;
use skein_model::{AnyValue, KeyValue, LogRecord, Span};

const END_NS: u64 = skein_engine::testdata::END_NS;

fn opts(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn all_spans(e: &Engine) -> Vec<Span> {
    let q = SpanQuery {
        limit: 100_000,
        ..Default::default()
    };
    let mut v: Vec<Span> = e
        .search_spans(&q)
        .unwrap()
        .records
        .iter()
        .map(|s| (**s).clone())
        .collect();
    v.sort_by_key(|s| (s.trace_id, s.span_id));
    v
}

fn attr<'a>(s: &'a Span, key: &str) -> Option<&'a AnyValue> {
    s.attributes.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

/// 10,000 LLM spans sharing one 20 KiB system prompt store it once: in the
/// WAL (only the first batch carries it) and in the packs on disk.
#[test]
fn a_shared_prompt_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let system: String = (0..20 * 1024).map(|i| (b'a' + (i * 7 % 26) as u8) as char).collect();
    let corpus = Corpus::with_shape(1000, 10, 5, 5, END_NS);
    for i in 0..10 {
        let mut spans = corpus.spans(i * 100..(i + 1) * 100);
        for s in &mut spans {
            s.attributes
                .push(KeyValue::new("gen_ai.system_instructions", system.clone()));
        }
        e.ingest_spans(spans).unwrap();
    }
    let st = e.stats();
    assert_eq!(st.spans, 10_000);
    assert_eq!(
        (st.payloads.payloads, st.payloads.payload_logical_bytes),
        (1, 20 * 1024)
    );
    assert!(
        st.wal_bytes < 4 * 1024 * 1024,
        "the WAL holds the prompt once: {} bytes",
        st.wal_bytes
    );
    e.flush().unwrap();
    e.compact().unwrap();
    let on_disk = dir_bytes(&dir.path().join("parts/payloads"));
    assert!(
        on_disk > 0 && on_disk < 20 * 1024,
        "payload store holds {on_disk} bytes"
    );
    let st = e.stats();
    assert_eq!((st.payloads.payloads, st.payloads.payload_packs), (1, 1));
    // Every span refers to it, and it reads back whole.
    let spans = all_spans(&e);
    assert_eq!(spans.len(), 10_000);
    let id = PayloadRef::of(system.as_bytes());
    for s in &spans {
        assert_eq!(
            as_ref_value(attr(s, "gen_ai.system_instructions").unwrap()),
            Some((id, 20 * 1024))
        );
    }
    assert_eq!(e.payload(&id).unwrap().unwrap(), system.as_bytes());
    // An equality filter on the value still finds the spans that carry it.
    let by_value = |v: &str| {
        e.search_spans(&SpanQuery {
            attributes: vec![AttrFilter::eq(AttrScope::Record, "gen_ai.system_instructions", v)],
            limit: 100,
            ..Default::default()
        })
        .unwrap()
        .records
        .len()
    };
    assert_eq!(by_value(&system), 100);
    assert_eq!(by_value(&system[1..]), 0);
    assert_eq!(by_value(&format!("{}!", &system[1..])), 0, "same length, other bytes");
    let inlined = e.inline_payloads(&spans[0]).unwrap();
    assert_eq!(
        attr(&inlined, "gen_ai.system_instructions").unwrap().as_str(),
        Some(system.as_str())
    );
}

/// A pack whose bytes were damaged is an error naming the payload and the
/// pack, never returned as valid; a payload nobody stored is `None`.
#[test]
fn a_damaged_pack_is_an_error_naming_the_payload() {
    let dir = tempfile::tempdir().unwrap();
    let body = "stack frame\n".repeat(1000);
    let id = PayloadRef::of(body.as_bytes());
    {
        let e = Engine::open(opts(dir.path())).unwrap();
        let mut logs = skein_engine::testdata::logs(1);
        logs[0].body = AnyValue::Str(body.clone());
        e.ingest_logs(logs).unwrap();
        e.close().unwrap();
    }
    let packs = dir.path().join("parts/payloads");
    let pack = std::fs::read_dir(&packs).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[3] ^= 0x10;
    std::fs::write(&pack, &bytes).unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    assert!(e.faults().is_empty());
    let err = e.payload(&id).unwrap_err().to_string();
    assert!(err.contains(&id.to_string()) && err.contains(".pack"), "{err}");
    // The engine says it is degraded (writes go on), naming the damage.
    let faults = e.faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].kind, skein_engine::FaultKind::Payload);
    assert!(faults[0].kind.degrades_only());
    assert_eq!(faults[0].message, err);
    assert!(e.payload(&PayloadRef::of(b"never stored")).unwrap().is_none());
    // The log itself still reads, with its reference.
    let _ = e
        .search_logs(&LogQuery {
            body_contains: Some("frame".into()),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    let logs = e
        .search_logs(&LogQuery {
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(as_ref_value(&logs.records[0].body), Some((id, body.len() as u64)));
}

/// A substring search reads a body stored as a payload in its own text,
/// wherever the match is, in every tier.
#[test]
fn body_search_reads_payload_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let mut logs = skein_engine::testdata::logs(3);
    let deep = format!(
        "{}  at com.example.PoolTimeoutException\n",
        "  at frame.Line\n".repeat(500)
    );
    logs[0].body = AnyValue::Str(deep.clone());
    e.ingest_logs(logs).unwrap();
    let find = |needle: &str| {
        e.search_logs(&LogQuery {
            body_contains: Some(needle.into()),
            limit: 10,
            ..Default::default()
        })
        .unwrap()
        .records
        .len()
    };
    for tier in ["hot", "part"] {
        assert!(
            as_ref_value(
                &e.search_logs(&LogQuery {
                    limit: 10,
                    ..Default::default()
                })
                .unwrap()
                .records
                .iter()
                .find(|l| as_ref_value(&l.body).is_some())
                .unwrap()
                .body
            )
            .is_some()
        );
        assert_eq!(find("pooltimeoutexception"), 1, "{tier}: past the preview");
        assert_eq!(find("no such words"), 0, "{tier}");
        e.flush().unwrap();
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        // Sizes across the thresholds, up to 5 MiB (a few large ones).
        (0usize..6000).prop_map(|n| "é,x\u{0}\n".chars().cycle().take(n).collect()),
        prop::collection::vec(any::<char>(), 0..400).prop_map(|c| c.into_iter().collect()),
        prop::sample::select(vec![4112usize, 65536, 5 << 20]).prop_map(|n| "0123456789abcdef".repeat(n / 16)),
    ]
}

/// Strings (UTF-8) and bytes (binary, not valid UTF-8 at all), across the
/// thresholds.
fn value() -> impl Strategy<Value = AnyValue> {
    prop_oneof![
        3 => text().prop_map(AnyValue::Str),
        1 => (0usize..9000).prop_map(|n| AnyValue::Bytes((0..n).map(|i| (i * 131 % 251) as u8 | 0x80).collect())),
        1 => prop::sample::select(vec![4097usize, 5 << 20]).prop_map(|n| AnyValue::Bytes(vec![0xff; n])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Every value comes back byte-identical, whatever tier holds it:
    /// the hot tier, the hot tier rebuilt by WAL replay, a flushed part
    /// and a compacted one.
    #[test]
    fn payloads_come_back_byte_identical(values in prop::collection::vec(value(), 1..6), content in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let corpus = Corpus::with_shape(values.len() as u64, 2, 2, 2, END_NS);
        let key = if content { "gen_ai.output.messages" } else { "app.blob" };
        let mut spans = corpus.spans(0..values.len() as u64);
        let mut logs: Vec<LogRecord> = skein_engine::testdata::logs(values.len());
        for (i, v) in values.iter().enumerate() {
            spans[i * 2].attributes.push(KeyValue::new(key, v.clone()));
            logs[i].body = v.clone();
        }
        let mut want_spans = spans.clone();
        want_spans.sort_by_key(|s| (s.trace_id, s.span_id));
        let check = |e: &Engine| {
            let got: Vec<Span> = all_spans(e).iter().map(|s| e.inline_payloads(s).unwrap()).collect();
            assert_eq!(got, want_spans);
            let key = |v: &AnyValue| format!("{v:?}");
            let mut bodies: Vec<AnyValue> = e
                .search_logs(&LogQuery { limit: 1000, ..Default::default() })
                .unwrap()
                .records
                .iter()
                .map(|l| e.inline_payloads(&**l).unwrap().body)
                .collect();
            bodies.sort_by_key(key);
            let mut want: Vec<AnyValue> = values.clone();
            want.sort_by_key(key);
            assert!(bodies == want, "log bodies differ");
        };
        {
            let e = Engine::open(opts(dir.path())).unwrap();
            e.ingest_spans(spans.clone()).unwrap();
            e.ingest_logs(logs.clone()).unwrap();
            check(&e);
            // Dropped without a flush: the next open replays the WAL.
        }
        let e = Engine::open(opts(dir.path())).unwrap();
        check(&e);
        e.flush().unwrap();
        check(&e);
        // Again, so that compaction has two parts to merge.
        e.ingest_spans(spans).unwrap();
        e.flush().unwrap();
        e.compact().unwrap();
        check(&e);
        drop(e);
        check(&Engine::open(opts(dir.path())).unwrap());
    }
}

/// Every payload reference of every stored record resolves.
fn assert_all_refs_resolve(e: &Engine) -> usize {
    let mut n = 0;
    for s in all_spans(e) {
        for kv in &s.attributes {
            if let Some((id, len)) = as_ref_value(&kv.value) {
                let bytes = e
                    .payload(&id)
                    .unwrap()
                    .unwrap_or_else(|| panic!("{id} is referenced but gone"));
                assert_eq!(bytes.len() as u64, len);
                n += 1;
            }
        }
    }
    n
}

/// A payload no record refers to any more (its span was re-ingested with
/// other content and a merge dropped the old version) is forgotten, and
/// the pack holding only it is deleted; what is referenced stays, across a
/// restart too.
#[test]
fn garbage_collection_forgets_unreferenced_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(1, 2, 1, 1, END_NS);
    let (old, new) = ("old prompt ".repeat(100), "new prompt ".repeat(100));
    let with = |text: &str| {
        let mut spans = corpus.spans(0..1);
        spans[0]
            .attributes
            .push(KeyValue::new("gen_ai.prompt", text.to_string()));
        spans
    };
    {
        let e = Engine::open(opts(dir.path())).unwrap();
        e.ingest_spans(with(&old)).unwrap();
        e.flush().unwrap();
        e.ingest_spans(with(&new)).unwrap();
        e.flush().unwrap();
        assert_eq!(e.stats().payloads.payloads, 2);
        // Both versions are in parts: nothing is garbage yet.
        assert_eq!(e.collect_payload_garbage().unwrap().removed, 0);
        e.compact().unwrap();
        let report = e.collect_payload_garbage().unwrap();
        assert_eq!((report.removed, report.packs_deleted), (1, 1), "{report:?}");
        assert!(report.bytes_freed > 0);
        assert!(e.payload(&PayloadRef::of(old.as_bytes())).unwrap().is_none());
        assert_eq!(
            e.payload(&PayloadRef::of(new.as_bytes())).unwrap().unwrap(),
            new.as_bytes()
        );
        assert_eq!(e.stats().payloads.payloads, 1);
        assert_eq!(assert_all_refs_resolve(&e), 1);
        // Again: nothing more to do.
        assert_eq!(e.collect_payload_garbage().unwrap(), Default::default());
    }
    let packs = std::fs::read_dir(dir.path().join("parts/payloads")).unwrap().count();
    assert_eq!(packs, 1, "the pack of the forgotten payload is gone from disk");
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(e.stats().payloads.payloads, 1);
    assert_eq!(assert_all_refs_resolve(&e), 1);
}

/// Collections racing ingests that bring the same payloads (known ones,
/// referenced without their bytes) never forget one that a stored record
/// refers to.
#[test]
fn garbage_collection_never_forgets_what_concurrent_ingest_refers_to() {
    let dir = tempfile::tempdir().unwrap();
    let e = std::sync::Arc::new(Engine::open(opts(dir.path())).unwrap());
    let corpus = Corpus::with_shape(400, 2, 2, 2, END_NS);
    let prompts: Vec<String> = (0..4).map(|i| format!("system prompt {i} ").repeat(40)).collect();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (e, prompts) = (e.clone(), prompts.clone());
            let corpus = corpus.clone();
            std::thread::spawn(move || {
                for round in 0..300u64 {
                    // Re-ingests the same spans with another prompt: old
                    // versions become garbage once merged away.
                    let first = (round * 2 + w) % 400;
                    let mut spans = corpus.spans(first..first + 1);
                    for s in &mut spans {
                        let p = &prompts[((round + w) % 4) as usize];
                        s.attributes
                            .push(KeyValue::new("gen_ai.prompt", format!("{p}{}", round % 7)));
                    }
                    e.ingest_spans(spans).unwrap();
                }
            })
        })
        .collect();
    let mut collections = 0;
    while collections < 3 || !writers.iter().all(|w| w.is_finished()) {
        e.flush().unwrap();
        e.compact().unwrap();
        e.collect_payload_garbage().unwrap();
        assert_all_refs_resolve(&e);
        collections += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    e.flush().unwrap();
    e.compact().unwrap();
    e.collect_payload_garbage().unwrap();
    assert!(assert_all_refs_resolve(&e) > 0);
    drop(e);
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_all_refs_resolve(&e);
}
