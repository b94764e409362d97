//! Faults that need an operator: flushes and merges that fail (here because
//! a directory of parts or payload packs was replaced by a file, which
//! fails for root too, unlike a permission), and how they show and clear.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skein_engine::{Engine, EngineOptions, Error, FaultKind, SpanQuery};
use skein_model::corpus::Corpus;

const END_NS: u64 = skein_engine::testdata::END_NS;

/// Replaces `DATA/parts/<name>` with a regular file until dropped.
struct BrokenDir {
    dir: PathBuf,
    aside: PathBuf,
}

impl BrokenDir {
    fn new(data: &Path, name: &str) -> BrokenDir {
        let dir = data.join("parts").join(name);
        let aside = data.join(format!("{name}.aside"));
        std::fs::rename(&dir, &aside).unwrap();
        std::fs::write(&dir, b"not a directory").unwrap();
        BrokenDir { dir, aside }
    }
}

impl Drop for BrokenDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.dir);
        let _ = std::fs::rename(&self.aside, &self.dir);
    }
}

fn kinds(e: &Engine) -> Vec<FaultKind> {
    e.faults().iter().map(|f| f.kind).collect()
}

#[test]
fn failed_flushes_and_merges_are_faults_until_they_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(40, 5, 3, 5, END_NS);
    let mut o = EngineOptions::new(dir.path());
    o.background = false;
    let e = Engine::open(o).unwrap();
    for i in 0..2 {
        e.ingest_spans(corpus.spans(i * 10..(i + 1) * 10)).unwrap();
        e.flush().unwrap();
    }
    assert!(e.faults().is_empty());
    assert_eq!(e.stats().failures["flush"], 0);

    let broken = BrokenDir::new(dir.path(), "spans");
    let err = e.compact().unwrap_err();
    assert_eq!(kinds(&e), [FaultKind::Compaction], "{err}");
    e.ingest_spans(corpus.spans(20..30)).unwrap();
    let err = e.flush().unwrap_err();
    let faults = e.faults();
    assert_eq!(kinds(&e), [FaultKind::Flush, FaultKind::Compaction], "{err}");
    let flush = &faults[0];
    assert_eq!(flush.failures, 1);
    assert!(
        flush.message.contains("spans"),
        "the message names the place: {}",
        flush.message
    );
    assert_eq!(flush.message, err.to_string());
    let stats = e.stats();
    assert_eq!(stats.faults, faults, "stats carry the faults");
    assert_eq!((stats.failures["flush"], stats.failures["compaction"]), (1, 1));
    // Nothing was lost: the unflushed spans are still in the hot tier.
    let all = SpanQuery {
        limit: 10_000,
        ..Default::default()
    };
    assert_eq!(e.search_spans(&all).unwrap().records.len(), 150);

    drop(broken);
    e.flush().unwrap();
    assert_eq!(
        kinds(&e),
        [FaultKind::Compaction],
        "a flush that succeeds ends the flush fault"
    );
    e.compact().unwrap();
    assert!(e.faults().is_empty(), "{:?}", e.faults());
    assert_eq!(e.stats().failures["flush"], 1, "totals keep past failures");
    assert_eq!(e.search_spans(&all).unwrap().records.len(), 150);
}

/// With flushes failing and the frozen tiers full, ingest refuses with the
/// typed error (a 503 to clients) instead of holding requests or growing
/// memory past its bound; it resumes once flushes succeed.
#[test]
fn ingest_refuses_while_failing_flushes_leave_no_room() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(400, 5, 3, 5, END_NS);
    let mut o = EngineOptions::new(dir.path());
    o.hot_max_bytes = 64 << 10;
    o.max_frozen = 1;
    o.compaction.enabled = false;
    let e = Engine::open(o).unwrap();
    let broken = BrokenDir::new(dir.path(), "spans");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut accepted = 0u64;
    let mut next = 0;
    let err = loop {
        assert!(
            Instant::now() < deadline,
            "ingest never refused; faults {:?}",
            e.faults()
        );
        match e.ingest_spans(corpus.spans(next..next + 10)) {
            Ok(r) => {
                accepted += r.accepted;
                next = (next + 10) % 400;
            }
            Err(err) => break err,
        }
    };
    let Error::Background { kind, reason } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*kind, FaultKind::Flush);
    assert!(err.is_unavailable());
    assert!(reason.contains("spans"), "{reason}");
    assert!(kinds(&e).contains(&FaultKind::Flush));

    drop(broken);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !e.faults().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the flush fault never cleared: {:?}",
            e.faults()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    accepted += e.ingest_spans(corpus.spans(0..10)).unwrap().accepted;
    assert!(accepted > 0);
}

/// A flush writes the tier's payload pack beside its parts; a part is
/// committed only once the pack is durable. With the pack failing, no part
/// may appear (it would refer to payloads a crash could lose): the spans
/// stay in the hot tier, and the next flush writes both.
#[test]
fn no_part_is_committed_before_its_payload_pack() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(40, 5, 3, 5, END_NS);
    let mut o = EngineOptions::new(dir.path());
    o.background = false;
    let e = Engine::open(o).unwrap();
    let prompt = |i: usize| {
        format!(
            "You are a careful agent. Request {i}: {}",
            "summarise the ticket ".repeat(40)
        )
    };
    let spans: Vec<_> = corpus
        .spans(0..10)
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            s.attributes
                .push(skein_model::KeyValue::new("gen_ai.input.messages", prompt(i)));
            s
        })
        .collect();
    e.ingest_spans(spans).unwrap();
    let span_parts = || {
        std::fs::read_dir(dir.path().join("parts").join("spans"))
            .unwrap()
            .filter(|f| f.as_ref().unwrap().file_name().to_string_lossy().ends_with(".parquet"))
            .count()
    };

    let broken = BrokenDir::new(dir.path(), "payloads");
    let err = e.flush().unwrap_err();
    assert_eq!(kinds(&e), [FaultKind::Flush], "{err}");
    assert!(err.to_string().contains("payloads"), "the error names the place: {err}");
    drop(broken);
    assert_eq!(span_parts(), 0, "a part was committed without its payloads' pack");
    let all = SpanQuery {
        limit: 10_000,
        ..Default::default()
    };
    assert_eq!(e.search_spans(&all).unwrap().records.len(), 50);

    e.flush().unwrap();
    assert!(e.faults().is_empty(), "{:?}", e.faults());
    assert_eq!(span_parts(), 1);
    assert_eq!(e.stats().payloads.payloads, 50);
    for i in 0..50 {
        let id = skein_engine::PayloadRef::of(prompt(i).as_bytes());
        assert_eq!(e.payload(&id).unwrap(), Some(prompt(i).into_bytes()));
    }
    assert_eq!(e.search_spans(&all).unwrap().records.len(), 50);
}
