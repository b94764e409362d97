//! Retention end to end on the real binary: data older than `--retention`
//! is never answered, a background round deletes its parts and payloads,
//! and the data directory really shrinks; rounds show on `/api/v1/stats`,
//! `/metrics` and `skein status`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;
use prost::Message;
use skein_model::otlp::spans_to_otlp;
use skein_model::{KeyValue, Resource, Span, SpanId, TraceId};

const DAY: u64 = 86_400_000_000_000;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// 20 spans of trace `trace`, `age_days` old, each with an 8 KiB
/// attribute (stored as a payload) unique to it.
fn spans(trace: u128, age_days: u64) -> Vec<Span> {
    let start = now_ns() - age_days * DAY;
    (0..20u64)
        .map(|n| Span {
            trace_id: TraceId::from_u128(trace),
            span_id: SpanId((n + 1).to_be_bytes()),
            name: format!("op-{age_days}d"),
            start_time_unix_nano: start + n * 1_000,
            end_time_unix_nano: start + n * 1_000 + 500,
            attributes: vec![KeyValue::new("prompt", format!("trace {trace} span {n} ").repeat(500))],
            resource: Arc::new(Resource::with_service("svc")),
            ..Default::default()
        })
        .collect()
}

fn post(s: &Server, spans: &[Span]) {
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(spans_to_otlp(spans).encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() { dir_bytes(&e.path()) } else { m.len() }
        })
        .sum()
}

fn trace_status(s: &Server, trace: u128) -> u16 {
    reqwest::blocking::get(format!("{}/api/v1/traces/{:032x}", s.api, trace))
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn expired_data_is_never_answered_and_its_disk_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Kept for ever at first: old traces in one part, young ones in another.
    let mut s = Server::start(&data, &[]);
    for (trace, age) in [(1, 9), (2, 8), (3, 7), (4, 6)] {
        post(&s, &spans(trace, age));
    }
    s.stop();
    let mut s = Server::start(&data, &[]);
    for (trace, age) in [(11, 3), (12, 2), (13, 1)] {
        post(&s, &spans(trace, age));
    }
    assert_eq!(trace_status(&s, 1), 200);
    s.stop();
    let before = dir_bytes(&data);

    let s = Server::start(&data, &["--retention", "spans=5d", "--retention-interval", "1s"]);
    // Never answered, whether or not a round has run yet.
    for trace in 1..=4 {
        assert_eq!(trace_status(&s, trace), 404, "trace {trace}");
    }
    assert_eq!(trace_status(&s, 12), 200);
    let found = s.get_json("/api/v1/spans?limit=1000");
    let records = found["spans"].as_array().unwrap();
    assert_eq!(records.len(), 3 * 20, "{found}");
    // A round drops the old part; polled, as rounds come when they come.
    let deadline = Instant::now() + Duration::from_secs(120);
    let stats = loop {
        let st = s.get_json("/api/v1/stats");
        if st["retention"]["parts_dropped"].as_u64() >= Some(1) && st["retention"]["rounds"].as_u64() >= Some(1) {
            break st;
        }
        assert!(Instant::now() < deadline, "no retention round: {st}\n{}", s.log_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(stats["spans"], 3 * 20, "{stats}");
    assert_eq!(stats["retention"]["records_expired"], 4 * 20, "{stats}");
    assert_eq!(stats["retention_policy"], "spans=5d,logs=forever,metrics=forever");
    assert_eq!(
        stats["payloads"],
        3 * 20,
        "the expired spans' payloads are collected: {stats}"
    );
    let after = dir_bytes(&data);
    eprintln!("data directory: {before} bytes before retention, {after} after");
    assert!(
        after * 10 < before * 7,
        "the data directory went from {before} to {after} bytes"
    );

    let m = reqwest::blocking::get(format!("{}/metrics", s.api))
        .unwrap()
        .text()
        .unwrap();
    let dropped = m.lines().find_map(|l| {
        l.strip_prefix("skein_retention_parts_dropped_total ")?
            .parse::<f64>()
            .ok()
    });
    assert!(dropped >= Some(1.0), "{m}");
    let o = Command::new(common::bin())
        .args(["status", "--format", "table"])
        .env("SKEIN_SERVER", &s.api)
        .env_remove("SKEIN_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("RETENTION") && l.contains("spans=5d")),
        "{table}"
    );
}
