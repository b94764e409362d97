//! `skein backup`, `skein restore` and `skein verify` with the real binary:
//! a backup taken through the running server while a client keeps
//! ingesting holds every trace acknowledged before it began, a server on
//! the restore answers the same, verify names a damaged file, and places
//! that are not empty are refused. The same through a real S3 API (moto),
//! from a server whose parts live in a bucket.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::moto::Moto;
use common::{Server, bin};
use prost::Message;
use serde_json::Value;
use skein_model::corpus::Corpus;
use skein_model::otlp::spans_to_otlp;

const BATCH: u64 = 25;

fn corpus() -> Corpus {
    Corpus::with_shape(1_000_000, 6, 5, 10, common::now_ns())
}

fn post(otlp_http: &str, c: &Corpus, range: std::ops::Range<u64>) {
    let r = reqwest::blocking::Client::new()
        .post(format!("{otlp_http}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(spans_to_otlp(&c.spans(range)).encode_to_vec())
        .send()
        .unwrap();
    assert!(r.status().is_success(), "ingest: {}", r.status());
}

fn skein(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

/// A client that keeps sending batches of traces; `acked` is how many
/// traces the server has acknowledged so far.
struct Writer {
    acked: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(otlp_http: &str, c: &Corpus) -> Writer {
        let acked = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s, url, c) = (acked.clone(), stop.clone(), otlp_http.to_string(), c.clone());
        let thread = std::thread::spawn(move || {
            let mut t = 0;
            while !s.load(Ordering::SeqCst) {
                post(&url, &c, t..t + BATCH);
                t += BATCH;
                a.store(t, Ordering::SeqCst);
            }
        });
        Writer {
            acked,
            stop,
            thread: Some(thread),
        }
    }

    fn wait_for(&self, traces: u64) {
        while self.acked.load(Ordering::SeqCst) < traces {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn acked(&self) -> u64 {
        self.acked.load(Ordering::SeqCst)
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.acked()
    }
}

/// The trace as the API shows it, without the explain block (which tells
/// where it was read from, not what it holds).
fn trace(s: &Server, c: &Corpus, t: u64) -> Value {
    let id = c.trace_id(t).to_hex();
    let mut v = s.get_json(&format!("/api/v1/traces/{id}"));
    v.as_object_mut().unwrap().remove("explain");
    v
}

/// Every trace acknowledged before the backup is in the restore, read the
/// same as from the source.
fn same_traces(source: &Server, restored: &Server, c: &Corpus, before: u64) {
    for t in (0..before).step_by(7).chain([before - 1]) {
        let want = trace(source, c, t);
        assert_eq!(want["spans"].as_array().unwrap().len(), 6, "trace {t} at the source");
        assert_eq!(
            trace(restored, c, t),
            want,
            "trace {t} of the {before} acknowledged before the backup"
        );
    }
}

fn flip_byte(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    let i = b.len() / 2;
    b[i] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_backup_during_ingest_restores_to_the_same_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, bk, restored) = (
        tmp.path().join("data"),
        tmp.path().join("bk"),
        tmp.path().join("restored"),
    );
    let c = corpus();
    let source = Server::start(&data, &["--hot-max-age", "300ms"]);
    let writer = Writer::start(&source.otlp_http, &c);
    writer.wait_for(1000);
    let before = writer.acked();
    let report = ok(skein(
        &["backup", "--server", &source.api, "--to", bk.to_str().unwrap()],
        &[],
    ));
    let during = writer.acked();
    writer.wait_for(during + 2 * BATCH);
    let total = writer.stop();
    assert!(report["files"].as_u64().unwrap() > 0, "{report}");
    assert!(bk.join("manifest.json").exists());

    let v = ok(skein(&["verify", "--data-dir", bk.to_str().unwrap()], &[]));
    assert_eq!(
        (v["ok"].as_bool(), v["backup"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );

    // Refusals: a backup into a place that holds something, a restore over
    // a data directory.
    let again = skein(&["backup", "--server", &source.api, "--to", bk.to_str().unwrap()], &[]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    let over = skein(
        &[
            "restore",
            "--from",
            bk.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(over.status.code(), Some(2), "{}", String::from_utf8_lossy(&over.stderr));

    let r = ok(skein(
        &[
            "restore",
            "--from",
            bk.to_str().unwrap(),
            "--data-dir",
            restored.to_str().unwrap(),
        ],
        &[],
    ));
    assert_eq!(r["files"], report["files"]);
    let back = Server::start(&restored, &[]);
    same_traces(&source, &back, &c, before);
    let spans = back.get_json("/api/v1/stats")["spans"].as_u64().unwrap();
    assert!(
        spans >= before * 6 && spans <= total * 6,
        "{spans} spans: at least the {before} traces acknowledged before, at most the {total} sent"
    );

    // A damaged file of the backup is named, and refused by restore.
    let part = std::fs::read_dir(bk.join("parts/spans"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "parquet"))
        .unwrap();
    flip_byte(&part);
    let bad = skein(&["verify", "--data-dir", bk.to_str().unwrap()], &[]);
    assert_eq!(bad.status.code(), Some(4));
    let v = json(&bad);
    let name = format!("parts/spans/{}", part.file_name().unwrap().to_string_lossy());
    assert_eq!(v["damaged"][0]["file"], name.as_str(), "{v}");
    let refused = skein(
        &[
            "restore",
            "--from",
            bk.to_str().unwrap(),
            "--data-dir",
            tmp.path().join("r2").to_str().unwrap(),
        ],
        &[],
    );
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains(&name));
}

#[test]
fn backups_to_and_from_a_bucket() {
    let moto = Moto::start();
    moto.create_bucket("skein-backup");
    let tmp = tempfile::tempdir().unwrap();
    let (data, restored) = (tmp.path().join("data"), tmp.path().join("restored"));
    let c = corpus();
    let endpoint = moto.url();
    // The source's parts live in the bucket too.
    let mut flags: Vec<String> = ["--storage", "s3://skein-backup/data", "--hot-max-age", "300ms"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    flags.extend(common::moto::s3_flags(&endpoint));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let source = Server::start(&data, &flags);
    let writer = Writer::start(&source.otlp_http, &c);
    writer.wait_for(800);
    let before = writer.acked();
    let report = ok(skein(
        &["backup", "--server", &source.api, "--to", "s3://skein-backup/bk/1"],
        &[],
    ));
    writer.stop();
    assert!(report["files"].as_u64().unwrap() > 0, "{report}");
    let keys: Vec<String> = moto
        .objects("skein-backup", "bk/1/")
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert!(keys.contains(&"bk/1/manifest.json".to_string()), "{keys:?}");

    let env = common::moto::aws_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let v = ok(skein(&["verify", "--backup", "s3://skein-backup/bk/1"], &env));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["files_checked"], report["files"]);
    ok(skein(
        &[
            "restore",
            "--from",
            "s3://skein-backup/bk/1",
            "--data-dir",
            restored.to_str().unwrap(),
        ],
        &env,
    ));
    let back = Server::start(&restored, &[]);
    same_traces(&source, &back, &c, before);
    let again = skein(
        &["backup", "--server", &source.api, "--to", "s3://skein-backup/bk/1"],
        &[],
    );
    assert_eq!(again.status.code(), Some(2), "a backup into a prefix that holds one");
}
