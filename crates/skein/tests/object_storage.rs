//! Parts on object storage, against a real S3 API: `moto_server` (PyPI
//! `moto[server]`, installed by test.sh), started on loopback by each test,
//! reached through a proxy the test can cut to stage an outage.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use common::moto::Moto;
use common::{Server, free_port};
use prost::Message;
use serde_json::Value;
use skein_model::corpus::Corpus;
use skein_model::otlp::spans_to_otlp;

/// Spans per service in the bucket's span parts, counted by ClickHouse's
/// `s3()` table function.
fn clickhouse_span_counts(moto: &Moto, prefix: &str) -> Vec<(String, u64)> {
    let script = r#"
import json, sys, chdb
url = f"{sys.argv[1]}/{sys.argv[2]}/{sys.argv[3]}/spans/*.parquet"
q = f"SELECT service_name, count() AS n FROM s3('{url}', 'test', 'test', 'Parquet') GROUP BY service_name ORDER BY service_name"
print(json.dumps([[r["service_name"], r["n"]] for r in json.loads(str(chdb.query(q, "JSON")))["data"]]))
"#;
    let out = Command::new("python3")
        .args(["-c", script, &moto.url(), BUCKET, prefix])
        .output()
        .expect("python3 with chdb (installed by test.sh)");
    assert!(out.status.success(), "chdb: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<(String, Value)> = serde_json::from_slice(&out.stdout).unwrap();
    rows.into_iter()
        .map(|(s, n)| {
            (
                s,
                n.as_u64().or_else(|| n.as_str().and_then(|v| v.parse().ok())).unwrap(),
            )
        })
        .collect()
}

const UP: u8 = 0;
/// Connections are accepted and closed at once: requests fail fast.
const DOWN: u8 = 1;
/// Connections are accepted and never answered: requests hang.
const STALLED: u8 = 2;

/// A TCP proxy in front of moto whose link can be cut.
struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(UP));
        let m = mode.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                match m.load(Ordering::SeqCst) {
                    DOWN => drop(client),
                    STALLED => {
                        let m = m.clone();
                        std::thread::spawn(move || {
                            while m.load(Ordering::SeqCst) == STALLED {
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            drop(client);
                        });
                    }
                    _ => {
                        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                            continue;
                        };
                        pipe(client, server, m.clone());
                    }
                }
            }
        });
        Proxy { port, mode }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Copies both ways until either side closes or the link is cut.
fn pipe(a: TcpStream, b: TcpStream, mode: Arc<AtomicU8>) {
    for (mut from, mut to) in [
        (a.try_clone().unwrap(), b.try_clone().unwrap()),
        (b.try_clone().unwrap(), a.try_clone().unwrap()),
    ] {
        let mode = mode.clone();
        from.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64 << 10];
            loop {
                if mode.load(Ordering::SeqCst) != UP {
                    break;
                }
                match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Both);
            let _ = from.shutdown(std::net::Shutdown::Both);
        });
    }
}

const BUCKET: &str = "skein-test";

fn storage_flags(endpoint: &str, prefix: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec!["--storage".to_string(), format!("s3://{BUCKET}/{prefix}")];
    v.extend(common::moto::s3_flags(endpoint));
    v.extend(["--hot-max-age", "500ms", "--shutdown-timeout", "20"].map(String::from));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn start(data: &Path, flags: &[String]) -> Server {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Server::start(data, &flags)
}

fn corpus() -> Corpus {
    Corpus::with_shape(1_000_000, 10, 6, 10, common::now_ns())
}

/// Sends traces `range` with a prompt stored as a payload.
fn ingest(s: &Server, c: &Corpus, range: std::ops::Range<u64>) {
    let mut spans = c.spans(range);
    for (i, sp) in spans.iter_mut().enumerate() {
        sp.attributes.push(skein_model::KeyValue::new(
            "gen_ai.system_instructions",
            format!("You are agent {} of the object storage test. ", i % 4).repeat(12),
        ));
    }
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(spans_to_otlp(&spans).encode_to_vec())
        .send()
        .unwrap();
    assert!(r.status().is_success(), "ingest: {}", r.status());
}

/// Every (trace, span) id stored, paging through search.
fn stored_ids(s: &Server) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/api/v1/spans?limit=5000".to_string();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let v = s.get_json(&path);
        for sp in v["spans"].as_array().unwrap() {
            out.insert((
                sp["trace_id"].as_str().unwrap().to_string(),
                sp["span_id"].as_str().unwrap().to_string(),
            ));
        }
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

/// The answers a restart must reproduce exactly.
fn answers(s: &Server, c: &Corpus, traces: u64) -> Vec<Value> {
    // A fixed window (the corpus's day), so rates compare across restarts.
    let start = c.spans(0..1)[0].start_time_unix_nano;
    let window = format!(
        "since={}&until={}",
        start - 3_600_000_000_000,
        start + 86_400_000_000_000
    );
    let mut out = vec![s.get_json(&format!("/api/v1/services?{window}"))];
    for t in [0, traces / 2, traces - 1] {
        let id = c.spans(t..t + 1)[0].trace_id.to_hex();
        let mut trace = s.get_json(&format!("/api/v1/traces/{id}?payloads=inline"));
        trace.as_object_mut().unwrap().remove("explain");
        out.push(trace);
    }
    out
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn object_stats(s: &Server) -> Value {
    s.get_json("/api/v1/stats")["object_storage"].clone()
}

fn uploaded(s: &Server) -> bool {
    let st = object_stats(s);
    st["pending_uploads"] == 0 && st["remote_objects"].as_u64().unwrap_or(0) > 0
}

#[test]
fn parts_live_in_the_bucket_and_a_restart_without_local_copies_serves_everything() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flags = storage_flags(&moto.url(), "team/prod", &[]);
    let mut s = start(&data, &flags);
    let c = corpus();
    for b in 0..4 {
        ingest(&s, &c, b * 50..(b + 1) * 50);
    }
    let ids = stored_ids(&s);
    assert_eq!(ids.len(), 2000);
    let want = answers(&s, &c, 200);
    s.stop();

    // Spans, their sidecars and the payload packs are in the bucket, each
    // object whole (a Parquet file begins and ends with its magic).
    let objects = moto.objects(BUCKET, "team/prod/");
    let parquet: Vec<_> = objects.iter().filter(|o| o.key.ends_with(".parquet")).collect();
    assert!(!parquet.is_empty(), "no parts in the bucket: {objects:?}");
    assert!(
        objects.iter().any(|o| o.key.starts_with("team/prod/payloads/")),
        "{objects:?}"
    );
    assert!(objects.iter().any(|o| o.key.ends_with(".idx")), "{objects:?}");
    for o in &objects {
        assert_eq!(o.read, o.size, "{o:?}");
    }
    for o in &parquet {
        assert!(o.parquet, "{o:?} is not whole");
    }
    assert!(
        !objects.iter().any(|o| o.key.ends_with("lease.json")),
        "a clean stop gives the lease up"
    );

    // The bucket is open data: ClickHouse (chdb, in process) reads the span
    // parts straight from the S3 API and counts what Skein stores.
    let by_service = clickhouse_span_counts(&moto, "team/prod");
    let total: u64 = by_service.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 2000, "ClickHouse counts {by_service:?}");
    let services = want[0]["services"].as_array().unwrap();
    assert_eq!(by_service.len(), services.len());
    for svc in services {
        let name = svc["service"].as_str().unwrap();
        let n = by_service.iter().find(|(s, _)| s == name).map(|(_, n)| *n);
        assert_eq!(n, svc["spans"].as_u64(), "{name}");
    }

    // Only the WAL is left locally; with no cache at all every read is a
    // range request to the bucket.
    std::fs::remove_dir_all(data.join("cache")).unwrap();
    std::fs::remove_dir_all(data.join("parts")).unwrap();
    let flags = storage_flags(&moto.url(), "team/prod", &["--cache-size", "0"]);
    let mut s = start(&data, &flags);
    assert_eq!(stored_ids(&s), ids);
    assert!(answers(&s, &c, 200) == want, "the answers differ after the restart");
    let st = object_stats(&s);
    assert!(st["get_requests"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(st["cache_bytes"], 0, "{st}");
    s.stop();

    // With a cache, the second reading of the same answers is served from it.
    let flags = storage_flags(&moto.url(), "team/prod", &["--cache-size", "64MiB"]);
    let s = start(&data, &flags);
    assert!(answers(&s, &c, 200) == want, "the answers differ after the restart");
    let before = object_stats(&s)["get_requests"].as_u64().unwrap();
    assert!(answers(&s, &c, 200) == want, "the answers differ after the restart");
    let st = object_stats(&s);
    assert_eq!(
        st["get_requests"].as_u64().unwrap(),
        before,
        "warm reads went to the bucket: {st}"
    );
    assert!(st["cache_hits"].as_u64().unwrap() > 0, "{st}");
}

/// Runs `skein serve` with `flags`, which must refuse to start; what it said.
fn refused_start(data: &Path, flags: &[String]) -> String {
    let out = Command::new(common::bin())
        .arg("serve")
        .args(["--data-dir", data.to_str().unwrap()])
        .args(["--otlp-grpc-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--otlp-http-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--api-addr", &format!("127.0.0.1:{}", free_port())])
        .args(flags)
        .output()
        .unwrap();
    assert!(!out.status.success(), "skein serve started with {flags:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_second_writer_on_the_same_prefix_is_refused() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let flags = storage_flags(&moto.url(), "shared", &[]);
    let _first = start(&dir.path().join("a"), &flags);
    let err = refused_start(&dir.path().join("b"), &flags);
    assert!(
        err.contains("is written by another skein") && err.contains("s3://skein-test/shared"),
        "{err}"
    );

    // A missing bucket or an unreachable endpoint also refuses to start, saying so.
    for (endpoint, bucket_url, needle) in [
        (moto.url(), "s3://no-such-bucket/x", "no-such-bucket"),
        (
            format!("http://127.0.0.1:{}", free_port()),
            "s3://skein-test/x",
            "object storage",
        ),
    ] {
        let mut flags = storage_flags(&endpoint, "x", &[]);
        flags[1] = bucket_url.to_string();
        let err = refused_start(&dir.path().join("c"), &flags);
        assert!(err.contains(needle), "{bucket_url} at {endpoint}: {err}");
    }
}

#[test]
fn an_outage_of_the_bucket_keeps_ingest_going_and_loses_nothing() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let proxy = Proxy::start(moto.port);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flags = storage_flags(&proxy.endpoint(), "p", &[]);
    let mut s = start(&data, &flags);
    let c = corpus();
    ingest(&s, &c, 0..50);
    wait_for("the first parts to upload", Duration::from_secs(60), || uploaded(&s));

    proxy.set(DOWN);
    ingest(&s, &c, 50..100);
    wait_for("an upload fault", Duration::from_secs(60), || {
        let r = s.get_json("/readyz");
        r["status"] == "degraded" && r["message"].as_str().unwrap_or("").contains("upload")
    });
    // Writes and reads go on through the outage.
    ingest(&s, &c, 100..150);
    wait_for("all spans to be searchable", Duration::from_secs(30), || {
        stored_ids(&s).len() == 1500
    });
    let metrics = reqwest::blocking::get(format!("{}/metrics", s.api))
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("skein_engine_failures_total{kind=\"upload\"}") && !l.ends_with(" 0")),
        "upload failures are counted in /metrics"
    );
    assert!(object_stats(&s)["pending_uploads"].as_u64().unwrap() > 0);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("skein_object_storage_pending_uploads ") && !l.ends_with(" 0")),
        "the backlog shows in /metrics"
    );
    let status = Command::new(common::bin())
        .args(["status", "--format", "table"])
        .env("SKEIN_SERVER", &s.api)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("degraded"), "{status}");
    assert!(
        status.contains("storage: s3://skein-test/p") && status.contains("waiting to upload"),
        "{status}"
    );

    // The bucket comes back: the backlog goes up and the fault clears.
    proxy.set(UP);
    wait_for("the backlog to upload", Duration::from_secs(90), || uploaded(&s));
    wait_for("the fault to clear", Duration::from_secs(30), || {
        s.get_json("/readyz")["status"] == "ready"
    });
    let ids = stored_ids(&s);
    assert_eq!(ids.len(), 1500);

    // SIGKILL while uploads hang: nothing acknowledged is lost, no object is torn.
    ingest(&s, &c, 150..200);
    proxy.set(STALLED);
    std::thread::sleep(Duration::from_millis(1500));
    s.kill();
    proxy.set(UP);
    s.restart();
    wait_for("uploads after the restart", Duration::from_secs(90), || uploaded(&s));
    assert_eq!(stored_ids(&s).len(), 2000);
    for o in moto.objects(BUCKET, "p/") {
        assert_eq!(o.read, o.size, "{o:?}");
        assert!(o.parquet || !o.key.ends_with(".parquet"), "{o:?} is torn");
    }
    s.stop();
    // And everything is in the bucket: a restart with no local copies agrees.
    std::fs::remove_dir_all(data.join("cache")).unwrap();
    std::fs::remove_dir_all(data.join("parts")).unwrap();
    let s = start(&data, &flags);
    assert_eq!(stored_ids(&s).len(), 2000);
}

/// A byte changed in a part in the bucket is an error naming the object on
/// every read that reaches it, never data, and a `corrupt` fault; a part cut
/// short stops the start, naming it.
#[test]
fn a_corrupt_or_truncated_object_is_an_error_naming_it() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flags = storage_flags(&moto.url(), "c", &[]);
    let mut s = start(&data, &flags);
    let c = corpus();
    // One request, so one tier and (most likely) one part; the largest
    // part is the one changed either way.
    ingest(&s, &c, 0..1000);
    s.stop();
    let part = moto
        .objects(BUCKET, "c/spans/")
        .into_iter()
        .filter(|o| o.key.ends_with(".parquet"))
        .max_by_key(|o| o.size)
        .map(|o| o.key)
        .expect("a span part in the bucket");
    let original = moto.get(BUCKET, &part);
    // Past the first 64 KiB checksum chunk and before the footer's: the
    // part opens (its footer is intact), and reads of its pages meet it.
    assert!(original.len() > 4 * 65536, "a part of {} bytes", original.len());
    let mut changed = original.clone();
    for at in [65536 + 100, 2 * 65536 + 100] {
        changed[at] ^= 0x04;
    }
    moto.put(BUCKET, &part, changed);
    std::fs::remove_dir_all(data.join("cache")).unwrap();
    std::fs::remove_dir_all(data.join("parts")).unwrap();

    // Without a cache, reads are the ranges asked for, rounded out to
    // whole checksum chunks.
    let s = start(&data, &storage_flags(&moto.url(), "c", &["--cache-size", "0"]));
    let client = reqwest::blocking::Client::new();
    let mut refused = None;
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{}/api/v1/spans?limit=500", s.api);
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let r = client.get(url).send().unwrap();
        let status = r.status();
        let body: Value = r.json().unwrap();
        if !status.is_success() {
            refused = Some((status, body));
            break;
        }
        match body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let (status, body) = refused.expect("every span was served, changed bytes included");
    assert!(status.is_server_error(), "{status}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&part) && msg.contains("checksum"), "{msg}");
    let ready = client.get(format!("{}/readyz", s.api)).send().unwrap();
    let ready: Value = ready.json().unwrap();
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert!(ready.to_string().contains("corrupt"), "{ready}");
    assert!(object_stats(&s)["corrupt_reads"].as_u64().unwrap() > 0);
    drop(s);

    moto.put(BUCKET, &part, original[..original.len() - 100].to_vec());
    std::fs::remove_dir_all(data.join("cache")).unwrap();
    let err = refused_start(&data, &flags);
    assert!(err.contains(&part) && err.contains("truncated"), "{err}");
}

/// With `--storage-wait`, a bucket that is missing at start is waited for:
/// `/readyz` says why, and the server serves once the bucket is there.
#[test]
fn storage_wait_waits_for_the_bucket_and_says_why() {
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let api = format!("127.0.0.1:{}", free_port());
    let otlp = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(common::bin())
        .arg("serve")
        .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--otlp-grpc-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--otlp-http-addr", &otlp])
        .args(["--api-addr", &api])
        .args(storage_flags(&moto.url(), "w", &["--storage-wait"]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    /// Kills the server if the test fails before it stops it.
    struct KillOnDrop(u32);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
    let _guard = KillOnDrop(child.id());
    let client = reqwest::blocking::Client::new();
    let readyz = || -> Option<(u16, Value)> {
        let r = client.get(format!("http://{api}/readyz")).send().ok()?;
        Some((r.status().as_u16(), r.json().ok()?))
    };
    let mut waiting = None;
    wait_for(
        "/readyz to say it waits for the bucket",
        Duration::from_secs(30),
        || {
            // (The first answers may come before the first try failed.)
            waiting = readyz().filter(|(code, body)| *code == 503 && body.to_string().contains("waiting"));
            waiting.is_some()
        },
    );
    let (_, body) = waiting.unwrap();
    assert_eq!(body["status"], "starting", "{body}");
    let msg = body["message"].as_str().unwrap();
    assert!(
        msg.contains("waiting for object storage") && msg.contains(BUCKET),
        "{msg}"
    );
    assert!(child.try_wait().unwrap().is_none(), "it waits, it does not exit");

    moto.create_bucket(BUCKET);
    wait_for(
        "the server to be ready once the bucket exists",
        Duration::from_secs(60),
        || readyz().is_some_and(|(code, _)| code == 200),
    );
    let r = client
        .post(format!("http://{otlp}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(spans_to_otlp(&corpus().spans(0..2)).encode_to_vec())
        .send()
        .unwrap();
    assert!(r.status().is_success());
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

/// `--read-only` serves a bucket another skein writes: it takes no lease
/// (the writer keeps writing), refuses ingest, writes nothing to the
/// bucket, and follows the writer's new parts and merges.
#[test]
fn a_read_only_server_follows_the_writer() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    // The writer keeps what a merge replaced for 20 s before deleting it.
    let writer = start(
        &dir.path().join("w"),
        &storage_flags(&moto.url(), "ro", &["--removal-grace", "20s"]),
    );
    let c = corpus();
    // Everything the writer holds is in parts, and the parts in the bucket.
    let in_bucket = |s: &Server| {
        let st = s.get_json("/api/v1/stats");
        st["hot_records"] == 0 && st["frozen_tiers"] == 0 && uploaded(s)
    };
    ingest(&writer, &c, 0..100);
    wait_for("the writer's first part in the bucket", Duration::from_secs(30), || {
        in_bucket(&writer)
    });
    let reader = start(
        &dir.path().join("r"),
        &storage_flags(&moto.url(), "ro", &["--read-only", "--refresh-interval", "200ms"]),
    );
    assert_eq!(stored_ids(&reader).len(), 1000);
    assert!(stored_ids(&reader) == stored_ids(&writer));
    let id = c.spans(5..6)[0].trace_id.to_hex();
    let path = format!("/api/v1/traces/{id}?payloads=inline");
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("explain");
        v
    };
    assert_eq!(strip(reader.get_json(&path)), strip(writer.get_json(&path)));

    // Ingest is refused, on every surface, as not to be retried here.
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/traces", reader.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(spans_to_otlp(&c.spans(500..501)).encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/spans", reader.api))
        .json(&serde_json::json!([{"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "name": "x", "service": "s", "start_time_unix_nano": 1, "end_time_unix_nano": 2}]))
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().unwrap().contains("read-only"));

    // The writer goes on: new parts, then a merge of them all; the reader
    // follows, answering every span once.
    for b in 1..4 {
        ingest(&writer, &c, b * 100..(b + 1) * 100);
        wait_for("the writer's part", Duration::from_secs(30), || in_bucket(&writer));
    }
    wait_for("the reader to list the new parts", Duration::from_secs(30), || {
        stored_ids(&reader).len() == 4000
    });
    assert!(stored_ids(&reader) == stored_ids(&writer));
    let deletes = |s: &Server| {
        s.get_json("/api/v1/stats")["object_storage"]["delete_requests"]
            .as_u64()
            .unwrap_or(0)
    };
    let deletes_before = deletes(&writer);
    // Idle, the writer merges its span parts into one and, after the
    // grace, deletes the inputs; the reader drops them for the merged part.
    let span_parts = |s: &Server| {
        s.get_json("/api/v1/stats")["parts_by_signal"]["spans"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_for("the writer's merge", Duration::from_secs(60), || {
        span_parts(&writer) == 1 && uploaded(&writer)
    });
    assert_eq!(
        deletes(&writer),
        deletes_before,
        "the merge's inputs wait out their grace"
    );
    wait_for("the reader to follow the merge", Duration::from_secs(30), || {
        span_parts(&reader) == 1
    });
    assert!(
        stored_ids(&reader) == stored_ids(&writer),
        "every span once after the merge"
    );
    wait_for("the inputs deleted after their grace", Duration::from_secs(90), || {
        deletes(&writer) > deletes_before
    });
    let st = reader.get_json("/api/v1/stats");
    assert_eq!(st["read_only"], true);
    assert_eq!(writer.get_json("/api/v1/stats")["read_only"], false);
    assert_eq!(
        st["object_storage"]["put_requests"], 0,
        "the reader wrote to the bucket: {st}"
    );
    assert_eq!(st["object_storage"]["delete_requests"], 0, "{st}");
}

/// Below `--min-free-disk` with `--on-disk-full evict`, a server whose
/// parts live in a bucket drops its local cache of them, never the parts:
/// deleting them from the bucket would free no local disk.
#[test]
fn disk_pressure_with_a_bucket_drops_the_cache_not_the_parts() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = start(&data, &storage_flags(&moto.url(), "full", &[]));
    let c = corpus();
    for b in 0..3 {
        ingest(&s, &c, b * 100..(b + 1) * 100);
    }
    wait_for("every part in the bucket", Duration::from_secs(30), || {
        let st = s.get_json("/api/v1/stats");
        st["hot_records"] == 0 && st["frozen_tiers"] == 0 && uploaded(&s)
    });
    let ids = stored_ids(&s);
    assert_eq!(ids.len(), 3000);
    s.stop();
    let objects = |m: &Moto| -> BTreeSet<String> {
        // The running server's lease aside.
        m.objects(BUCKET, "full/")
            .into_iter()
            .map(|o| o.key)
            .filter(|k| !k.ends_with("lease.json"))
            .collect()
    };
    let before = objects(&moto);

    // Every filesystem is "full" under a floor of 99%.
    let flags = storage_flags(
        &moto.url(),
        "full",
        &[
            "--min-free-disk",
            "99%",
            "--on-disk-full",
            "evict",
            "--retention-interval",
            "1s",
        ],
    );
    let cached = dir_bytes(&data.join("cache"));
    assert!(cached > 100_000, "uploaded parts are cached: {cached} bytes");
    let s = start(&data, &flags);
    wait_for("the cache to be dropped", Duration::from_secs(30), || {
        object_stats(&s)["cache_bytes"] == 0
    });
    assert!(dir_bytes(&data.join("cache")) < cached / 10, "its files are gone");
    assert_eq!(objects(&moto), before, "no object left the bucket");
    assert!(stored_ids(&s) == ids, "every span is still answered");
}

/// Bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = e.metadata().unwrap();
        total += if meta.is_dir() {
            dir_bytes(&e.path())
        } else {
            meta.len()
        };
    }
    total
}
