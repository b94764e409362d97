//! `skein serve` end to end: OTLP over HTTP (protobuf, JSON, gzip) and gRPC,
//! the JSON span API, errors, health, metrics, shutdown and busy ports.

mod common;

use std::io::Write;
use std::sync::Arc;

use common::Server;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message;
use skein_model::Span;
use skein_model::corpus::{Corpus, HOUR_NS};
use skein_model::otlp::{spans_from_otlp, spans_to_otlp};

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn corpus() -> Corpus {
    Corpus::with_shape(50, 10, 4, 10, now_ns())
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Reads a trace back through the API in OTLP/JSON and decodes it.
fn read_trace_otlp(s: &Server, trace_id: &str) -> Vec<Span> {
    let v = s.get_json(&format!("/api/v1/traces/{trace_id}?format=otlp"));
    let req: ExportTraceServiceRequest = serde_json::from_value(v).unwrap();
    let mut spans = spans_from_otlp(req).records;
    spans.sort_by_key(|s| (s.start_time_unix_nano, s.span_id));
    spans
}

fn sorted(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.start_time_unix_nano, s.span_id));
    spans
}

#[test]
fn otlp_http_protobuf_json_and_gzip_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let c = corpus();
    let http = client();
    // Binary protobuf.
    let body = spans_to_otlp(&c.spans(0..10)).encode_to_vec();
    let r = http
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-protobuf");
    let resp = ExportTraceServiceResponse::decode(r.bytes().unwrap()).unwrap();
    assert!(resp.partial_success.is_none());
    // Gzipped protobuf, to the API port (ingest is mounted there too).
    let body = gzip(&spans_to_otlp(&c.spans(10..20)).encode_to_vec());
    let r = http
        .post(format!("{}/v1/traces", s.api))
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "gzip")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // OTLP/JSON.
    let body = serde_json::to_vec(&spans_to_otlp(&c.spans(20..30))).unwrap();
    let r = http
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    for t in [3, 15, 27] {
        let got = read_trace_otlp(&s, &c.trace_id(t).to_hex());
        assert_eq!(got, sorted(c.trace(t)), "trace {t} comes back exactly");
    }
    let stats = s.get_json("/api/v1/stats");
    assert_eq!(stats["spans"], 300);
}

#[test]
fn partial_success_and_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &["--max-body-bytes", "64KiB"]);
    let http = client();
    let c = corpus();
    let mut req = spans_to_otlp(&c.spans(0..1));
    req.resource_spans[3].scope_spans[0].spans[0].trace_id = vec![1, 2, 3];
    let r = http
        .post(format!("{}/v1/traces", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(req.encode_to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let resp = ExportTraceServiceResponse::decode(r.bytes().unwrap()).unwrap();
    let ps = resp.partial_success.unwrap();
    assert_eq!(ps.rejected_spans, 1);
    assert!(
        ps.error_message.contains("trace_id must be 16 bytes, got 3"),
        "{}",
        ps.error_message
    );
    assert_eq!(s.get_json("/api/v1/stats")["spans"], 9, "the valid spans are stored");

    let post = |ct: &str, extra: Option<(&str, &str)>, body: Vec<u8>| {
        let mut b = http
            .post(format!("{}/v1/traces", s.otlp_http))
            .header("content-type", ct)
            .body(body);
        if let Some((k, v)) = extra {
            b = b.header(k, v);
        }
        let r = b.send().unwrap();
        let status = r.status().as_u16();
        (status, String::from_utf8_lossy(&r.bytes().unwrap()).to_string())
    };
    let (st, body) = post("application/x-protobuf", None, b"\xff\xff\xff garbage".to_vec());
    assert_eq!(st, 400);
    assert!(body.contains("invalid protobuf"), "{body}");
    let (st, body) = post("application/json", None, b"{\"resourceSpans\": [".to_vec());
    assert_eq!(st, 400);
    assert!(body.contains("invalid OTLP/JSON"), "{body}");
    let (st, body) = post("text/plain", None, b"hi".to_vec());
    assert_eq!(st, 415);
    assert!(body.contains("unsupported Content-Type"), "{body}");
    let (st, body) = post(
        "application/x-protobuf",
        Some(("content-encoding", "gzip")),
        b"not gzip".to_vec(),
    );
    assert_eq!(st, 400);
    assert!(body.contains("gzip"), "{body}");
    let (st, body) = post("application/x-protobuf", None, vec![0u8; 100 << 10]);
    assert_eq!(st, 413);
    assert!(body.contains("limit"), "{body}");
    let (st, body) = post(
        "application/x-protobuf",
        Some(("content-encoding", "gzip")),
        gzip(&vec![0u8; 1 << 20]),
    );
    assert_eq!(st, 413, "a gzip bomb is refused: {body}");
    // A request whose every span is invalid is a 400, not a partial success.
    let mut bad = spans_to_otlp(&c.spans(1..2));
    for rs in &mut bad.resource_spans {
        for sp in &mut rs.scope_spans[0].spans {
            sp.span_id = vec![0; 8];
        }
    }
    let (st, body) = post("application/x-protobuf", None, bad.encode_to_vec());
    assert_eq!(st, 400);
    assert!(body.contains("span_id is all zeros"), "{body}");
    // Nothing of the bad requests was stored.
    assert_eq!(s.get_json("/api/v1/stats")["spans"], 9);
    // Rejections are counted by reason.
    let m = http.get(format!("{}/metrics", s.api)).send().unwrap().text().unwrap();
    assert!(m.contains("skein_rejected_requests_total{reason=\"malformed\"}"), "{m}");
    assert!(
        m.contains("skein_rejected_requests_total{reason=\"too_large\"} 2"),
        "{m}"
    );
}

#[test]
fn grpc_export_with_gzip_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let c = corpus();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let endpoint = s.grpc.clone();
    let req = spans_to_otlp(&c.spans(0..20));
    let resp = rt.block_on(async move {
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
        let mut client = TraceServiceClient::connect(endpoint)
            .await
            .unwrap()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        client.export(req).await.unwrap().into_inner()
    });
    assert!(resp.partial_success.is_none());
    assert_eq!(read_trace_otlp(&s, &c.trace_id(7).to_hex()), sorted(c.trace(7)));
    let m = client()
        .get(format!("{}/metrics", s.otlp_http))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        m.contains("skein_ingest_records_total{signal=\"spans\",protocol=\"grpc\"} 200"),
        "{m}"
    );
}

#[test]
fn json_span_api_health_and_graceful_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = Server::start(&data, &[]);
    let http = client();
    assert_eq!(http.get(format!("{}/healthz", s.api)).send().unwrap().status(), 200);
    assert_eq!(
        http.get(format!("{}/readyz", s.otlp_http)).send().unwrap().status(),
        200
    );
    let t0 = now_ns() - HOUR_NS / 2;
    let body = serde_json::json!({"spans": [
        {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "name": "GET /cart",
         "service": "checkout", "kind": "server", "start_time_unix_nano": t0, "duration_ns": 1_500_000,
         "status": "error", "attributes": {"http.status_code": 503, "user.vip": true}},
        {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b8", "parent_span_id": "00f067aa0ba902b7",
         "name": "SELECT cart", "service": "db", "start_time_unix_nano": t0 + 100, "end_time_unix_nano": t0 + 900}
    ]});
    let r = http.post(format!("{}/api/v1/spans", s.api)).json(&body).send().unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(v["accepted"], 2);
    let t = s.get_json("/api/v1/traces/4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(t["span_count"], 2);
    assert_eq!(t["error_count"], 1);
    assert_eq!(t["spans"][0]["attributes"]["http.status_code"], 503);
    assert_eq!(t["spans"][1]["depth"], 1);
    // SIGTERM: exit 0, data flushed into a part, all back after restart.
    let status = s.stop();
    assert!(status.success(), "exit status {status}: {}", s.log_text());
    let parts: Vec<_> = std::fs::read_dir(data.join("parts/spans")).unwrap().collect();
    assert!(!parts.is_empty(), "shutdown flushed the hot tier to a part");
    s.restart();
    assert_eq!(s.get_json("/api/v1/stats")["spans"], 2);
}

#[test]
fn a_busy_port_fails_fast_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("a"), &[]);
    let taken = s.otlp_http.trim_start_matches("http://").to_string();
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("b"))
        .args(["--otlp-http-addr", &taken])
        .args(["--otlp-grpc-addr", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--api-addr", &format!("127.0.0.1:{}", common::free_port())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot listen on") && err.contains("--otlp-http-addr"),
        "{err}"
    );
    // Same data dir: the lock names the owner.
    let out = std::process::Command::new(common::bin())
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("a"))
        .args(["--otlp-http-addr", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--otlp-grpc-addr", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--api-addr", &format!("127.0.0.1:{}", common::free_port())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use by another skein process") && err.contains(&s.pid().to_string()),
        "{err}"
    );
}

#[test]
fn flooding_beyond_capacity_sheds_load_and_keeps_every_ack() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(
        &dir.path().join("data"),
        &["--max-inflight-bytes", "512KiB", "--hot-max-bytes", "4MiB"],
    );
    let c = Arc::new(Corpus::with_shape(4000, 10, 8, 10, now_ns()));
    let url = format!("{}/v1/traces", s.otlp_http);
    let acked = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..16)
        .map(|w| {
            let (c, url, acked, refused) = (c.clone(), url.clone(), acked.clone(), refused.clone());
            std::thread::spawn(move || {
                let http = client();
                // 250 batches of 16 traces each, worker w takes every 16th.
                for b in (w..250).step_by(16) {
                    let body = spans_to_otlp(&c.spans(b * 16..(b + 1) * 16)).encode_to_vec();
                    let r = http
                        .post(&url)
                        .header("content-type", "application/x-protobuf")
                        .body(body)
                        .send()
                        .unwrap();
                    match r.status().as_u16() {
                        200 => acked.lock().unwrap().push(b),
                        503 => {
                            assert!(r.headers().contains_key("retry-after"));
                            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        other => panic!("unexpected status {other}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        refused.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the flood exceeded capacity"
    );
    assert!(!acked.is_empty());
    // Still up, memory bounded, and every acknowledged span stored once.
    assert_eq!(client().get(format!("{}/healthz", s.api)).send().unwrap().status(), 200);
    let rss = s.peak_rss();
    assert!(rss < 400 << 20, "peak RSS {} MiB", rss >> 20);
    let stats = s.get_json("/api/v1/stats");
    assert_eq!(stats["spans"].as_u64().unwrap(), acked.len() as u64 * 160);
    for b in acked.iter().step_by(7) {
        let t = c.trace_id(b * 16 + 5).to_hex();
        assert_eq!(s.get_json(&format!("/api/v1/traces/{t}"))["span_count"], 10);
    }
}

/// The keys an OpenAPI 200 description like `{traces: [...], next_cursor}`
/// names (`...` is "and more"); `None` for a description that is not an
/// object's shape.
fn documented_keys(description: &str) -> Option<Vec<String>> {
    let inner = description.strip_prefix('{')?.strip_suffix('}')?;
    let mut keys = Vec::new();
    let (mut depth, mut key) = (0, String::new());
    for ch in inner.chars().chain([',']) {
        match ch {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                let k = key.split(':').next().unwrap_or("").trim().to_string();
                if !k.is_empty() && k != "..." {
                    keys.push(k);
                }
                key.clear();
            }
            c if depth == 0 => key.push(c),
            _ => {}
        }
    }
    Some(keys)
}

#[test]
fn every_api_route_answers_its_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let http = client();
    // A trace of service svc in the last hour, some logs and metric points:
    // every route has something to answer.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let t0 = now_ns() - HOUR_NS / 4;
    // A prompt long enough to be stored as a payload.
    let prompt = "Which items are in the cart, and why did the lookup fail? ".repeat(8);
    let prompt_ref = skein_engine::PayloadRef::of(prompt.as_bytes()).to_string();
    let spans = serde_json::json!([
        {"trace_id": trace_id, "span_id": "00f067aa0ba902b7", "name": "GET /cart", "service": "svc",
         "kind": "server", "start_time_unix_nano": t0, "duration_ns": 2_000_000, "status": "error",
         "attributes": {"gen_ai.prompt": prompt, "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": 1000, "gen_ai.conversation.id": "conv-1"}},
        {"trace_id": trace_id, "span_id": "00f067aa0ba902b8", "parent_span_id": "00f067aa0ba902b7",
         "name": "SELECT cart", "service": "svc", "start_time_unix_nano": t0 + 100, "duration_ns": 800}
    ]);
    let r = http
        .post(format!("{}/api/v1/spans", s.api))
        .json(&spans)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    for (signal, body) in [
        (
            "logs",
            skein_model::otlp::logs_to_otlp(&skein_engine::testdata::logs(6)).encode_to_vec(),
        ),
        (
            "metrics",
            skein_model::otlp::metrics_to_otlp(&skein_engine::testdata::metric_points(4)).encode_to_vec(),
        ),
    ] {
        let r = http
            .post(format!("{}/v1/{signal}", s.otlp_http))
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{signal}");
    }

    // A valid request for every documented route (a route missing here
    // fails the test: its shape must be checked too).
    let payload_url = format!("/api/v1/payloads/{prompt_ref}");
    let requests: &[(&str, &str, &str)] = &[
        ("get", "/api/v1/payloads/{ref}", &payload_url),
        ("get", "/api/v1/traces", "/api/v1/traces?service=svc"),
        (
            "get",
            "/api/v1/traces/{trace_id}",
            "/api/v1/traces/4bf92f3577b34da6a3ce929d0e0e4736",
        ),
        ("get", "/api/v1/spans", "/api/v1/spans?service=svc"),
        ("post", "/api/v1/spans", "/api/v1/spans"),
        ("get", "/api/v1/logs", "/api/v1/logs"),
        ("get", "/api/v1/metrics", "/api/v1/metrics"),
        ("get", "/api/v1/metrics/names", "/api/v1/metrics/names"),
        ("get", "/api/v1/series/services", "/api/v1/series/services?points=30"),
        ("get", "/api/v1/series/logs", "/api/v1/series/logs?severity=info"),
        ("get", "/api/v1/services", "/api/v1/services"),
        (
            "get",
            "/api/v1/services/{service}/operations",
            "/api/v1/services/svc/operations",
        ),
        ("get", "/api/v1/summary", "/api/v1/summary"),
        ("get", "/api/v1/anomalies", "/api/v1/anomalies"),
        (
            "get",
            "/api/v1/correlate/{trace_id}",
            "/api/v1/correlate/4bf92f3577b34da6a3ce929d0e0e4736",
        ),
        ("get", "/api/v1/stats", "/api/v1/stats"),
        ("get", "/api/v1/llm/usage", "/api/v1/llm/usage?group_by=service"),
        ("get", "/api/v1/llm/tools", "/api/v1/llm/tools"),
        ("get", "/api/v1/sessions", "/api/v1/sessions"),
        ("get", "/api/v1/sessions/{id}", "/api/v1/sessions/conv-1"),
        (
            "get",
            "/api/v1/export",
            "/api/v1/export?signal=spans&service=svc&payloads=inline",
        ),
        ("post", "/api/v1/scores", "/api/v1/scores"),
        ("get", "/api/v1/scores", "/api/v1/scores?session_id=conv-1"),
        ("get", "/api/v1/tail", "/api/v1/tail"),
        ("get", "/api/v1/openapi.json", "/api/v1/openapi.json"),
        ("post", "/api/v1/backups", "/api/v1/backups"),
        ("post", "/api/v1/sql", "/api/v1/sql"),
        ("get", "/api/v1/audit", "/api/v1/audit"),
        // Last: an erasure (of a trace no other request reads), then its
        // receipt by the id it answered.
        ("post", "/api/v1/erasures", "/api/v1/erasures"),
        ("get", "/api/v1/erasures/{id}", "/api/v1/erasures/{id}"),
    ];
    let doc = s.get_json("/api/v1/openapi.json");
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        documented.extend(ops.as_object().unwrap().keys().map(|m| (m.clone(), path.clone())));
    }
    documented.sort();
    let mut called: Vec<(String, String)> = requests
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    called.sort();
    assert_eq!(called, documented, "this test calls exactly the documented routes");
    // In the order above: the POST comes after the span searches, and
    // stores a span of another service.
    let mut answers: std::collections::BTreeMap<String, serde_json::Value> = std::collections::BTreeMap::new();
    for &(method, path, url) in requests {
        let op = &doc["paths"][path][method];
        let description = op["responses"]["200"]["description"].as_str().unwrap();
        let r = match method {
            "get" if path == "/api/v1/erasures/{id}" => {
                let id = answers["POST /api/v1/erasures"]["id"].as_str().unwrap().to_string();
                http.get(format!("{}/api/v1/erasures/{id}", s.api)).send().unwrap()
            }
            "get" => http.get(format!("{}{url}", s.api)).send().unwrap(),
            "post" if path == "/api/v1/erasures" => http
                .post(format!("{}{url}", s.api))
                .json(&serde_json::json!({"trace_id": "000000000000000000000000000000ff"}))
                .send()
                .unwrap(),
            "post" if path == "/api/v1/scores" => http
                .post(format!("{}{url}", s.api))
                .json(
                    &serde_json::json!({"trace_id": trace_id, "session_id": "conv-1", "name": "helpful",
                    "value": 0.9, "comment": "good answer", "source": "human"}),
                )
                .send()
                .unwrap(),
            "post" if path == "/api/v1/backups" => http
                .post(format!("{}{url}", s.api))
                .json(&serde_json::json!({"to": dir.path().join("backup")}))
                .send()
                .unwrap(),
            "post" if path == "/api/v1/sql" => http
                .post(format!("{}{url}", s.api))
                .json(&serde_json::json!({"query": "SELECT count(*) AS n FROM spans WHERE service_name = 'svc'"}))
                .send()
                .unwrap(),
            "post" => http
                .post(format!("{}{url}", s.api))
                .json(&serde_json::json!([{"trace_id": "0af7651916cd43dd8448eb211c80319c",
                    "span_id": "b7ad6b7169203331", "name": "late", "service": "late-svc",
                    "start_time_unix_nano": t0, "duration_ns": 10}]))
                .send()
                .unwrap(),
            m => panic!("unexpected method {m}"),
        };
        assert_eq!(r.status(), 200, "{method} {url}");
        let content_type = r.headers()["content-type"].to_str().unwrap().to_string();
        if path == "/api/v1/payloads/{ref}" {
            // Bytes, not JSON: the prompt as sent.
            assert_eq!(content_type, "text/plain; charset=utf-8");
            assert_eq!(r.text().unwrap(), prompt);
            continue;
        }
        if description == "application/x-ndjson" {
            // The export: a record per line, then its completion line.
            assert_eq!(content_type, "application/x-ndjson");
            let text = r.text().unwrap();
            let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(lines.len(), 3, "{text}");
            assert_eq!(lines[2], serde_json::json!({"export_complete": true, "count": 2}));
            assert!(
                lines[..2]
                    .iter()
                    .all(|s| s["service"] == "svc" && s["trace_id"] == trace_id)
            );
            assert!(text.contains("Which items are in the cart"), "payloads inline: {text}");
            continue;
        }
        if description == "text/event-stream" {
            // A stream that never ends: its headers are the answer.
            assert!(content_type.starts_with("text/event-stream"), "{content_type}");
            continue;
        }
        assert!(
            content_type.starts_with("application/json"),
            "{method} {url}: {content_type}"
        );
        let v: serde_json::Value = r.json().unwrap();
        let keys = documented_keys(description).unwrap_or_else(|| match path {
            "/api/v1/openapi.json" => vec!["openapi".into(), "info".into(), "paths".into()],
            _ => panic!("{method} {path}: no shape in its 200 description {description:?}"),
        });
        assert!(!keys.is_empty(), "{method} {path}");
        for k in &keys {
            assert!(v.get(k).is_some(), "{method} {url}: no {k:?} in {v}");
        }
        answers.insert(format!("{} {path}", method.to_uppercase()), v);
    }
    // And the answers hold the data.
    let a = |k: &str| &answers[k];
    let len = |v: &serde_json::Value| v.as_array().map_or(0, Vec::len);
    assert_eq!(len(&a("GET /api/v1/traces")["traces"]), 1);
    let t = a("GET /api/v1/traces/{trace_id}");
    assert_eq!(
        (t["span_count"].clone(), t["error_count"].clone()),
        (2.into(), 1.into())
    );
    assert_eq!(len(&a("GET /api/v1/spans")["spans"]), 2);
    assert_eq!(a("POST /api/v1/spans")["accepted"], 1);
    assert!(a("POST /api/v1/backups")["files"].as_u64().unwrap() > 0);
    assert!(dir.path().join("backup/manifest.json").exists());
    assert_eq!(a("POST /api/v1/sql")["rows"], serde_json::json!([[2]]));
    assert_eq!(len(&a("GET /api/v1/logs")["logs"]), 6);
    assert_eq!(len(&a("GET /api/v1/metrics")["points"]), 4);
    let names = &a("GET /api/v1/metrics/names")["metrics"];
    assert_eq!(
        names
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["points"])
            .filter_map(|n| n.as_u64())
            .sum::<u64>(),
        4,
        "{names}"
    );
    let series = a("GET /api/v1/series/services");
    assert!(len(&series["times_unix_nano"]) <= 30);
    assert_eq!(
        len(&series["times_unix_nano"]),
        len(&series["services"][0]["spans"]),
        "{series}"
    );
    assert!(
        a("GET /api/v1/services")["services"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["service"] == "svc")
    );
    assert_eq!(len(&a("GET /api/v1/services/{service}/operations")["operations"]), 2);
    assert_eq!(a("GET /api/v1/summary")["error_spans"], 1);
    assert!(a("GET /api/v1/summary")["findings"].is_array());
    let without = s.get_json("/api/v1/summary?findings=false");
    assert_eq!(without["error_spans"], 1);
    assert!(without.get("findings").is_none(), "{without}");
    let usage = &a("GET /api/v1/llm/usage")["groups"][0];
    assert_eq!((usage["key"].clone(), usage["calls"].clone()), ("svc".into(), 1.into()));
    assert_eq!(usage["input_tokens"], 1000);
    assert_eq!(a("GET /api/v1/sessions")["sessions"][0]["spans"], 2);
    assert_eq!(len(&a("GET /api/v1/sessions/{id}")["turns"]), 1);
    let scores = &a("GET /api/v1/scores")["scores"];
    assert_eq!(len(scores), 1, "{scores}");
    assert_eq!(scores[0]["id"], a("POST /api/v1/scores")["id"]);
    assert_eq!(
        (
            scores[0]["name"].clone(),
            scores[0]["value"].clone(),
            scores[0]["source"].clone()
        ),
        ("helpful".into(), 0.9.into(), "human".into())
    );
    // A bad score names its field; a score of an unknown trace is refused
    // unless asked for.
    let post = |body: serde_json::Value, query: &str| {
        http.post(format!("{}/api/v1/scores{query}", s.api))
            .json(&body)
            .send()
            .unwrap()
    };
    let r = post(serde_json::json!({"trace_id": trace_id, "name": "x", "value": [1]}), "");
    assert_eq!(r.status(), 400);
    assert!(r.text().unwrap().contains("field value"));
    let r = post(
        serde_json::json!({"trace_id": trace_id, "name": "x", "value": 1, "colour": "red"}),
        "",
    );
    assert_eq!(r.status(), 400);
    assert!(r.text().unwrap().contains("field colour"));
    let unknown = serde_json::json!({"trace_id": "0000000000000000000000000000abcd", "name": "x", "value": true});
    assert_eq!(post(unknown.clone(), "").status(), 404);
    assert_eq!(post(unknown, "?allow_unknown_trace=true").status(), 200);
    // Scores aggregate in usage: the score of the LLM span's trace, not the
    // one of a trace without calls.
    let v = s.get_json("/api/v1/llm/usage?group_by=service&include=scores");
    assert_eq!(
        v["groups"][0]["scores"]["helpful"],
        serde_json::json!({"mean": 0.9, "count": 1}),
        "{v}"
    );
    assert_eq!(v["totals"]["scores"]["helpful"]["count"], 1);
    assert!(v["totals"]["scores"].get("x").is_none(), "{v}");
    // `limit` caps a whole export (not a page); past 10,000 too.
    for (limit, lines) in [("1", 2), ("20000", 3)] {
        let text = http
            .get(format!(
                "{}/api/v1/export?signal=spans&service=svc&limit={limit}",
                s.api
            ))
            .send()
            .unwrap()
            .text()
            .unwrap();
        assert_eq!(text.lines().count(), lines, "limit {limit}: {text}");
    }
    assert_eq!(a("GET /api/v1/correlate/{trace_id}")["trace"]["span_count"], 2);
    assert_eq!(a("GET /api/v1/stats")["spans"], 3);

    let r = http.get(format!("{}/api/v1/nope", s.api)).send().unwrap();
    assert_eq!(r.status(), 404);
    let r = http
        .get(format!("{}/api/v1/spans?bogus=1&limit=5", s.api))
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(v["error"]["code"], "bad_request");
    assert!(v["error"]["message"].as_str().unwrap().contains("bogus"));
}

#[test]
fn small_and_large_traces_are_both_served_whole() {
    // Small traces are looked up on the I/O thread, big ones (more than
    // 128 stored spans) on the blocking pool: both must answer in full,
    // in both formats, from the hot tier and from parts.
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(&dir.path().join("data"), &[]);
    let t0 = now_ns() - HOUR_NS / 2;
    let trace = |id: &str, n: u64| -> serde_json::Value {
        let spans: Vec<serde_json::Value> = (0..n)
            .map(|i| {
                serde_json::json!({"trace_id": id, "span_id": format!("{:016x}", i + 1),
                    "parent_span_id": if i == 0 { None } else { Some("0000000000000001") },
                    "name": format!("op-{i}"), "service": "svc", "start_time_unix_nano": t0 + i * 1000,
                    "duration_ns": 500})
            })
            .collect();
        serde_json::json!({ "spans": spans })
    };
    let small = "0123456789abcdef0123456789abcdef";
    let large = "fedcba9876543210fedcba9876543210";
    let http = client();
    for (id, n) in [(small, 10), (large, 300)] {
        let r = http
            .post(format!("{}/api/v1/spans", s.api))
            .json(&trace(id, n))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let check = |s: &Server| {
        for (id, n) in [(small, 10usize), (large, 300)] {
            let t = s.get_json(&format!("/api/v1/traces/{id}"));
            assert_eq!(t["span_count"], n, "{id}");
            let names: std::collections::HashSet<&str> = t["spans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap())
                .collect();
            assert_eq!(names.len(), n, "{id}: every span once");
            assert_eq!(read_trace_otlp(s, id).len(), n, "{id} as OTLP");
        }
        let r = http
            .get(format!("{}/api/v1/traces/{}", s.api, "0".repeat(31) + "1"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 404);
    };
    check(&s);
    // Again from a part, after a restart flushed the hot tier.
    assert!(s.stop().success());
    s.restart();
    check(&s);
}
