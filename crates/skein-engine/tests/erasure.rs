//! Erasure in the engine: matching records leave every query path and
//! every part (rewritten or dropped), other records stay, payloads only the
//! erased records held are collected while shared ones stay, the receipt's
//! digest and files verify offline, and a tampered receipt does not.

use std::path::Path;
use std::sync::Arc;

use skein_engine::erasure::{ErasureCriteria, verify_erasure};
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, LogQuery, SpanQuery, TextQuery};
use skein_model::{AnyValue, KeyValue, LogRecord, Resource, Span, SpanId, TraceId};

const T0: u64 = skein_engine::testdata::END_NS;

fn opts(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.payloads.threshold = 64;
    o
}

fn spans(trace: u128, user: &str, n: u64) -> Vec<Span> {
    (0..n)
        .map(|i| Span {
            trace_id: TraceId::from_u128(trace),
            span_id: SpanId((trace as u64 * 1000 + i + 1).to_be_bytes()),
            name: "op".into(),
            start_time_unix_nano: T0 + i * 1_000,
            end_time_unix_nano: T0 + i * 1_000 + 10,
            attributes: vec![
                KeyValue::new("user.id", user),
                KeyValue::new("prompt", format!("prompt of {user} number {i} ").repeat(10)),
                KeyValue::new("shared", "the same long system prompt for everyone ".repeat(5)),
            ],
            resource: Arc::new(Resource::with_service("svc")),
            ..Default::default()
        })
        .collect()
}

fn logs(trace: u128, user: &str, n: u64) -> Vec<LogRecord> {
    (0..n)
        .map(|i| LogRecord {
            time_unix_nano: T0 + i,
            observed_time_unix_nano: T0 + i,
            severity_number: 9,
            body: AnyValue::Str(format!("hello from {user} {i}")),
            attributes: vec![KeyValue::new("user.id", user)],
            trace_id: Some(TraceId::from_u128(trace)),
            resource: Arc::new(Resource::with_service("svc")),
            ..Default::default()
        })
        .collect()
}

fn by_user(e: &Engine, user: &str) -> (usize, usize) {
    let attributes = vec![AttrFilter::eq(AttrScope::Record, "user.id", user)];
    let s = e
        .search_spans(&SpanQuery {
            attributes: attributes.clone(),
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    let l = e
        .search_logs(&LogQuery {
            attributes,
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    (s.records.len(), l.records.len())
}

#[test]
fn erasure_removes_matches_everywhere_and_its_receipt_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    // Part 1: both users; part 2: only the erased one (dropped whole); hot
    // tier: both again.
    let mut a = spans(1, "u123", 5);
    a.extend(spans(2, "u999", 5));
    e.ingest_spans(a).unwrap();
    e.ingest_logs([logs(1, "u123", 3), logs(2, "u999", 3)].concat())
        .unwrap();
    e.flush().unwrap();
    e.ingest_spans(spans(3, "u123", 4)).unwrap();
    e.flush().unwrap();
    e.ingest_spans([spans(4, "u123", 2), spans(5, "u999", 2)].concat())
        .unwrap();
    assert_eq!(by_user(&e, "u123"), (11, 3));
    assert_eq!(by_user(&e, "u999"), (7, 3));

    let receipt = e
        .erase(ErasureCriteria {
            attributes: [("user.id".to_string(), "u123".to_string())].into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(receipt.status, "completed");
    assert_eq!((receipt.counts.spans, receipt.counts.logs), (11, 3));
    assert!(receipt.pending_criteria.is_none());
    assert!(
        receipt.files_rewritten.iter().any(|f| f.written.is_none()),
        "{receipt:?}"
    );
    assert!(
        receipt.files_rewritten.iter().any(|f| f.written.is_some()),
        "{receipt:?}"
    );
    // Payloads are content-addressed: the erased user's 11 spans hold 5
    // distinct prompts ("number 0" to "number 4"), and the shared prompt
    // stays (the other user's spans still hold it).
    assert_eq!(receipt.payloads_removed, 5, "{receipt:?}");
    assert_eq!(e.erasure(&receipt.id).unwrap().as_ref(), Some(&receipt));

    assert_eq!(by_user(&e, "u123"), (0, 0));
    assert_eq!(by_user(&e, "u999"), (7, 3));
    for t in [1u128, 3, 4] {
        assert!(e.get_trace(TraceId::from_u128(t)).unwrap().spans.is_empty());
    }
    assert_eq!(e.get_trace(TraceId::from_u128(2)).unwrap().spans.len(), 5);
    let text = |q: &str| {
        e.search_spans(&SpanQuery {
            text: Some(TextQuery::parse(q).unwrap()),
            limit: 100,
            ..Default::default()
        })
        .unwrap()
        .records
        .len()
    };
    assert_eq!(text("u123"), 0);
    assert_eq!(text("u999"), 7);
    // The shared payload stays readable for the records kept.
    let kept = e.get_trace(TraceId::from_u128(2)).unwrap().spans;
    let inlined = e.inline_payloads(&*kept[0]).unwrap();
    let shared = inlined.attributes.iter().find(|kv| kv.key == "shared").unwrap();
    assert!(matches!(&shared.value, AnyValue::Str(s) if s.starts_with("the same long")));

    let v = verify_erasure(dir.path(), &receipt.id, None).unwrap();
    assert!(v.ok, "{v:?}");
    assert!(v.parts_scanned >= 2 && v.files_checked >= 1, "{v:?}");

    // Records ingested after the erasure are not touched by it, and the
    // offline check sees them (it can fail).
    e.ingest_spans(spans(6, "u123", 1)).unwrap();
    e.flush().unwrap();
    let v = verify_erasure(dir.path(), &receipt.id, None).unwrap();
    assert!(!v.ok && !v.matching_records.is_empty(), "{v:?}");

    // Reopening keeps the receipt; nothing is pending.
    drop(e);
    let e = Engine::open(opts(dir.path())).unwrap();
    assert_eq!(e.erasure(&receipt.id).unwrap().unwrap().status, "completed");
    assert!(e.erasure("e0000000000000000").unwrap().is_none());
    assert!(e.erasure("../x").is_err());
    assert!(e.erase(ErasureCriteria::default()).is_err());
}

/// A query running while an erasure rewrites part after part sees all of
/// the matching records or none of them: every rewrite and drop takes
/// effect in one swap. (Were each part installed as it was rewritten, the
/// reader would see the count fall part by part.)
#[test]
fn matching_records_leave_every_answer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(Engine::open(opts(dir.path())).unwrap());
    const PARTS: u128 = 24;
    for p in 0..PARTS {
        // Each part holds both users (rewritten) or only the erased one
        // (dropped whole).
        e.ingest_spans(spans(100 + p, "gone", 5)).unwrap();
        e.ingest_logs(logs(100 + p, "gone", 3)).unwrap();
        if p % 3 != 0 {
            e.ingest_spans(spans(500 + p, "kept", 2)).unwrap();
        }
        e.flush().unwrap();
    }
    let all = (PARTS as usize * 5, PARTS as usize * 3);
    assert_eq!(by_user(&e, "gone"), all);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (e, done) = (e.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                seen.insert(by_user(&e, "gone").0);
            }
            seen
        })
    };
    let receipt = e
        .erase(ErasureCriteria {
            attributes: [("user.id".to_string(), "gone".to_string())].into(),
            ..Default::default()
        })
        .unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = reader.join().unwrap();
    assert!(
        seen.iter().all(|n| *n == all.0 || *n == 0),
        "a query saw a partly erased state: {seen:?}"
    );
    assert_eq!(by_user(&e, "gone"), (0, 0));
    assert_eq!(by_user(&e, "kept").0, (PARTS as usize - PARTS as usize / 3) * 2);
    assert_eq!(receipt.counts.spans, PARTS as u64 * 5);
    assert_eq!(receipt.files_rewritten.len(), PARTS as usize * 2, "{receipt:?}");
}

/// What the packs on disk hold, as anyone reading the disk would get it:
/// each pack's bytes and every frame of it decompressed.
fn pack_bytes(dir: &Path) -> Vec<u8> {
    use skein_engine::payload::pack;
    use skein_engine::storage::{LocalStore, PartStore};
    let store = LocalStore::open(&dir.join("parts"), &["payloads"]).unwrap();
    let mut all = Vec::new();
    for name in store.list("payloads").unwrap() {
        let src = store.open(&name).unwrap();
        all.extend(src.read_at(0, src.len() as usize).unwrap().as_ref());
        let index = pack::read_index(&*src, &name).unwrap();
        let dictionary = index
            .dictionary
            .map(|d| pack::read_dictionary(&*src, d, &name).unwrap());
        let mut frames: Vec<_> = index.entries.iter().map(|e| (e.frame.offset, e)).collect();
        frames.sort_unstable_by_key(|(offset, _)| *offset);
        frames.dedup_by_key(|(offset, _)| *offset);
        for (_, e) in frames {
            all.extend(pack::read_frame(&*src, e, dictionary.as_ref(), &name).unwrap());
        }
    }
    all
}

/// Payloads are compressed together in frames, which go into packs as
/// they are: an erasure rewrites the packs holding erased payloads, the
/// payloads kept framed anew, so no byte of the erased text is left on
/// disk, in the clear or compressed.
#[test]
fn erased_text_leaves_no_trace_in_a_pack() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(opts(dir.path())).unwrap();
    let secret = "the private medical history of patient u123 ";
    let system: String = (0..60)
        .map(|k| {
            format!(
                "Rule {k}: check tool {} before answering about topic {}. ",
                k * 37 % 101,
                k * k % 97
            )
        })
        .collect();
    let prompts = |trace: u128, user: &str, extra: &str| -> Vec<Span> {
        let mut s = spans(trace, user, 120);
        for (i, span) in s.iter_mut().enumerate() {
            span.attributes[1].value = AnyValue::Str(format!("{}{system}turn {i} of {user}", extra.repeat(8)));
        }
        s
    };
    e.ingest_spans([prompts(1, "u123", secret), prompts(2, "u999", "")].concat())
        .unwrap();
    e.flush().unwrap();
    let find = |hay: &[u8], text: &str| hay.windows(text.len()).any(|w| w == text.as_bytes());
    assert!(find(&pack_bytes(dir.path()), secret), "the pack holds the text");
    let receipt = e
        .erase(ErasureCriteria {
            attributes: [("user.id".to_string(), "u123".to_string())].into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(receipt.payloads_removed, 120, "{receipt:?}");
    assert!(!find(&pack_bytes(dir.path()), secret), "erased text is still in a pack");
    // Erased while hot: the erasure flushes the tier first, so the
    // batch's frame, which holds the kept user's payloads too, reaches a
    // pack as it is, and the pack's rewrite must frame those anew.
    let hot_secret = "the hot private note of patient u123 ";
    e.ingest_spans([prompts(3, "u123", hot_secret), prompts(4, "u999", "")].concat())
        .unwrap();
    e.erase(ErasureCriteria {
        attributes: [("user.id".to_string(), "u123".to_string())].into(),
        ..Default::default()
    })
    .unwrap();
    e.flush().unwrap();
    assert!(
        !find(&pack_bytes(dir.path()), hot_secret),
        "erased hot text reached a pack"
    );
    // What the other user's spans refer to reads back whole.
    let kept = e.get_trace(TraceId::from_u128(2)).unwrap().spans;
    assert_eq!(kept.len(), 120);
    let kept_hot = e.get_trace(TraceId::from_u128(4)).unwrap().spans;
    assert_eq!(kept_hot.len(), 120);
    for s in kept.iter().chain(&kept_hot) {
        let inlined = e.inline_payloads(&**s).unwrap();
        let AnyValue::Str(prompt) = &inlined.attributes[1].value else {
            panic!("{:?}", inlined.attributes[1])
        };
        assert!(prompt.starts_with(&system) && prompt.contains("of u999"), "{prompt}");
    }
}
