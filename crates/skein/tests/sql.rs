//! SQL (`POST /api/v1/sql`, `skein sql`) against the real binary.
//!
//! The conformance suite (tests/conformance/sql_duckdb.py) sends a
//! deterministic corpus of spans, logs and metric points as OTLP/JSON, half
//! before a restart (so it is read from Parquet parts) and half after (the
//! hot tier); then asks Skein and DuckDB — over the same corpus written to
//! Parquet — the same queries (group by, joins of spans and logs by trace
//! id, window functions, exact and approximate percentiles, time bucketing,
//! attribute maps) and requires equal answers. It fails, never skips, when
//! python3 or DuckDB is missing.
//!
//! Also: every answer format, bad and refused queries (400 with
//! DataFusion's message), the JSON row cap, the timeout, and the CLI.

mod common;

use std::process::Command;
use std::time::Duration;

use common::Server;
use serde_json::{Value, json};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python(args: &[&str]) {
    let out = Command::new("python3")
        .current_dir(root())
        .arg("tests/conformance/sql_duckdb.py")
        .args(args)
        .output()
        .expect("python3 is needed (./test.sh installs it and tests/requirements.txt, with duckdb)");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "sql_duckdb.py {args:?} failed:\n{text}");
    eprintln!("{text}");
}

fn sql(s: &Server, body: &Value) -> reqwest::blocking::Response {
    reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/sql", s.api))
        .json(body)
        .timeout(Duration::from_secs(120))
        .send()
        .unwrap()
}

fn ok_json(s: &Server, query: &str) -> Value {
    let r = sql(s, &json!({"query": query}));
    let status = r.status();
    let v: Value = r.json().unwrap();
    assert!(status.is_success(), "{query}: {status} {v}");
    v
}

fn error_of(s: &Server, body: &Value) -> (u16, Value) {
    let r = sql(s, body);
    let status = r.status().as_u16();
    (status, r.json().unwrap())
}

#[test]
fn answers_equal_duckdbs_over_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = Server::start(&data, &[]);
    python(&["ingest", &s.otlp_http, "1"]);
    // A clean stop flushes the hot tier: the first half is read from parts.
    s.stop();
    s.restart();
    let stats = s.get_json("/api/v1/stats");
    for signal in ["spans", "logs", "metrics"] {
        assert!(
            stats["parts_by_signal"][signal].as_u64() >= Some(1),
            "{signal} in parts: {stats}"
        );
    }
    python(&["ingest", &s.otlp_http, "2"]);
    let stats = s.get_json("/api/v1/stats");
    assert!(
        stats["hot_records"].as_u64() >= Some(1),
        "the second half in the hot tier: {stats}"
    );
    let out = dir.path().join("parquet");
    std::fs::create_dir_all(&out).unwrap();
    python(&["compare", &s.api, out.to_str().unwrap()]);
}

/// A few spans, logs and points straight over OTLP/JSON.
fn small_corpus(s: &Server, spans: usize) {
    let list: Vec<Value> = (0..spans)
        .map(|i| {
            json!({
                "traceId": format!("{:032x}", 1 + i / 4),
                "spanId": format!("{:016x}", 1 + i),
                "name": format!("op-{}", i % 3),
                "kind": 2,
                "startTimeUnixNano": (1_767_225_600_000_000_000u64 + i as u64 * 1_000_000).to_string(),
                "endTimeUnixNano": (1_767_225_600_000_000_000u64 + i as u64 * 1_000_000 + 5000).to_string(),
                "attributes": [{"key": "http.route", "value": {"stringValue": format!("/r{}", i % 2)}}],
            })
        })
        .collect();
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "api"}}]},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": list}]
    }]});
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/traces", s.otlp_http))
        .json(&body)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().unwrap());
}

#[test]
fn formats_errors_caps_and_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &["--sql-max-rows", "5"]);
    small_corpus(&s, 12);

    // JSON: columns with types, rows, the cap.
    let v = ok_json(&s, "SELECT name, count(*) AS n FROM spans GROUP BY name ORDER BY name");
    assert_eq!(
        v["columns"],
        json!([{"name": "name", "type": "VARCHAR"}, {"name": "n", "type": "BIGINT"}])
    );
    assert_eq!(v["rows"], json!([["op-0", 4], ["op-1", 4], ["op-2", 4]]));
    assert_eq!(v["truncated"], json!(false));
    let capped = ok_json(&s, "SELECT span_id FROM spans");
    assert_eq!(capped["rows"].as_array().unwrap().len(), 5);
    assert_eq!(capped["truncated"], json!(true));
    let exact = ok_json(&s, "SELECT span_id FROM spans LIMIT 5");
    assert_eq!(exact["truncated"], json!(false), "exactly the cap is complete");

    // NDJSON and CSV stream every row, past the JSON cap.
    let r = sql(
        &s,
        &json!({"query": "SELECT span_id, attributes['http.route'] AS route FROM spans ORDER BY span_id", "format": "ndjson"}),
    );
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let text = r.text().unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 12);
    assert_eq!(lines[0], json!({"span_id": "0000000000000001", "route": "/r0"}));
    let r = sql(
        &s,
        &json!({"query": "SELECT span_id, name FROM spans ORDER BY span_id", "format": "csv"}),
    );
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let csv = r.text().unwrap();
    assert_eq!(csv.lines().count(), 13, "{csv}");
    assert_eq!(csv.lines().next(), Some("span_id,name"));
    assert_eq!(csv.lines().nth(1), Some("0000000000000001,op-0"));

    // Arrow IPC: read back by DuckDB? Python's pyarrow is not installed;
    // check the stream framing: the continuation marker and the schema.
    let r = sql(
        &s,
        &json!({"query": "SELECT count(*) AS n FROM spans", "format": "arrow"}),
    );
    assert_eq!(r.headers()["content-type"], "application/vnd.apache.arrow.stream");
    let bytes = r.bytes().unwrap();
    assert_eq!(&bytes[..4], &[0xff, 0xff, 0xff, 0xff], "IPC stream continuation marker");
    assert_eq!(
        &bytes[bytes.len() - 8..],
        &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        "end of stream"
    );

    // A bad query: 400 with DataFusion's message, in the API's error shape.
    let (status, e) = error_of(&s, &json!({"query": "SELECT nope FROM spans"}));
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "bad_request");
    assert!(e["error"]["message"].as_str().unwrap().contains("nope"), "{e}");
    let (status, e) = error_of(&s, &json!({"query": "SELEC 1"}));
    assert_eq!(status, 400, "{e}");
    let (status, e) = error_of(&s, &json!({"query": "SELECT 1", "format": "xml"}));
    assert_eq!(status, 400);
    assert!(e["error"]["message"].as_str().unwrap().contains("format"), "{e}");
    let (status, e) = error_of(&s, &json!({"sql": "SELECT 1"}));
    assert_eq!(status, 400);
    assert!(e["error"]["message"].as_str().unwrap().contains("sql"), "{e}");

    // Read-only: DDL, DML, COPY and file access are refused.
    for q in [
        "CREATE TABLE t AS SELECT 1",
        "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
        "INSERT INTO spans SELECT * FROM spans",
        "DELETE FROM spans",
        "DROP TABLE spans",
        "COPY (SELECT 1) TO '/tmp/skein-sql-copy.csv'",
        "SELECT * FROM '/etc/passwd'",
        "SET datafusion.execution.batch_size = 1",
    ] {
        let (status, e) = error_of(&s, &json!({"query": q}));
        assert_eq!(status, 400, "{q}: {e}");
        assert_eq!(e["error"]["code"], "bad_request", "{q}: {e}");
    }
    assert!(!std::path::Path::new("/tmp/skein-sql-copy.csv").exists());

    // The CLI: JSON when piped, the API's answer.
    let out = Command::new(common::bin())
        .args(["sql", "--server", &s.api, "SELECT count(*) AS n FROM spans"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"], json!([[12]]));
    let out = Command::new(common::bin())
        .args([
            "sql",
            "--server",
            &s.api,
            "--format",
            "table",
            "SELECT name, count(*) AS n FROM spans GROUP BY name ORDER BY name",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "name  n\nop-0  4\nop-1  4\nop-2  4\n"
    );
    let out = Command::new(common::bin())
        .args(["sql", "--server", &s.api, "SELECT nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[test]
fn a_query_past_the_timeout_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &["--sql-timeout", "1s"]);
    // Far more work than a second: a cross join of generated rows.
    let (status, e) = error_of(
        &s,
        &json!({"query": "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b WHERE a.value * b.value = 7"}),
    );
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "timeout", "{e}");
    // The server still answers.
    assert_eq!(ok_json(&s, "SELECT 1 AS one")["rows"], json!([[1]]));
}

/// `skein_sql_queries_running` from `/metrics`.
fn sql_running(s: &Server) -> f64 {
    let text = reqwest::blocking::Client::new()
        .get(format!("{}/metrics", s.api))
        .timeout(Duration::from_secs(30))
        .send()
        .and_then(|r| r.text())
        .expect("/metrics answers while a query runs");
    text.lines()
        .find_map(|l| l.strip_prefix("skein_sql_queries_running "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no skein_sql_queries_running in /metrics:\n{text}"))
}

/// Waits up to a minute for `f`.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(std::time::Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// CPU seconds (user and system) the process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After "pid (comm) ": state is field 3; utime and stime are 14 and 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf only reads its argument.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn a_query_stops_when_its_client_goes_away() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &["--sql-timeout", "1h"]);
    assert_eq!(sql_running(&s), 0.0);
    // 10^11 rows, streamed: far more than the test waits for.
    let client = reqwest::blocking::Client::new();
    let mut r = client
        .post(format!("{}/api/v1/sql", s.api))
        .json(&json!({"query": "SELECT value * 2 AS v FROM generate_series(1, 100000000000)", "format": "ndjson"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut got = 0;
    let mut buf = vec![0u8; 1 << 16];
    while got < 4 << 20 {
        let n = r.read(&mut buf).unwrap();
        assert!(n > 0, "the answer ended after {got} bytes");
        got += n;
    }
    assert_eq!(sql_running(&s), 1.0);
    drop(r);
    drop(client);
    eventually("the query runs on after its client went away", || {
        sql_running(&s) == 0.0
    });
    // And it has stopped working, not only counting.
    let before = cpu_seconds(s.pid());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(s.pid()) - before;
    assert!(
        used < 1.0,
        "the server used {used:.2} CPU seconds in the 2 s after the query stopped"
    );
}

#[test]
fn a_heavy_query_leaves_the_server_answering() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &["--sql-timeout", "20s"]);
    // One batch of this nested-loop join is 10^10 comparisons: a single
    // step of the query takes minutes, and nothing can interrupt it.
    let api = s.api.clone();
    let heavy = std::thread::spawn(move || {
        reqwest::blocking::Client::new()
            .post(format!("{api}/api/v1/sql"))
            .json(&json!({"query": "SELECT count(*) FROM generate_series(1, 1000000) a, generate_series(1, 1000000) b WHERE a.value + b.value = 3"}))
            .timeout(Duration::from_secs(120))
            .send()
            .map(|r| r.status().as_u16())
    });
    eventually("the query never started", || sql_running(&s) == 1.0);
    // While it computes, the API, /metrics and ingest answer.
    let quick = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    for _ in 0..3 {
        assert_eq!(sql_running(&s), 1.0);
        let r = quick.get(format!("{}/api/v1/services", s.api)).send().unwrap();
        assert_eq!(r.status(), 200);
        let span = json!({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "busy"}}]},
            "scopeSpans": [{"spans": [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "op", "kind": 2, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000100000000"}]}]}]});
        let r = quick
            .post(format!("{}/v1/traces", s.otlp_http))
            .json(&span)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // The query is stopped by its timeout, a 400 naming it.
    assert_eq!(heavy.join().unwrap().unwrap(), 400);
}

#[test]
fn payload_gives_the_text_a_reference_stands_for() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let prompt: String = (0..800).map(|i| format!("w{i} ")).collect();
    let body = json!({"resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
    "scopeSpans": [{"spans": [{"traceId": "7b8efff798038103d269b633813fc60c", "spanId": "aee19b7ec3c1b174",
        "name": "chat", "kind": 3, "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225600100000000",
        "attributes": [
            {"key": "gen_ai.input.messages", "value": {"stringValue": prompt}},
            {"key": "note", "value": {"stringValue": "short"}},
            {"key": "blob", "value": {"bytesValue": "AAECAw=="}},
        ]}]}]}]});
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/traces", s.otlp_http))
        .json(&body)
        .send()
        .unwrap();
    assert!(r.status().is_success());
    let v = ok_json(
        &s,
        "SELECT attributes['gen_ai.input.messages'] AS stored, payload(attributes['gen_ai.input.messages']) AS full, \
         payload(attributes['note']) AS note, payload(attributes['missing']) AS missing, \
         payload('{\"$payload\":\"blake3:0000000000000000000000000000000000000000000000000000000000000000\",\"bytes\":1,\"preview\":\"x\"}') AS gone \
         FROM spans",
    );
    let row = &v["rows"][0];
    let stored = row[0].as_str().unwrap();
    assert!(stored.starts_with("{\"$payload\":\"blake3:"), "{stored}");
    assert_eq!(row[1], json!(prompt));
    assert_eq!(row[2], "short");
    assert_eq!(row[3], Value::Null);
    assert_eq!(row[4], Value::Null, "a payload that is not stored is NULL");
}
