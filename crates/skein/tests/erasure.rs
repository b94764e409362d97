//! Erasure with receipts, on the real binary: erase by `user.id`, then
//! search every file of the data directory (WAL, parts, payload packs,
//! full-text indexes, receipts, the audit log) for that user's values —
//! raw and inside every zstd frame, which is how Skein compresses Parquet
//! text columns, payloads and more — and find none; the other user's
//! records stay, and are found by the same search (so the search can
//! fail). The receipt verifies with `skein verify --erasure`, and a
//! tampered one does not. A SIGKILL mid-erasure (the process aborting after
//! its first part) is completed at the next start. With parts in a bucket,
//! verify scans the bucket's parts (and finds a part put back behind the
//! erasure's back).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::Server;
use prost::Message;
use serde_json::{Value, json};
use skein_model::otlp::{logs_to_otlp, spans_to_otlp};
use skein_model::{AnyValue, KeyValue, LogRecord, Resource, Span, SpanId, TraceId};

/// The user erased, and markers only their records carry: in a short
/// attribute, in a payload (a long attribute), in a log body.
const GONE_USER: &str = "zqxgoneuser8842";
const GONE_PROMPT: &str = "qvzgoneprompt";
const GONE_BODY: &str = "wkrgonebody";
/// The user kept, with markers of their own.
const KEPT_USER: &str = "jhkkeptuser5531";
const KEPT_PROMPT: &str = "ypmkeptprompt";

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn spans(trace: u128, user: &str, prompt: &str, batch: u64) -> Vec<Span> {
    let start = now_ns() - 60_000_000_000;
    (0..10u64)
        .map(|n| Span {
            trace_id: TraceId::from_u128(trace),
            span_id: SpanId((batch * 100 + n + 1).to_be_bytes()),
            name: format!("op-{batch}"),
            start_time_unix_nano: start + n * 1_000,
            end_time_unix_nano: start + n * 1_000 + 500,
            attributes: vec![
                KeyValue::new("user.id", user),
                // Long enough to go to the payload store (its own text for
                // each span, so no other record shares the payload).
                KeyValue::new("prompt", format!("{prompt} {batch} {n} ").repeat(60)),
                // Shared by both users: the payload must stay.
                KeyValue::new("system", "You are a helpful assistant. ".repeat(20)),
            ],
            resource: Arc::new(Resource::with_service("erasure-svc")),
            ..Default::default()
        })
        .collect()
}

fn logs(trace: u128, user: &str, body: &str, batch: u64) -> Vec<LogRecord> {
    let t = now_ns() - 30_000_000_000;
    (0..5u64)
        .map(|n| LogRecord {
            time_unix_nano: t + n,
            observed_time_unix_nano: t + n,
            severity_number: 9,
            severity_text: "INFO".into(),
            body: AnyValue::Str(format!("{body} said hello {batch} {n}")),
            attributes: vec![KeyValue::new("user.id", user)],
            trace_id: Some(TraceId::from_u128(trace)),
            resource: Arc::new(Resource::with_service("erasure-svc")),
            ..Default::default()
        })
        .collect()
}

fn ingest(s: &Server, batch: u64) {
    let http = reqwest::blocking::Client::new();
    let mut all = spans(0xA0 + batch as u128, GONE_USER, GONE_PROMPT, batch);
    all.extend(spans(0xB0 + batch as u128, KEPT_USER, KEPT_PROMPT, batch));
    let r = http
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(spans_to_otlp(&all).encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut l = logs(0xA0 + batch as u128, GONE_USER, GONE_BODY, batch);
    l.extend(logs(0xB0 + batch as u128, KEPT_USER, "keptbody", batch));
    let r = http
        .post(format!("{}/v1/logs", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(logs_to_otlp(&l).encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every byte string a file holds as far as this search can see: the file
/// itself and the decompressed content of every zstd frame in it.
fn views(bytes: &[u8]) -> Vec<Vec<u8>> {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut out = vec![bytes.to_vec()];
    let mut i = 0;
    while i + 4 <= bytes.len() {
        if bytes[i..i + 4] == MAGIC {
            let mut plain = Vec::new();
            if let Ok(d) = zstd::stream::read::Decoder::new(&bytes[i..]) {
                // A frame may be followed by other bytes: read what
                // decodes, keep it even when the rest does not.
                let mut d = d.single_frame().take(256 << 20);
                let _ = d.read_to_end(&mut plain);
            }
            if !plain.is_empty() {
                out.push(plain);
            }
        }
        i += 1;
    }
    out
}

/// The files under `dir` that hold `needle`, raw or in a zstd frame.
fn holders(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut all = Vec::new();
    files(dir, &mut all);
    all.into_iter()
        .filter(|p| {
            let Ok(bytes) = std::fs::read(p) else { return false };
            views(&bytes)
                .iter()
                .any(|v| v.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

fn get(s: &Server, path: &str) -> (u16, Value) {
    let r = reqwest::blocking::get(format!("{}{}", s.api, path)).unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn count(s: &Server, what: &str, user: &str) -> usize {
    let (status, v) = get(s, &format!("/api/v1/{what}?attr.user.id={user}&last=1h&limit=1000"));
    assert_eq!(status, 200, "{v}");
    v[what].as_array().unwrap_or_else(|| panic!("{v}")).len()
}

fn erase(s: &Server, body: Value) -> reqwest::Result<reqwest::blocking::Response> {
    reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/erasures", s.api))
        .json(&body)
        .send()
}

fn verify(data: &Path, id: &str) -> (Option<i32>, Value, String) {
    verify_with(data, id, &[], &[])
}

fn verify_with(data: &Path, id: &str, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value, String) {
    let out = Command::new(common::bin())
        .args(["verify", "--erasure", id, "--data-dir"])
        .arg(data)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (out.status.code(), v, String::from_utf8_lossy(&out.stderr).to_string())
}

/// The user's values are in parts, payload packs and the WAL before the
/// erasure (the search works), and in no file after it.
#[test]
fn erase_by_user_id_leaves_no_trace_in_any_file_and_the_receipt_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let extra = ["--hot-max-age", "1h", "--payload-threshold", "256"];
    let mut s = Server::start(&data, &extra);
    ingest(&s, 1);
    // Stopping flushes: batch 1 goes to parts and payload packs.
    assert!(s.stop().success());
    s.restart();
    // Batch 2 stays in the WAL and the hot tier.
    ingest(&s, 2);

    let parts = data.join("parts");
    for needle in [GONE_USER, GONE_BODY] {
        assert!(
            holders(&parts, needle)
                .iter()
                .any(|p| p.extension().is_some_and(|e| e == "parquet")),
            "{needle} is in no Parquet part before the erasure: the search cannot see it"
        );
    }
    for needle in [GONE_USER, GONE_PROMPT, GONE_BODY] {
        assert!(
            !holders(&data.join("wal"), needle).is_empty(),
            "{needle} is in no WAL segment before the erasure: the search cannot see it"
        );
    }
    assert!(
        !holders(&parts.join("payloads"), GONE_PROMPT).is_empty(),
        "the long prompt is in no payload pack before the erasure"
    );
    assert_eq!(count(&s, "spans", GONE_USER), 20);
    assert_eq!(count(&s, "logs", GONE_USER), 10);

    let r = erase(&s, json!({"attributes": {"user.id": GONE_USER}})).unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let answer: Value = r.json().unwrap();
    let id = answer["id"].as_str().unwrap().to_string();
    assert_eq!(answer["status"], "completed", "{answer}");

    // Gone from every answer…
    assert_eq!(count(&s, "spans", GONE_USER), 0);
    assert_eq!(count(&s, "logs", GONE_USER), 0);
    for t in [0xA1u128, 0xA2] {
        assert_eq!(get(&s, &format!("/api/v1/traces/{t:032x}")).0, 404);
    }
    let (_, v) = get(&s, &format!("/api/v1/spans?text={GONE_PROMPT}&last=1h"));
    assert_eq!(v["spans"].as_array().map(Vec::len), Some(0), "{v}");
    let (_, v) = get(&s, &format!("/api/v1/logs?text={GONE_BODY}&last=1h"));
    assert_eq!(v["logs"].as_array().map(Vec::len), Some(0), "{v}");
    // …the other user's records stay…
    assert_eq!(count(&s, "spans", KEPT_USER), 20);
    assert_eq!(count(&s, "logs", KEPT_USER), 10);
    assert_eq!(get(&s, &format!("/api/v1/traces/{:032x}", 0xB1u128)).0, 200);
    let (_, v) = get(&s, &format!("/api/v1/spans?attr.user.id={KEPT_USER}&last=1h&limit=1"));
    let system = v["spans"][0]["attributes"]["system"].to_string();
    assert!(
        system.contains("helpful assistant") || system.contains("payload"),
        "{v}"
    );

    // …and from every file, while the other user's values are still found.
    for needle in [GONE_USER, GONE_PROMPT, GONE_BODY] {
        let left = holders(&data, needle);
        assert!(left.is_empty(), "{needle} is still in {left:?}");
    }
    assert!(!holders(&data, KEPT_USER).is_empty());
    assert!(!holders(&parts, KEPT_PROMPT).is_empty());

    // The receipt.
    let (status, receipt) = get(&s, &format!("/api/v1/erasures/{id}"));
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["status"], "completed");
    assert_eq!(receipt["counts"]["spans"], 20, "{receipt}");
    assert_eq!(receipt["counts"]["logs"], 10, "{receipt}");
    assert!(
        receipt["criteria"]["attributes"]["user.id"]
            .as_str()
            .unwrap()
            .starts_with("blake3:")
    );
    assert!(!receipt["files_rewritten"].as_array().unwrap().is_empty(), "{receipt}");
    assert!(receipt["started_at"].is_string() && receipt["completed_at"].is_string());
    assert!(receipt["payloads_removed"].as_u64().unwrap() >= 20, "{receipt}");
    assert_eq!(receipt["digest"].as_str().map(str::len), Some(64));
    assert_eq!(get(&s, "/api/v1/erasures/e0000000000000000").0, 404);

    // The audit log has the request, without the user's id.
    let (_, audit) = get(&s, "/api/v1/audit");
    let entries = audit["entries"].as_array().unwrap();
    let e = entries
        .iter()
        .find(|e| e["action"] == "POST /api/v1/erasures")
        .unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(e["outcome"], "ok");
    assert_eq!(e["client"], "127.0.0.1");
    assert!(e["summary"].as_str().unwrap().contains(&id), "{e}");
    assert!(e["summary"].as_str().unwrap().contains("user.id"), "{e}");

    // Bad criteria are refused, naming the problem.
    let r = erase(&s, json!({})).unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("needs criteria"));
    let r = erase(&s, json!({"user.id": "x"})).unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("unknown field"));

    // Offline verification, beside the running server and after it.
    let (code, v, err) = verify(&data, &id);
    assert_eq!(code, Some(0), "{v} {err}");
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["parts_scanned"].as_u64().unwrap() > 0, "{v}");
    assert!(s.stop().success());
    let (code, v, err) = verify(&data, &id);
    assert_eq!(code, Some(0), "{v} {err}");

    // A tampered receipt does not verify.
    let path = data.join("erasures").join(format!("{id}.json"));
    let original = std::fs::read_to_string(&path).unwrap();
    let mut r: Value = serde_json::from_str(&original).unwrap();
    r["files_rewritten"].as_array_mut().unwrap().pop();
    std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
    let (code, v, _) = verify(&data, &id);
    assert_eq!(code, Some(4), "{v}");
    assert_eq!(v["digest_ok"], false, "{v}");
    std::fs::write(&path, original).unwrap();
    let (code, _, err) = verify(&data, "e0123456789abcdef");
    assert_eq!(code, Some(2), "{err}");
}

/// The process dies after the erasure's first part (as a SIGKILL would
/// leave it): the next start finishes it before it answers anything.
#[test]
fn an_erasure_cut_short_by_a_crash_is_completed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = Server::start(&data, &["--hot-max-age", "1h", "--payload-threshold", "256"]);
    ingest(&s, 1);
    assert!(s.stop().success());
    // Spans and logs: two parts hold the user, the crash comes after one.
    s.set_env("SKEIN_TEST_ERASURE_ABORT_AFTER_PARTS", Some("1"));
    s.restart();
    ingest(&s, 2);
    assert!(erase(&s, json!({"attributes": {"user.id": GONE_USER}})).is_err());
    let status = s.wait_exit();
    assert!(!status.success(), "{status}");
    let receipts: Vec<PathBuf> = std::fs::read_dir(data.join("erasures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    let pending: Value = serde_json::from_slice(&std::fs::read(&receipts[0]).unwrap()).unwrap();
    assert_eq!(pending["status"], "pending", "{pending}");
    let id = pending["id"].as_str().unwrap().to_string();
    // Something is left to do: the user's log records are still on disk.
    assert!(!holders(&data, GONE_BODY).is_empty());

    s.set_env("SKEIN_TEST_ERASURE_ABORT_AFTER_PARTS", None);
    s.restart();
    let (_, receipt) = get(&s, &format!("/api/v1/erasures/{id}"));
    assert_eq!(receipt["status"], "completed", "{receipt}");
    assert_eq!(count(&s, "spans", GONE_USER), 0);
    assert_eq!(count(&s, "logs", GONE_USER), 0);
    assert_eq!(count(&s, "spans", KEPT_USER), 20);
    assert_eq!(count(&s, "logs", KEPT_USER), 10);
    for needle in [GONE_USER, GONE_PROMPT, GONE_BODY] {
        let left = holders(&data, needle);
        assert!(left.is_empty(), "{needle} is still in {left:?}");
    }
    let (code, v, err) = verify(&data, &id);
    assert_eq!(code, Some(0), "{v} {err}");
}

/// With parts in a bucket, `verify --erasure --storage` scans the bucket's
/// parts: it passes after the erasure, and fails once an old part holding
/// erased records is put back into the bucket (which a scan of the local
/// directory alone cannot see).
#[test]
fn with_a_bucket_verify_scans_the_bucket_parts() {
    let moto = common::moto::Moto::start();
    moto.create_bucket("erasure-test");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut flags: Vec<String> = vec!["--storage".into(), "s3://erasure-test/p".into()];
    flags.extend(common::moto::s3_flags(&moto.url()));
    flags.extend(
        [
            "--hot-max-age",
            "1h",
            "--payload-threshold",
            "256",
            "--shutdown-timeout",
            "20",
        ]
        .map(String::from),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut s = Server::start(&data, &flags);
    ingest(&s, 1);
    // A clean stop flushes and uploads.
    assert!(s.stop().success());
    let before: Vec<(String, Vec<u8>)> = moto
        .objects("erasure-test", "p/spans/")
        .into_iter()
        .map(|o| {
            let bytes = moto.get("erasure-test", &o.key);
            (o.key, bytes)
        })
        .collect();
    assert!(
        before.iter().any(|(k, _)| k.ends_with(".parquet")),
        "{:?}",
        before.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    s.restart();
    let r = erase(&s, json!({"attributes": {"user.id": GONE_USER}})).unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let id = r.json::<Value>().unwrap()["id"].as_str().unwrap().to_string();
    assert!(s.stop().success());

    let env = common::moto::aws_env(&moto.url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let bucket = ["--storage", "s3://erasure-test/p"];
    let (code, v, err) = verify_with(&data, &id, &bucket, &env);
    assert_eq!(code, Some(0), "{v} {err}");
    assert!(v["parts_scanned"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["files_checked"].as_u64().unwrap() > 0,
        "the rewritten parts are read from the bucket: {v}"
    );

    // The pre-erasure part comes back behind Skein's back.
    let now: Vec<String> = moto
        .objects("erasure-test", "p/spans/")
        .into_iter()
        .map(|o| o.key)
        .collect();
    for (key, bytes) in before.into_iter().filter(|(k, _)| !now.contains(k)) {
        moto.put("erasure-test", &key, bytes);
    }
    let (code, v, err) = verify_with(&data, &id, &bucket, &env);
    assert_ne!(code, Some(0), "{v}");
    assert!(
        v["matching_records"].as_object().is_some_and(|m| !m.is_empty()),
        "{v} {err}"
    );
    // The local directory alone does not hold it.
    let (_, local, _) = verify(&data, &id);
    assert!(
        local["matching_records"].as_object().is_some_and(|m| m.is_empty()),
        "{local}"
    );
}

fn restore(backup: &Path, into: &Path, extra: &[&str]) -> Value {
    let out = Command::new(common::bin())
        .args(["restore", "--from"])
        .arg(backup)
        .arg("--data-dir")
        .arg(into)
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A backup taken before an erasure still holds the erased user; restored
/// with `--erasures-from` the old data directory, the erasure runs again at
/// the restore's first start and the user does not come back (restored
/// without it, it does: the test can fail).
#[test]
fn a_restore_of_an_older_backup_carries_the_erasures_made_since() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Server::start(&data, &["--payload-threshold", "256"]);
    ingest(&s, 1);
    let backup = dir.path().join("backup");
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/backups", s.api))
        .json(&json!({"to": backup}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = erase(&s, json!({"attributes": {"user.id": GONE_USER}})).unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let id = r.json::<Value>().unwrap()["id"].as_str().unwrap().to_string();
    assert_eq!(count(&s, "spans", GONE_USER), 0);
    drop(s);

    let plain = dir.path().join("plain");
    restore(&backup, &plain, &[]);
    let s = Server::start(&plain, &[]);
    assert_eq!(count(&s, "spans", GONE_USER), 10, "the backup predates the erasure");
    drop(s);

    let carried = dir.path().join("carried");
    let report = restore(&backup, &carried, &["--erasures-from", data.to_str().unwrap()]);
    assert_eq!(report["erasures_carried"], json!([id]), "{report}");
    let s = Server::start(&carried, &[]);
    assert_eq!(count(&s, "spans", GONE_USER), 0);
    assert_eq!(count(&s, "logs", GONE_USER), 0);
    assert_eq!(count(&s, "spans", KEPT_USER), 10);
    let (status, receipt) = get(&s, &format!("/api/v1/erasures/{id}"));
    assert_eq!(status, 200);
    assert_eq!(receipt["status"], "completed", "{receipt}");
    assert_eq!(receipt["counts"]["spans"], 10, "{receipt}");
    drop(s);
    for needle in [GONE_USER, GONE_PROMPT, GONE_BODY] {
        let left = holders(&carried, needle);
        assert!(left.is_empty(), "{needle} is still in {left:?}");
    }
    let (code, v, err) = verify(&carried, &id);
    assert_eq!(code, Some(0), "{v} {err}");
}
