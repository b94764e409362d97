//! Full-text search through the real binary: `text=` on logs, spans and
//! traces (and `--text` on `skein query`), with highlights, over bodies,
//! span names, status messages, exception attributes and payloads (a body
//! past 4 KiB is a payload: it is searched in full, not by its preview);
//! syntax errors are a 400 naming their position.

mod common;

use std::process::Command;

use common::Server;
use prost::Message;
use serde_json::{Value, json};
use skein_model::AnyValue;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn bodies(v: &Value) -> Vec<String> {
    v["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l["body"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| l["body"]["preview"].to_string())
        })
        .collect()
}

#[test]
fn text_search_finds_words_in_logs_spans_and_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), &[]);
    let http = reqwest::blocking::Client::new();
    // A Java stack trace past the payload threshold: the word is far past
    // the preview.
    let java = format!(
        "{}Caused by: com.example.db.PoolTimeoutException: no connection in 30s\n",
        "\tat com.example.Handler.handle(Handler.java:42)\n".repeat(120)
    );
    let mut logs = skein_engine::testdata::logs(4);
    let t = now_ns();
    for l in &mut logs {
        l.time_unix_nano = t;
    }
    logs[0].body = AnyValue::Str(java.clone());
    logs[1].body = AnyValue::Str("dial tcp 10.0.0.7:5432: connection refused".into());
    logs[2].body = AnyValue::Str("東京都の注文サービスが遅い".into());
    logs[3].body = AnyValue::Str("retrying connection, attempt 3".into());
    let r = http
        .post(format!("{}/v1/logs", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(skein_model::otlp::logs_to_otlp(&logs).encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let spans = json!({"spans": [{
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "name": "SELECT orders",
        "service": "db", "start_time_unix_nano": t, "duration_ns": 1000,
        "status": {"code": "error", "message": "upstream PoolTimeout after 30s"}
    }]});
    assert_eq!(
        http.post(format!("{}/api/v1/spans", s.api))
            .json(&spans)
            .send()
            .unwrap()
            .status(),
        200
    );

    let search = |path: &str, text: &str| -> Value {
        let r = http
            .get(format!("{}{path}", s.api))
            .query(&[("text", text)])
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{path} {text}: {}", r.text().unwrap_or_default());
        r.json().unwrap()
    };
    // An identifier's words, the identifier itself, in a payload body.
    let v = search("/api/v1/logs", "PoolTimeout");
    assert_eq!(bodies(&v).len(), 1, "{v}");
    assert!(
        v["logs"][0]["body"]["$payload"].is_string(),
        "the stack trace is a payload"
    );
    let h = &v["logs"][0]["highlights"][0];
    assert_eq!(h["field"], "body");
    let fragment = h["fragment"].as_str().unwrap();
    let (a, b) = (
        h["ranges"][0][0].as_u64().unwrap() as usize,
        h["ranges"][0][1].as_u64().unwrap() as usize,
    );
    assert_eq!(&fragment[a..b], "PoolTimeout", "the matched words are marked: {h}");
    assert_eq!(bodies(&search("/api/v1/logs", "timeout AND exception")).len(), 1);
    assert_eq!(bodies(&search("/api/v1/logs", "body:\"connection refused\"")).len(), 1);
    // The retry line and the stack trace ("no connection in 30s").
    assert_eq!(bodies(&search("/api/v1/logs", "connection NOT refused")).len(), 2);
    assert_eq!(
        bodies(&search("/api/v1/logs", "connection NOT refused NOT retry*")).len(),
        1
    );
    assert_eq!(bodies(&search("/api/v1/logs", "connect*")).len(), 3);
    assert_eq!(
        bodies(&search("/api/v1/logs", "注文")).len(),
        1,
        "a CJK word inside a sentence"
    );
    assert_eq!(bodies(&search("/api/v1/logs", "nothing-like-this")).len(), 0);
    // With the other filters.
    let r = http
        .get(format!("{}/api/v1/logs?text=connection&severity=fatal", s.api))
        .send()
        .unwrap();
    let v: Value = r.json().unwrap();
    assert!(v["logs"].as_array().unwrap().len() <= 2);

    // Spans: the status message; and the traces that have such a span.
    let v = search("/api/v1/spans", "message:pooltimeout");
    assert_eq!(v["spans"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["spans"][0]["highlights"][0]["field"], "message");
    assert_eq!(
        search("/api/v1/spans", "name:orders").as_object().unwrap()["spans"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        search("/api/v1/spans", "body:orders")["spans"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        search("/api/v1/traces", "PoolTimeout")["traces"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A syntax error names its position.
    let r = http
        .get(format!("{}/api/v1/logs", s.api))
        .query(&[("text", "\"connection refused")])
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().unwrap();
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("parameter text: at position 0"), "{message}");

    // The CLI.
    let out = Command::new(common::bin())
        .args(["--server", &s.api, "query", "logs", "--text", "PoolTimeout"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["logs"][0]["highlights"][0]["field"], "body");
}
