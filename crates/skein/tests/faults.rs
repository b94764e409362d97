//! Faults, end to end on the real binary: a disk that fills up (ingest
//! refused below `--min-free-disk`; a WAL write that runs out of space
//! undone, and writes resuming by themselves when space returns), and
//! flushes that fail because the part directory was replaced by a file.
//! Each must reach every surface: the ingest answer (503 with Retry-After /
//! RESOURCE_EXHAUSTED or UNAVAILABLE, not 500), `/readyz`, `/metrics` and
//! `skein status`; a fault must clear once the cause is fixed, losing
//! nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Server;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::{Value, json};
use skein_model::KeyValue;
use skein_model::corpus::Corpus;
use skein_model::otlp::spans_to_otlp;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

/// A tmpfs of a fixed size, mounted for one test and unmounted when
/// dropped, also when the test fails. Declare it before the server that
/// uses it: locals drop in reverse order, so the server is gone first.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output();
        let failure = match out {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Some(format!("cannot run mount: {e}")),
        };
        if let Some(why) = failure {
            // Not a skip: without the small disk, nothing here is tested.
            panic!(
                "this test fills a {size} tmpfs and must mount one (as root, as tests run here and in CI): \
                 `mount -t tmpfs -o size={size} tmpfs {}` failed: {why}",
                path.display()
            );
        }
        Tmpfs {
            path: path.to_path_buf(),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something still holds a file there: detach it now, the
            // kernel frees it once the last user is gone.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

/// Characters that do not compress much (6 bits each), so the WAL grows
/// about as fast as requests are sent.
fn noise(seed: &mut u64, len: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..len)
        .map(|_| {
            // xorshift64: enough for noise.
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            ALPHABET[(*seed % 64) as usize] as char
        })
        .collect()
}

struct Answer {
    status: u16,
    retry_after: bool,
    body: Vec<u8>,
}

fn post_otlp(s: &Server, req: &ExportTraceServiceRequest) -> Answer {
    let r = http()
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(req.encode_to_vec())
        .send()
        .unwrap();
    Answer {
        status: r.status().as_u16(),
        retry_after: r.headers().get("retry-after").is_some_and(|v| v == "1"),
        body: r.bytes().unwrap().to_vec(),
    }
}

fn post_json_spans(s: &Server, body: &Value) -> (u16, bool, Value) {
    let r = http()
        .post(format!("{}/api/v1/spans", s.api))
        .json(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let retry_after = r.headers().get("retry-after").is_some_and(|v| v == "1");
    (status, retry_after, r.json().unwrap())
}

/// `google.rpc.Status`, the OTLP/HTTP error body.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

const RESOURCE_EXHAUSTED: i32 = 8;

fn readyz(s: &Server) -> (u16, Value) {
    let r = http().get(format!("{}/readyz", s.api)).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap())
}

fn metrics(s: &Server) -> String {
    http().get(format!("{}/metrics", s.api)).send().unwrap().text().unwrap()
}

/// The value of one sample line of /metrics, e.g. `x{kind="wal"}`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `skein status` against the server: (exit code, stdout).
fn status_cmd(s: &Server, extra: &[&str]) -> (i32, String) {
    let o = Command::new(common::bin())
        .arg("status")
        .args(extra)
        .env("SKEIN_SERVER", &s.api)
        .env_remove("SKEIN_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8(o.stdout).unwrap())
}

/// Polls `/readyz` until `done` holds, failing after `within`.
fn wait_for_readyz(s: &Server, within: Duration, what: &str, done: impl Fn(u16, &Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = readyz(s);
        if done(status, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {within:?}; /readyz is {status} {body}\n--- skein log\n{}",
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `n` batches of ten spans carrying 4 KiB of noise each (about 40 KiB a
/// batch on the wire and in the WAL).
fn noisy_batches(corpus: &Corpus, seed: &mut u64, from: u64, n: u64) -> Vec<ExportTraceServiceRequest> {
    (from..from + n)
        .map(|batch| {
            let mut spans = corpus.spans(batch * 10..(batch + 1) * 10);
            for sp in &mut spans {
                sp.attributes.push(KeyValue::new("noise", noise(seed, 4096)));
            }
            spans_to_otlp(&spans)
        })
        .collect()
}

fn grpc_code(s: &Server, req: ExportTraceServiceRequest) -> tonic::Code {
    let grpc = s.grpc.clone();
    tokio::runtime::Runtime::new().unwrap().block_on(async move {
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
        let mut client = TraceServiceClient::connect(grpc).await.unwrap();
        match client.export(req).await {
            Ok(_) => tonic::Code::Ok,
            Err(e) => e.code(),
        }
    })
}

fn span_count(req: &ExportTraceServiceRequest) -> u64 {
    req.resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len() as u64)
        .sum()
}

#[test]
fn below_min_free_disk_ingest_is_refused_and_every_surface_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // The data dir is the mount itself; the server's log is beside it, on
    // the real disk, so it can still say what happened.
    let disk = Tmpfs::mount(&dir.path().join("disk"), "8m");
    // Nothing is flushed during the test: only the WAL fills the disk.
    let s = Server::start(
        &disk.path,
        &[
            "--hot-max-bytes",
            "1GiB",
            "--hot-max-age",
            "1h",
            "--min-free-disk",
            "2MiB",
        ],
    );
    let corpus = Corpus::with_shape(1000, 10, 4, 10, now_ns());
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let mut stored_spans = 0;
    let mut refused = None;
    // An 8 MiB disk is down to 2 MiB free after about 150 batches of 40
    // KiB; 300 is only the bound.
    for req in noisy_batches(&corpus, &mut seed, 0, 300) {
        let a = post_otlp(&s, &req);
        match a.status {
            200 => stored_spans += span_count(&req),
            _ => {
                refused = Some(a);
                break;
            }
        }
    }
    let a = refused.expect("an 8 MiB disk fell below 2 MiB free within 300 requests of 40 KiB");

    // The ingest answer: 503 RESOURCE_EXHAUSTED with Retry-After and the
    // reason; nothing was written (the WAL never ran out of space).
    assert_eq!(a.status, 503, "{}", String::from_utf8_lossy(&a.body));
    assert!(a.retry_after);
    let st = RpcStatus::decode(a.body.as_slice()).unwrap();
    assert_eq!(st.code, RESOURCE_EXHAUSTED, "{}", st.message);
    assert!(st.message.contains("below --min-free-disk 2.0 MiB"), "{}", st.message);
    let small = spans_to_otlp(&corpus.spans(999..1000));
    let again = post_otlp(&s, &small);
    assert_eq!((again.status, again.retry_after), (503, true));
    assert_eq!(
        RpcStatus::decode(again.body.as_slice()).unwrap().code,
        RESOURCE_EXHAUSTED
    );
    let (status, retry_after, body) = post_json_spans(
        &s,
        &json!([{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
                 "name": "GET /cart", "service": "checkout", "start_time_unix_nano": now_ns(), "duration_ns": 1000}]),
    );
    assert_eq!((status, retry_after), (503, true), "{body}");
    assert_eq!(body["error"]["code"], "disk_full", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("below --min-free-disk"),
        "{body}"
    );
    assert_eq!(grpc_code(&s, small.clone()), tonic::Code::ResourceExhausted);

    // /readyz: degraded (queries go on, and it heals by itself), naming
    // the cause.
    let (status, ready) = readyz(&s);
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "degraded", "{ready}");
    let faults = ready["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{ready}");
    assert_eq!(faults[0]["kind"], "disk");
    assert!(faults[0]["failures"].as_u64().unwrap() >= 4);
    let fault_message = faults[0]["message"].as_str().unwrap();
    assert!(
        fault_message.contains("ingest is refused until space returns"),
        "{fault_message}"
    );
    assert!(ready["message"].as_str().unwrap().contains("disk ("), "{ready}");

    // /metrics: the fault gauge, the failure counter, the refusals and the
    // free space against its floor.
    let m = metrics(&s);
    assert_eq!(sample(&m, "skein_engine_fault{kind=\"disk\"}"), Some(1.0), "{m}");
    assert_eq!(sample(&m, "skein_engine_fault{kind=\"wal\"}"), Some(0.0), "{m}");
    assert!(
        sample(&m, "skein_engine_failures_total{kind=\"disk\"}").unwrap() >= 4.0,
        "{m}"
    );
    assert!(
        sample(&m, "skein_rejected_requests_total{reason=\"disk_full\"}").unwrap() >= 3.0,
        "{m}"
    );
    let free = sample(&m, "skein_disk_free_bytes").unwrap();
    assert_eq!(sample(&m, "skein_disk_min_free_bytes"), Some(2.0 * 1048576.0), "{m}");
    assert!(free < 2.0 * 1048576.0, "{m}");

    // Queries still work: everything acknowledged is there.
    assert_eq!(s.get_json("/api/v1/stats")["spans"], stored_spans);

    // skein status: ready but degraded, the fault in JSON and in the table.
    let (code, out) = status_cmd(&s, &[]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["ready"].clone(), v["status"].clone()),
        (json!(true), json!("degraded"))
    );
    assert_eq!(v["faults"][0]["kind"], "disk", "{v}");
    assert_eq!(v["spans"], stored_spans);
    let (code, table) = status_cmd(&s, &["--format", "table"]);
    assert_eq!(code, 0, "{table}");
    assert!(table.contains("DEGRADED: 1 fault needs an operator"), "{table}");
    assert!(
        table.lines().any(|l| l.trim_start().starts_with("FAULT disk: ")),
        "{table}"
    );
    assert!(table.lines().any(|l| l.starts_with("DISK FREE")), "{table}");
}

/// Fills the filesystem of `path` to the last byte, then frees `leave`
/// bytes of it again.
fn fill_disk(path: &Path, leave: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5au8; 4096];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    f.set_len(written.saturating_sub(leave)).unwrap();
}

#[test]
fn a_wal_write_out_of_space_leaves_nothing_torn_and_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&dir.path().join("disk"), "8m");
    let data = disk.path.join("data");
    // No free-space floor: the WAL itself runs out of space.
    let mut s = Server::start(
        &data,
        &["--hot-max-bytes", "1GiB", "--hot-max-age", "1h", "--min-free-disk", "0"],
    );
    let corpus = Corpus::with_shape(1000, 10, 4, 10, now_ns());
    let mut seed = 0x2545_f491_4f6c_dd1d;
    let mut stored = 0;
    for req in noisy_batches(&corpus, &mut seed, 0, 5) {
        assert_eq!(post_otlp(&s, &req).status, 200);
        stored += span_count(&req);
    }
    // 16 KiB left: a 40 KiB batch gets part of the way into the WAL.
    let filler = disk.path.join("filler");
    fill_disk(&filler, 16 << 10);
    let big = noisy_batches(&corpus, &mut seed, 5, 1).remove(0);
    let a = post_otlp(&s, &big);
    assert_eq!(
        (a.status, a.retry_after),
        (503, true),
        "{}",
        String::from_utf8_lossy(&a.body)
    );
    let st = RpcStatus::decode(a.body.as_slice()).unwrap();
    assert_eq!(st.code, RESOURCE_EXHAUSTED, "{}", st.message);
    assert!(
        st.message.contains("No space left on device") && st.message.contains("writes resume once there is space"),
        "{}",
        st.message
    );
    assert_eq!(grpc_code(&s, big.clone()), tonic::Code::ResourceExhausted);
    let (status, ready) = readyz(&s);
    assert_eq!((status, ready["status"].clone()), (200, json!("degraded")), "{ready}");
    assert_eq!(ready["faults"][0]["kind"], "disk", "{ready}");
    assert_eq!(s.get_json("/api/v1/stats")["spans"], stored);

    // Space returns: the fault clears and writes go on, no restart.
    std::fs::remove_file(&filler).unwrap();
    wait_for_readyz(
        &s,
        Duration::from_secs(30),
        "the disk fault to clear",
        |status, body| status == 200 && body["status"] == "ready",
    );
    for req in noisy_batches(&corpus, &mut seed, 6, 3) {
        let a = post_otlp(&s, &req);
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        stored += span_count(&req);
    }
    assert_eq!(s.get_json("/api/v1/stats")["spans"], stored);
    let m = metrics(&s);
    assert_eq!(sample(&m, "skein_engine_fault{kind=\"disk\"}"), Some(0.0), "{m}");
    assert!(
        sample(&m, "skein_engine_failures_total{kind=\"disk\"}").unwrap() >= 2.0,
        "{m}"
    );

    // Killed: the log replays exactly what was acknowledged (strict
    // recovery refuses to start on a torn record between intact ones).
    s.kill();
    s.restart();
    assert_eq!(s.get_json("/api/v1/stats")["spans"], stored, "{}", s.log_text());
}

/// One trace of five spans per batch, as the JSON span API takes them.
fn batch(i: u64, t0: u64) -> Value {
    let trace = format!("{:032x}", i + 1);
    let spans: Vec<Value> = (0..5u64)
        .map(|j| {
            json!({"trace_id": trace, "span_id": format!("{:016x}", j + 1), "name": format!("op-{j}"),
                   "service": "svc", "start_time_unix_nano": t0 + i * 1000 + j, "duration_ns": 500})
        })
        .collect();
    json!(spans)
}

#[test]
fn failing_flushes_fault_until_fixed_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Server::start(&data, &["--hot-max-age", "1s"]);
    // A regular file where the span parts go: creating a part fails (and,
    // unlike taking permissions away, that holds for root too).
    let spans_dir = data.join("parts/spans");
    std::fs::remove_dir(&spans_dir).unwrap();
    std::fs::write(&spans_dir, b"").unwrap();
    let t0 = now_ns() - 60_000_000_000;
    let mut acked = Vec::new();
    let (status, _, body) = post_json_spans(&s, &batch(0, t0));
    assert_eq!(status, 200, "{body}");
    acked.push(0);

    // The flush of that tier fails within about a second: /readyz says so.
    let ready = wait_for_readyz(&s, Duration::from_secs(30), "a flush fault", |status, body| {
        status == 503
            && body["faults"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f["kind"] == "flush"))
    });
    assert_eq!(ready["status"], "faulted", "{ready}");
    let fault = ready["faults"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "flush")
        .unwrap()
        .clone();
    let fault_message = fault["message"].as_str().unwrap();
    assert!(
        fault_message.contains("parts/spans") && fault_message.contains("Not a directory"),
        "{fault_message}"
    );
    assert!(ready["message"].as_str().unwrap().contains("flush ("), "{ready}");
    let m = metrics(&s);
    assert_eq!(sample(&m, "skein_engine_fault{kind=\"flush\"}"), Some(1.0), "{m}");
    assert_eq!(sample(&m, "skein_engine_fault{kind=\"wal\"}"), Some(0.0), "{m}");
    let failures = sample(&m, "skein_engine_failures_total{kind=\"flush\"}").unwrap();
    assert!(failures >= 1.0, "{m}");
    let (code, out) = status_cmd(&s, &[]);
    assert_eq!(code, 4, "{out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["status"], "faulted");
    assert!(
        v["faults"].as_array().unwrap().iter().any(|f| f["kind"] == "flush"),
        "{v}"
    );
    let (code, table) = status_cmd(&s, &["--format", "table"]);
    assert_eq!(code, 4);
    assert!(
        table.lines().any(|l| l.trim_start().starts_with("FAULT flush: ")),
        "{table}"
    );

    // Ingest goes on into memory until the frozen tiers waiting for the
    // failing flush are full; then it is refused, 503 with the reason.
    let deadline = Instant::now() + Duration::from_secs(60);
    let refusal = loop {
        let i = acked.len() as u64;
        let (status, retry_after, body) = post_json_spans(&s, &batch(i, t0));
        match status {
            200 => acked.push(i),
            503 => {
                assert!(retry_after);
                break body;
            }
            other => panic!("unexpected {other}: {body}"),
        }
        assert!(
            Instant::now() < deadline,
            "ingest was never refused while flushes fail\n{}",
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(refusal["error"]["code"], "unavailable", "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("background flush is failing") && message.contains("Not a directory"),
        "{message}"
    );

    // The directory is back: the next flush succeeds and the fault clears
    // without a restart.
    std::fs::remove_file(&spans_dir).unwrap();
    std::fs::create_dir(&spans_dir).unwrap();
    wait_for_readyz(
        &s,
        Duration::from_secs(30),
        "the flush fault to clear",
        |status, body| status == 200 && body["status"] == "ready",
    );
    let m = metrics(&s);
    assert_eq!(sample(&m, "skein_engine_fault{kind=\"flush\"}"), Some(0.0), "{m}");
    assert!(sample(&m, "skein_engine_failures_total{kind=\"flush\"}").unwrap() >= failures);
    assert_eq!(status_cmd(&s, &[]).0, 0);
    // Nothing acknowledged was lost, and it is in parts now.
    let stats = s.get_json("/api/v1/stats");
    assert_eq!(stats["spans"], acked.len() as u64 * 5, "{stats}");
    assert!(stats["parts_by_signal"]["spans"].as_u64().unwrap() >= 1, "{stats}");
    for i in &acked {
        let t = s.get_json(&format!("/api/v1/traces/{:032x}", i + 1));
        assert_eq!(t["span_count"], 5, "batch {i}");
    }
    // The refused batch was not stored.
    let r = http()
        .get(format!("{}/api/v1/traces/{:032x}", s.api, acked.len() as u64 + 1))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
}
