//! Backups: taken while ingest, flushes and merges go on, they hold every
//! record acknowledged before they began; a restore answers the same; verify
//! names every damaged, missing or extra file; backups and restores refuse
//! places that are not empty.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use skein_engine::backup::{self, Location};
use skein_engine::{Engine, EngineOptions, LogQuery, Window};
use skein_model::TraceId;
use skein_model::corpus::Corpus;

const TRACES: u64 = 4000;
const PER_TRACE: u64 = 4;

fn corpus() -> Corpus {
    Corpus::with_shape(TRACES, PER_TRACE, 5, 10, skein_engine::testdata::END_NS)
}

fn open(dir: &Path, background: bool) -> Engine {
    let mut o = EngineOptions::new(dir);
    o.background = background;
    // Small tiers: many flushes and parts, so merges run during the backup.
    o.hot_max_bytes = 256 << 10;
    o.compaction.busy_max_parts = 3;
    o.compaction.idle_after = Duration::from_millis(50);
    Engine::open(o).unwrap()
}

fn dir_loc(p: &Path) -> Location {
    Location::Dir(p.to_path_buf())
}

/// A trace's spans as comparable values.
fn trace(e: &Engine, t: TraceId) -> Vec<skein_model::Span> {
    e.get_trace(t).unwrap().spans.iter().map(|s| (**s).clone()).collect()
}

#[test]
fn a_backup_during_ingest_restores_every_acknowledged_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, bk, restored) = (
        tmp.path().join("data"),
        tmp.path().join("bk"),
        tmp.path().join("restored"),
    );
    let engine = Arc::new(open(&data, true));
    let c = corpus();
    // Traces [0, acked) are acknowledged; the writer keeps going during the
    // backup, 20 traces a batch.
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    for t in (0..1000).step_by(20) {
        engine.ingest_spans(c.spans(t..t + 20)).unwrap();
        acked.store(t + 20, Ordering::SeqCst);
    }
    engine.ingest_logs(skein_engine::testdata::logs(500)).unwrap();
    let writer = {
        let (engine, acked, stop, c) = (engine.clone(), acked.clone(), stop.clone(), c.clone());
        std::thread::spawn(move || {
            let mut t = acked.load(Ordering::SeqCst);
            while !stop.load(Ordering::SeqCst) && t + 20 <= TRACES {
                engine.ingest_spans(c.spans(t..t + 20)).unwrap();
                t += 20;
                acked.store(t, Ordering::SeqCst);
            }
        })
    };
    while acked.load(Ordering::SeqCst) < 1500 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = acked.load(Ordering::SeqCst);
    let report = engine.backup(&dir_loc(&bk)).unwrap();
    let during = acked.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(report.files > 0 && report.bytes > 0, "{report:?}");
    assert!(
        during > before,
        "ingest went on during the backup ({before} → {during})"
    );

    let v = backup::verify(&dir_loc(&bk)).unwrap();
    assert!(v.backup && v.ok(), "{v:?}");
    assert_eq!(v.files_checked, report.files);

    let r = backup::restore(&dir_loc(&bk), &restored).unwrap();
    assert_eq!(r.files, report.files);
    assert!(!tmp.path().join("restored.restoring").exists());
    let back = open(&restored, false);
    for t in 0..before {
        let id = c.trace_id(t);
        let got = trace(&back, id);
        assert_eq!(
            got.len(),
            PER_TRACE as usize,
            "trace {t} of {before} acknowledged before the backup"
        );
        assert_eq!(got, trace(&engine, id), "trace {t} reads the same from the restore");
    }
    let logs = |e: &Engine| {
        e.search_logs(&LogQuery {
            window: Window::ALL,
            limit: 10_000,
            ..Default::default()
        })
        .unwrap()
        .records
        .len()
    };
    assert_eq!(logs(&back), 500);
    assert_eq!(logs(&back), logs(&engine));
    // Nothing but what was written by the time the backup finished.
    let st = back.stats();
    assert!(
        st.spans >= before * PER_TRACE && st.spans <= during * PER_TRACE,
        "{} spans",
        st.spans
    );
    drop(back);
    assert!(backup::verify(&dir_loc(&restored)).unwrap().ok());
    engine.close().unwrap();
}

#[test]
fn files_a_merge_replaces_during_a_backup_are_still_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, bk) = (tmp.path().join("data"), tmp.path().join("bk"));
    let engine = open(&data, false);
    let c = corpus();
    for t in (0..400).step_by(100) {
        engine.ingest_spans(c.spans(t..t + 100)).unwrap();
        engine.flush().unwrap();
    }
    assert_eq!(engine.stats().parts, 4);
    let mut merged = 0;
    engine
        .backup_with(&dir_loc(&bk), || merged = engine.compact().unwrap())
        .unwrap();
    assert!(
        merged > 0 && engine.stats().parts == 1,
        "the parts listed were merged away"
    );
    assert_eq!(
        files_ending(&data, ".parquet").len(),
        1,
        "and removed once the backup let go"
    );
    assert!(backup::verify(&dir_loc(&bk)).unwrap().ok());
    let restored = tmp.path().join("restored");
    backup::restore(&dir_loc(&bk), &restored).unwrap();
    let back = open(&restored, false);
    assert_eq!(back.stats().spans, 400 * PER_TRACE, "one copy of each span");
    for t in [0, 150, 399] {
        assert_eq!(trace(&back, c.trace_id(t)), trace(&engine, c.trace_id(t)));
    }
}

#[test]
fn places_that_are_not_empty_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, bk) = (tmp.path().join("data"), tmp.path().join("bk"));
    let engine = open(&data, false);
    engine.ingest_spans(corpus().spans(0..10)).unwrap();
    std::fs::create_dir_all(&bk).unwrap();
    std::fs::write(bk.join("notes.txt"), "mine").unwrap();
    let err = engine.backup(&dir_loc(&bk)).unwrap_err().to_string();
    assert!(err.contains("not empty") && err.contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read_dir(&bk).unwrap().count(), 1, "nothing written beside it");

    let good = tmp.path().join("good");
    engine.backup(&dir_loc(&good)).unwrap();
    let err = engine.backup(&dir_loc(&good)).unwrap_err().to_string();
    assert!(err.contains("not empty"), "a second backup into the first: {err}");

    let err = backup::restore(&dir_loc(&good), &data).unwrap_err().to_string();
    assert!(err.contains("not empty"), "restore over the live data: {err}");
    let err = backup::restore(&dir_loc(&bk), &tmp.path().join("new"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("manifest.json"), "a directory that is no backup: {err}");
    assert!(!tmp.path().join("new").exists());
    // An empty directory is a fine target.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    backup::restore(&dir_loc(&good), &empty).unwrap();
    assert_eq!(open(&empty, false).stats().spans, 10 * PER_TRACE);
}

/// Flips one byte in the middle of a file.
fn flip(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    let i = b.len() / 2;
    b[i] ^= 0x20;
    std::fs::write(path, b).unwrap();
}

fn files_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for sig in ["spans", "logs", "metrics", "payloads"] {
        let d = dir.join("parts").join(sig);
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn damaged(loc: &Location) -> Vec<(String, String)> {
    let r = backup::verify(loc).unwrap();
    r.damaged.into_iter().map(|d| (d.file, d.problem)).collect()
}

#[test]
fn verify_names_what_is_damaged_missing_or_extra() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, bk) = (tmp.path().join("data"), tmp.path().join("bk"));
    let mut o = EngineOptions::new(&data);
    o.background = false;
    let engine = Engine::open(o).unwrap();
    let mut spans = corpus().spans(0..200);
    // A payload, so the backup has a pack.
    spans[0]
        .attributes
        .push(skein_model::KeyValue::new("gen_ai.input.messages", "x".repeat(5000)));
    engine.ingest_spans(spans).unwrap();
    engine.backup(&dir_loc(&bk)).unwrap();
    // Two batches after it stay in the WAL (a drop does not flush).
    engine.ingest_spans(corpus().spans(200..210)).unwrap();
    engine.ingest_spans(corpus().spans(210..220)).unwrap();
    drop(engine);
    assert!(backup::verify(&dir_loc(&bk)).unwrap().ok());
    assert!(
        backup::verify(&dir_loc(&data)).unwrap().ok(),
        "the data directory, WAL included"
    );

    // In the backup: a changed byte anywhere is caught by the manifest.
    let part = files_ending(&bk, ".parquet")[0].clone();
    flip(&part);
    let rel = part.strip_prefix(&bk).unwrap().to_string_lossy().to_string();
    let found = damaged(&dir_loc(&bk));
    assert!(
        found.iter().any(|(f, p)| *f == rel && p.contains("BLAKE3")),
        "{found:?}"
    );
    let err = backup::restore(&dir_loc(&bk), &tmp.path().join("r1"))
        .unwrap_err()
        .to_string();
    assert!(err.contains(&rel) && err.contains("damaged"), "{err}");
    assert!(!tmp.path().join("r1").exists() && !tmp.path().join("r1.restoring").exists());
    flip(&part);
    assert!(backup::verify(&dir_loc(&bk)).unwrap().ok(), "flipped back");

    let idx = files_ending(&bk, ".idx")[0].clone();
    let idx_rel = idx.strip_prefix(&bk).unwrap().to_string_lossy().to_string();
    let saved = std::fs::read(&idx).unwrap();
    std::fs::remove_file(&idx).unwrap();
    std::fs::write(bk.join("parts/spans/stray.bin"), "x").unwrap();
    let found = damaged(&dir_loc(&bk));
    assert!(
        found.iter().any(|(f, p)| *f == idx_rel && p.contains("missing")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(f, p)| f == "parts/spans/stray.bin" && p.contains("not in the manifest")),
        "{found:?}"
    );
    std::fs::write(&idx, saved).unwrap();
    std::fs::remove_file(bk.join("parts/spans/stray.bin")).unwrap();

    // In a data directory, by each file's own checks.
    let idx = files_ending(&data, ".idx")[0].clone();
    flip(&idx);
    let pack = files_ending(&data, ".pack")[0].clone();
    flip(&pack);
    let part = files_ending(&data, ".parquet")[0].clone();
    let len = std::fs::metadata(&part).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&part)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let wal = std::fs::read_dir(data.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::metadata(p).unwrap().len() > 100)
        .expect("a WAL segment with the last batch");
    // A byte inside the first frame, with frames after it: corruption.
    let mut b = std::fs::read(&wal).unwrap();
    b[20] ^= 0xff;
    std::fs::write(&wal, b).unwrap();
    let found = damaged(&dir_loc(&data));
    let rel = |p: &Path| p.strip_prefix(&data).unwrap().to_string_lossy().to_string();
    for f in [&idx, &pack, &part, &wal] {
        assert!(
            found.iter().any(|(n, _)| *n == rel(f)),
            "{} is named: {found:?}",
            rel(f)
        );
    }
    assert_eq!(found.len(), 4, "nothing else: {found:?}");
}
