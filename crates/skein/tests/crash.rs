//! Crash safety, end to end: writers stream batches into `skein serve`, the
//! process is SIGKILLed at random moments (mid-write, mid-flush,
//! mid-compaction), restarted, and every acknowledged span must be present
//! exactly once — and nothing else: a batch in flight at the kill is all
//! there or not at all. Every span carries a prompt stored as a payload
//! (a few shared ones), and writers re-send earlier batches with another
//! prompt, so merges leave payloads unreferenced and kills land in payload
//! garbage collection too: every payload a stored span refers to must
//! still be readable.

mod common;

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Server;
use prost::Message;
use skein_model::corpus::{Corpus, Rng};
use skein_model::otlp::spans_to_otlp;

const SPANS_PER_TRACE: u64 = 10;
const TRACES_PER_BATCH: u64 = 8;

#[derive(Default)]
struct Ledger {
    acked: BTreeSet<u64>,
    in_flight: BTreeSet<u64>,
    /// Spans sent again (acknowledged): until a merge drops their older
    /// versions, each may be stored twice.
    resent_spans: u64,
}

/// Prompts shared by many spans (each over 256 bytes: a payload).
fn prompt(batch: u64, version: u64) -> String {
    format!("You are agent {} (version {version}). ", batch % 3).repeat(12)
}

/// The spans of `batch` with its prompt of `version`.
fn batch_spans(c: &Corpus, batch: u64, version: u64) -> Vec<skein_model::Span> {
    let mut spans = c.spans(batch * TRACES_PER_BATCH..(batch + 1) * TRACES_PER_BATCH);
    for s in &mut spans {
        s.attributes.push(skein_model::KeyValue::new(
            "gen_ai.system_instructions",
            prompt(batch, version),
        ));
    }
    spans
}

/// Calls `f` with every span the server returns, paging through search.
fn each_stored_span(s: &Server, mut f: impl FnMut(&serde_json::Value)) {
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/api/v1/spans?limit=10000".to_string();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let v = s.get_json(&path);
        v["spans"].as_array().unwrap().iter().for_each(&mut f);
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return,
        }
    }
}

/// Every distinct payload reference of the stored spans.
fn stored_refs(s: &Server) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    each_stored_span(s, |sp| {
        let r = &sp["attributes"]["gen_ai.system_instructions"]["$payload"];
        out.insert(
            r.as_str()
                .unwrap_or_else(|| panic!("no payload reference in {sp}"))
                .to_string(),
        );
    });
    out
}

/// All (trace, span) ids the server returns.
fn stored_ids(s: &Server) -> Vec<(String, String)> {
    let mut out = Vec::new();
    each_stored_span(s, |sp| {
        out.push((
            sp["trace_id"].as_str().unwrap().to_string(),
            sp["span_id"].as_str().unwrap().to_string(),
        ))
    });
    out
}

fn batch_ids(c: &Corpus, batch: u64) -> Vec<(String, String)> {
    c.spans(batch * TRACES_PER_BATCH..(batch + 1) * TRACES_PER_BATCH)
        .iter()
        .map(|s| (s.trace_id.to_hex(), s.span_id.to_hex()))
        .collect()
}

#[test]
fn sigkill_at_random_points_loses_no_acknowledged_span() {
    let iterations: u64 = std::env::var("SKEIN_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("SKEIN_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xC0FFEE);
    eprintln!("crash test: {iterations} iterations, seed {seed} (SKEIN_CRASH_SEED to replay)");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A small hot tier flushes every few batches, so kills land in flushes
    // and (every 4 flushes) compactions too.
    let mut server = Server::start(&data, &["--hot-max-bytes", "200KiB"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let corpus = Arc::new(Corpus::with_shape(10_000_000, SPANS_PER_TRACE, 6, 10, now));
    let next_batch = Arc::new(AtomicU64::new(0));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    for iteration in 0..iterations {
        let stop = Arc::new(AtomicBool::new(false));
        let url = format!("{}/v1/traces", server.otlp_http);
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (stop, url, corpus, next_batch, ledger) = (
                    stop.clone(),
                    url.clone(),
                    corpus.clone(),
                    next_batch.clone(),
                    ledger.clone(),
                );
                std::thread::spawn(move || {
                    let http = reqwest::blocking::Client::builder()
                        .timeout(Duration::from_secs(10))
                        .build()
                        .unwrap();
                    let mut sent = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        sent += 1;
                        // Every 16th request re-sends an acknowledged batch
                        // with its next prompt: the same spans, so the old
                        // prompt becomes garbage once merged away.
                        let resend = sent
                            .is_multiple_of(16)
                            .then(|| ledger.lock().unwrap().acked.iter().next_back().copied());
                        if let Some(Some(b)) = resend {
                            let body = spans_to_otlp(&batch_spans(&corpus, b, sent)).encode_to_vec();
                            let ok = http
                                .post(&url)
                                .header("content-type", "application/x-protobuf")
                                .body(body)
                                .send()
                                .is_ok_and(|r| r.status().is_success());
                            if !ok {
                                return;
                            }
                            ledger.lock().unwrap().resent_spans += TRACES_PER_BATCH * SPANS_PER_TRACE;
                            continue;
                        }
                        let b = next_batch.fetch_add(1, Ordering::SeqCst);
                        let body = spans_to_otlp(&batch_spans(&corpus, b, 0)).encode_to_vec();
                        ledger.lock().unwrap().in_flight.insert(b);
                        let ok = http
                            .post(&url)
                            .header("content-type", "application/x-protobuf")
                            .body(body)
                            .send()
                            .map(|r| r.status().is_success())
                            .unwrap_or(false);
                        let mut l = ledger.lock().unwrap();
                        if ok {
                            l.in_flight.remove(&b);
                            l.acked.insert(b);
                        } else {
                            // Killed mid-request: outcome unknown, stays in flight.
                            return;
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50 + rng.below(700)));
        server.kill();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        server.restart();

        let stored = stored_ids(&server);
        let stored_set: HashSet<(String, String)> = stored.iter().cloned().collect();
        assert_eq!(
            stored.len(),
            stored_set.len(),
            "iteration {iteration}: a span is returned twice"
        );
        let l = ledger.lock().unwrap();
        let mut expected: HashSet<(String, String)> = HashSet::new();
        for b in &l.acked {
            for id in batch_ids(&corpus, *b) {
                assert!(
                    stored_set.contains(&id),
                    "iteration {iteration}: acknowledged batch {b} lost span {id:?}\n{}",
                    server.log_text()
                );
                expected.insert(id);
            }
        }
        for b in &l.in_flight {
            let ids = batch_ids(&corpus, *b);
            let present = ids.iter().filter(|id| stored_set.contains(*id)).count();
            assert!(
                present == 0 || present == ids.len(),
                "iteration {iteration}: in-flight batch {b} is partly stored ({present}/{})",
                ids.len()
            );
            expected.extend(ids.into_iter().filter(|id| stored_set.contains(id)));
        }
        assert_eq!(
            stored_set, expected,
            "iteration {iteration}: spans nobody sent are stored"
        );
        // Every payload a stored span refers to is still there.
        let http = reqwest::blocking::Client::new();
        for r in stored_refs(&server) {
            let got = http.get(format!("{}/api/v1/payloads/{r}", server.api)).send().unwrap();
            assert_eq!(
                got.status(),
                200,
                "iteration {iteration}: payload {r} is referenced but gone\n{}",
                server.log_text()
            );
        }
        // No physical duplicates either (replaying what a part already
        // holds): beyond the stored spans, only older versions of re-sent
        // ones that no merge has dropped yet.
        let stats = server.get_json("/api/v1/stats");
        let physical = stats["spans"].as_u64().unwrap();
        let stored_n = stored.len() as u64;
        assert!(
            physical >= stored_n && physical <= stored_n + l.resent_spans,
            "iteration {iteration}: {physical} spans stored for {stored_n} distinct ({} re-sent): {stats}",
            l.resent_spans
        );
        eprintln!(
            "iteration {iteration}: {} spans, {} acked batches, {} in flight, parts {}",
            stored.len(),
            l.acked.len(),
            l.in_flight.len(),
            stats["parts"]
        );
    }
    let final_stats = server.get_json("/api/v1/stats");
    assert!(final_stats["flushes"].as_u64().unwrap() > 0 || final_stats["parts"].as_u64().unwrap() > 0);
}
