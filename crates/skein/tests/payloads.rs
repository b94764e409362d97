//! The payload store through the real binary: references in answers,
//! `payloads=inline`, `GET /api/v1/payloads/{ref}` (content type, Range,
//! 400/404), the stats, the CLI's `--payloads inline` and `get payload`,
//! all the same in the hot tier, after a SIGKILL (replayed from the WAL)
//! and after a clean stop (flushed to a pack).

mod common;

use std::process::Command;

use common::Server;
use serde_json::{Value, json};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn skein(api: &str, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(common::bin())
        .args(["--server", api])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn payloads_are_references_until_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(dir.path(), &[]);
    let http = reqwest::blocking::Client::new();
    let messages =
        json!([{"role": "user", "parts": [{"type": "text", "content": "why is checkout slow? ".repeat(40)}]}])
            .to_string();
    let trace_text = "Traceback (most recent call last):\n  File \"app.py\", line 1\n".repeat(100);
    let t0 = now_ns() - 60_000_000_000;
    let body = json!({"spans": [{
        "trace_id": TRACE, "span_id": "00f067aa0ba902b7", "name": "chat gpt-4o", "service": "agent",
        "start_time_unix_nano": t0, "duration_ns": 1_500_000,
        "attributes": {"gen_ai.input.messages": messages, "app.trace": trace_text, "gen_ai.request.model": "gpt-4o"}
    }]});
    let r = http.post(format!("{}/api/v1/spans", s.api)).json(&body).send().unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let messages_ref = format!("blake3:{}", blake3_hex(messages.as_bytes()));

    for round in ["hot tier", "replayed from the WAL", "in a pack"] {
        let t = s.get_json(&format!("/api/v1/traces/{TRACE}"));
        let attrs = &t["spans"][0]["attributes"];
        assert_eq!(
            attrs["gen_ai.request.model"], "gpt-4o",
            "{round}: short values stay inline"
        );
        let reference = &attrs["gen_ai.input.messages"];
        assert_eq!(reference["$payload"], messages_ref.as_str(), "{round}: {reference}");
        assert_eq!(reference["bytes"], messages.len());
        assert_eq!(reference["preview"].as_str().unwrap().chars().count(), 200);
        assert!(
            attrs["app.trace"]["$payload"].is_string(),
            "{round}: values over 4 KiB are payloads"
        );

        let inline = s.get_json(&format!("/api/v1/traces/{TRACE}?payloads=inline"));
        assert_eq!(
            inline["spans"][0]["attributes"]["gen_ai.input.messages"],
            messages.as_str()
        );
        assert_eq!(inline["spans"][0]["attributes"]["app.trace"], trace_text.as_str());
        let spans = s.get_json("/api/v1/spans?payloads=inline&service=agent");
        assert_eq!(spans["spans"][0]["attributes"]["app.trace"], trace_text.as_str());
        let correlated = s.get_json(&format!("/api/v1/correlate/{TRACE}?payloads=inline"));
        assert_eq!(
            correlated["trace"]["spans"][0]["attributes"]["app.trace"],
            trace_text.as_str()
        );

        // The bytes, with their content type, whole and by range.
        let url = format!("{}/api/v1/payloads/{messages_ref}", s.api);
        let r = http.get(&url).send().unwrap();
        assert_eq!(r.status(), 200, "{round}");
        assert_eq!(r.headers()["content-type"], "application/json");
        assert_eq!(r.headers()["accept-ranges"], "bytes");
        assert_eq!(r.bytes().unwrap(), messages.as_bytes());
        let r = http.get(&url).header("Range", "bytes=2-9").send().unwrap();
        assert_eq!(r.status(), 206);
        assert_eq!(
            r.headers()["content-range"],
            format!("bytes 2-9/{}", messages.len()).as_str()
        );
        assert_eq!(r.bytes().unwrap(), &messages.as_bytes()[2..10]);
        let r = http.get(&url).header("Range", "bytes=999999-").send().unwrap();
        assert_eq!(r.status(), 416);
        let text_ref = format!("blake3:{}", blake3_hex(trace_text.as_bytes()));
        let r = http
            .get(format!("{}/api/v1/payloads/{text_ref}", s.api))
            .send()
            .unwrap();
        assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");

        // The CLI: the bytes as stored, and inline answers.
        let (code, out, err) = skein(&s.api, &["get", "payload", &messages_ref]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, messages.as_bytes());
        let (code, out, err) = skein(&s.api, &["get", "trace", TRACE, "--payloads", "inline"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["spans"][0]["attributes"]["app.trace"], trace_text.as_str());

        let st = s.get_json("/api/v1/stats");
        assert_eq!(st["payloads"], 2, "{round}: {st}");
        assert_eq!(st["payload_logical_bytes"], messages.len() + trace_text.len());
        assert!(st["payload_bytes"].as_u64().unwrap() < (messages.len() + trace_text.len()) as u64 / 4);
        let metrics = http.get(format!("{}/metrics", s.api)).send().unwrap().text().unwrap();
        assert!(metrics.contains("\nskein_payloads 2\n"), "{round}: {metrics}");
        assert!(metrics.contains(&format!(
            "\nskein_payload_logical_bytes {}\n",
            messages.len() + trace_text.len()
        )));
        if round == "in a pack" {
            assert_eq!(st["payload_packs"], 1, "{st}");
        }
        match round {
            // SIGKILL: the payloads come back from the WAL.
            "hot tier" => s.kill(),
            // A clean stop flushes: they come back from a pack.
            _ => {
                s.stop();
            }
        }
        s.restart();
    }

    // Bad references.
    let unknown = format!("blake3:{}", "ab".repeat(32));
    let r = http.get(format!("{}/api/v1/payloads/{unknown}", s.api)).send().unwrap();
    assert_eq!(r.status(), 404);
    let e: Value = r.json().unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains(&unknown), "{e}");
    let r = http
        .get(format!("{}/api/v1/payloads/blake3:xyz", s.api))
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = http
        .get(format!("{}/api/v1/traces/{TRACE}?payloads=sometimes", s.api))
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let (code, _, err) = skein(&s.api, &["get", "payload", &unknown]);
    assert_eq!(code, 1, "no such payload is 'no results': {err}");
}

/// `--payload-threshold 0` keeps every value inline.
#[test]
fn a_zero_threshold_turns_the_store_off() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), &["--payload-threshold", "0"]);
    let big = "x".repeat(10_000);
    let body = json!({"spans": [{
        "trace_id": TRACE, "span_id": "00f067aa0ba902b7", "name": "op", "service": "svc",
        "start_time_unix_nano": now_ns(), "duration_ns": 1000, "attributes": {"gen_ai.prompt": big}
    }]});
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/spans", s.api))
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let t = s.get_json(&format!("/api/v1/traces/{TRACE}"));
    assert_eq!(t["spans"][0]["attributes"]["gen_ai.prompt"], big.as_str());
    assert_eq!(s.get_json("/api/v1/stats")["payloads"], 0);
}

fn blake3_hex(bytes: &[u8]) -> String {
    skein_engine::PayloadRef::of(bytes).to_string()["blake3:".len()..].to_string()
}

/// A damaged pack: reading the payload is an error naming it (never the
/// damaged bytes), and the server reports itself degraded but ready.
#[test]
fn a_damaged_payload_degrades_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(dir.path(), &[]);
    let http = reqwest::blocking::Client::new();
    let prompt = "Summarise the incident for the on-call engineer. ".repeat(20);
    let body = json!({"spans": [{
        "trace_id": TRACE, "span_id": "00f067aa0ba902b7", "name": "chat", "service": "agent",
        "start_time_unix_nano": now_ns(), "duration_ns": 1000, "attributes": {"gen_ai.prompt": prompt}
    }]});
    assert_eq!(
        http.post(format!("{}/api/v1/spans", s.api))
            .json(&body)
            .send()
            .unwrap()
            .status(),
        200
    );
    s.stop();
    let packs = dir.path().join("parts/payloads");
    let pack = std::fs::read_dir(&packs).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[4] ^= 0x20;
    std::fs::write(&pack, bytes).unwrap();
    s.restart();
    let reference = skein_engine::PayloadRef::of(prompt.as_bytes()).to_string();
    assert_eq!(s.get_json("/readyz")["status"], "ready", "nothing read yet");
    let r = http
        .get(format!("{}/api/v1/payloads/{reference}", s.api))
        .send()
        .unwrap();
    assert_eq!(r.status(), 500);
    let e: Value = r.json().unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains(&reference), "{e}");
    let ready = http.get(format!("{}/readyz", s.api)).send().unwrap();
    assert_eq!(ready.status(), 200, "degraded is still ready for writes");
    let ready: Value = ready.json().unwrap();
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["faults"][0]["kind"], "payload");
    let (code, out, _) = skein(&s.api, &["status"]);
    assert_eq!(code, 0);
    let st: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(st["status"], "degraded");
    assert_eq!(st["faults"][0]["kind"], "payload");
}
