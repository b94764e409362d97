//! The `skein` client commands end to end: a real server on free ports, a
//! crafted dataset ingested through the JSON span API and OTLP/HTTP, and the
//! CLI binary run against it, asserting its exact JSON, tables, NDJSON and
//! exit codes (0 ok, 1 no results, 2 usage, 3 unreachable, 4 server error).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;
use prost::Message;
use serde_json::{Value, json};
use skein_model::otlp::{logs_to_otlp, metrics_to_otlp};
use skein_model::{
    AnyValue, KeyValue, LogRecord, MetricDesc, MetricKind, MetricPoint, Number, PointValue, Resource, SpanId, TraceId,
};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// One run of the CLI.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        assert!(
            !self.stdout.trim().contains('\n'),
            "JSON off a terminal is one line: {}",
            self.stdout
        );
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {:?} / {}", self.stdout, self.stderr))
    }
    fn lines(&self) -> Vec<Value> {
        self.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
    fn error(&self) -> Value {
        serde_json::from_str(self.stderr.trim()).unwrap_or_else(|e| panic!("{e}: stderr {:?}", self.stderr))
    }
    #[track_caller]
    fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "stdout {}\nstderr {}", self.stdout, self.stderr);
        self
    }
}

fn cmd(server: &str, args: &[&str]) -> Command {
    let mut c = Command::new(common::bin());
    c.args(args)
        .env("SKEIN_SERVER", server)
        .env_remove("SKEIN_TOKEN")
        .stdin(Stdio::null());
    c
}

fn skein(server: &str, args: &[&str]) -> Run {
    let o = cmd(server, args).output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

fn post_spans(s: &Server, spans: Value) {
    let n = spans.as_array().unwrap().len();
    let r = http()
        .post(format!("{}/api/v1/spans", s.api))
        .json(&spans)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().unwrap();
    assert_eq!(v["accepted"], n, "{v}");
}

fn post_otlp(s: &Server, path: &str, body: Vec<u8>) {
    let r = http()
        .post(format!("{}{path}", s.otlp_http))
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{path}");
}

fn resource(service: &str) -> Arc<Resource> {
    Arc::new(Resource {
        attributes: vec![KeyValue::new("service.name", service)],
        ..Default::default()
    })
}

fn log(res: &Arc<Resource>, t: u64, sev: i32, body: &str, trace: Option<&str>, span: Option<&str>) -> LogRecord {
    LogRecord {
        time_unix_nano: t,
        observed_time_unix_nano: t,
        severity_number: sev,
        severity_text: skein_model::log::severity_band(sev).to_uppercase(),
        body: AnyValue::Str(body.into()),
        trace_id: trace.map(|h| TraceId::from_hex(h).unwrap()),
        span_id: span.map(|h| SpanId::from_hex(h).unwrap()),
        resource: res.clone(),
        ..Default::default()
    }
}

fn point(res: &Arc<Resource>, desc: &Arc<MetricDesc>, t: u64, v: i64) -> MetricPoint {
    MetricPoint {
        metric: desc.clone(),
        time_unix_nano: t,
        start_time_unix_nano: t - 10 * SEC,
        value: PointValue::Number(Some(Number::Int(v))),
        resource: res.clone(),
        ..Default::default()
    }
}

/// The quantile the engine's sketch reports is within 1% of the exact
/// nearest-rank one (the API documents it so).
fn nearest_rank(values: &[u64], q: f64) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Equal, except that percentiles (`p50_ns`, `p95_ns`, `p99_ns`) may be off
/// by the sketch's 1%.
#[track_caller]
fn assert_json_eq(actual: &Value, expected: &Value) {
    fn walk(a: &Value, e: &Value, path: &str) -> Result<(), String> {
        match (a, e) {
            (Value::Object(am), Value::Object(em)) => {
                let ak: Vec<&String> = am.keys().collect();
                let ek: Vec<&String> = em.keys().collect();
                if ak != ek {
                    return Err(format!("{path}: keys {ak:?} != {ek:?}"));
                }
                for (k, ev) in em {
                    let p = format!("{path}.{k}");
                    if matches!(k.as_str(), "p50_ns" | "p95_ns" | "p99_ns") {
                        let (x, y) = (am[k].as_f64().unwrap(), ev.as_f64().unwrap());
                        if (x - y).abs() > y * 0.0101 {
                            return Err(format!("{p}: {x} not within 1% of {y}"));
                        }
                    } else {
                        walk(&am[k], ev, &p)?;
                    }
                }
                Ok(())
            }
            (Value::Array(aa), Value::Array(ea)) if aa.len() == ea.len() => aa
                .iter()
                .zip(ea)
                .enumerate()
                .try_for_each(|(i, (x, y))| walk(x, y, &format!("{path}[{i}]"))),
            _ if a == e => Ok(()),
            _ => Err(format!("{path}: {a} != {e}")),
        }
    }
    if let Err(e) = walk(actual, expected, "$") {
        panic!("{e}\nactual:   {actual}\nexpected: {expected}");
    }
}

// ---------------------------------------------------------------------------
// The shop: three traces over three services, with logs and metrics.

const TA: &str = "0af7651916cd43dd8448eb211c80319c";
const TB: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TC: &str = "5b8efff798038103d269b633813fc60c";
const MISSING: &str = "00000000000000000000000000000bad";

struct Shop {
    _dir: tempfile::TempDir,
    s: Server,
    /// Start of trace A; everything else is placed relative to it.
    b: u64,
}

/// A span for the JSON span API (all positional: reads like a table row).
#[allow(clippy::too_many_arguments)]
fn span(
    trace: &str,
    id: &str,
    parent: Option<&str>,
    service: &str,
    name: &str,
    kind: &str,
    start: u64,
    dur: u64,
) -> Value {
    json!({"trace_id": trace, "span_id": id, "parent_span_id": parent, "service": service, "name": name,
           "kind": kind, "start_time_unix_nano": start, "duration_ns": dur})
}

fn shop() -> Shop {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let b = now_ns() - 5 * MIN;
    let mut a1 = span(
        TA,
        "a000000000000001",
        None,
        "checkout",
        "GET /checkout",
        "server",
        b,
        100 * MS,
    );
    a1["status"] = json!("ok");
    a1["attributes"] = json!({"http.route": "/checkout", "http.status_code": 200, "user.tier": "gold"});
    a1["resource"] = json!({"host.name": "web-1"});
    let a2 = span(
        TA,
        "a000000000000002",
        Some("a000000000000001"),
        "checkout",
        "reserve",
        "internal",
        b + 5 * MS,
        20 * MS,
    );
    let mut a3 = span(
        TA,
        "a000000000000003",
        Some("a000000000000002"),
        "inventory",
        "SELECT stock",
        "client",
        b + 10 * MS,
        10 * MS,
    );
    a3["attributes"] = json!({"db.system": "postgres"});
    let mut a4 = span(
        TA,
        "a000000000000004",
        Some("a000000000000001"),
        "payments",
        "POST /charge",
        "server",
        b + 30 * MS,
        60 * MS,
    );
    a4["status"] = json!({"code": "error", "message": "card declined"});
    a4["attributes"] = json!({"http.status_code": 502});
    a4["events"] = json!([{"name": "retry", "time_unix_nano": b + 50 * MS, "attributes": {"attempt": 2}}]);
    let mut b1 = span(
        TB,
        "b000000000000001",
        None,
        "checkout",
        "GET /checkout",
        "server",
        b + SEC,
        50 * MS,
    );
    b1["status"] = json!("ok");
    b1["attributes"] = json!({"http.status_code": 200, "user.tier": "silver"});
    b1["resource"] = json!({"host.name": "web-1"});
    let b2 = span(
        TB,
        "b000000000000002",
        Some("b000000000000001"),
        "inventory",
        "SELECT stock",
        "client",
        b + SEC + 10 * MS,
        5 * MS,
    );
    let mut c1 = span(
        TC,
        "c000000000000001",
        None,
        "checkout",
        "GET /cart",
        "server",
        b + 2 * SEC,
        20 * MS,
    );
    c1["attributes"] = json!({"http.status_code": 200});
    post_spans(&s, json!([a1, a2, a3, a4, b1, b2, c1]));

    let (checkout, inventory, payments) = (resource("checkout"), resource("inventory"), resource("payments"));
    let logs = vec![
        log(
            &payments,
            b + 60 * MS,
            17,
            "charge failed: card declined",
            Some(TA),
            Some("a000000000000004"),
        ),
        log(
            &inventory,
            b + 15 * MS,
            9,
            "reserved 2 items",
            Some(TA),
            Some("a000000000000003"),
        ),
        log(&checkout, b + 3 * SEC, 13, "cache miss", None, None),
        log(&checkout, b + 2 * SEC + 5 * MS, 9, "cart viewed", Some(TC), None),
    ];
    post_otlp(&s, "/v1/logs", logs_to_otlp(&logs).encode_to_vec());
    let depth = Arc::new(MetricDesc {
        name: "queue.depth".into(),
        kind: MetricKind::Gauge,
        ..Default::default()
    });
    let requests = Arc::new(MetricDesc {
        name: "http.requests".into(),
        unit: "1".into(),
        kind: MetricKind::Sum {
            temporality: skein_model::metric::Temporality::Cumulative,
            monotonic: true,
        },
        ..Default::default()
    });
    let points = vec![
        point(&payments, &depth, b + 10 * SEC, 7),
        point(&payments, &depth, b - 3 * MIN, 3),
        point(&checkout, &requests, b + 20 * SEC, 42),
    ];
    post_otlp(&s, "/v1/metrics", metrics_to_otlp(&points).encode_to_vec());
    Shop { _dir: dir, s, b }
}

/// The JSON of span A4 (payments POST /charge) as the API returns it.
fn a4_json(b: u64) -> Value {
    json!({
        "trace_id": TA, "span_id": "a000000000000004", "parent_span_id": "a000000000000001",
        "service": "payments", "name": "POST /charge", "kind": "server",
        "start_time_unix_nano": b + 30 * MS, "end_time_unix_nano": b + 90 * MS, "duration_ns": 60 * MS,
        "status": {"code": "error", "message": "card declined"},
        "attributes": {"http.status_code": 502},
        "resource": {"service.name": "payments"},
        "scope": {"name": "", "version": null},
        "events": [{"name": "retry", "time_unix_nano": b + 50 * MS, "attributes": {"attempt": 2}}],
        "links": [],
    })
}

#[test]
fn status_services_and_operations() {
    let shop = shop();
    let api = &shop.s.api;

    let st = skein(api, &["status"]).ok().json();
    assert_eq!(st["server"], json!(api));
    assert_eq!(
        (st["ready"].clone(), st["status"].clone()),
        (json!(true), json!("ready"))
    );
    assert_eq!(
        (st["spans"].clone(), st["logs"].clone(), st["metric_points"].clone()),
        (json!(7), json!(4), json!(3))
    );
    assert_eq!(st["records"], 14);
    assert_eq!(st["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(st["data_dir"], json!(shop.s.data_dir.display().to_string()));
    for k in [
        "uptime_seconds",
        "bytes_on_disk",
        "wal_bytes",
        "parts",
        "resident_memory_bytes",
    ] {
        assert!(st[k].is_number(), "status has {k}: {st}");
    }
    assert_eq!(
        skein(api, &["status", "--fields", "ready,spans,logs"]).ok().json(),
        json!({"ready": true, "spans": 7, "logs": 4})
    );

    // Window ALL: the rate is over the data's own time span, B .. B+2s.
    let rate = |n: u64| n as f64 / ((2 * SEC + 1) as f64 / 1e9);
    let svc = |name: &str, durations: &[u64], traces: u64, errors: u64| {
        json!({
            "service": name, "spans": durations.len(), "traces": traces, "errors": errors,
            "error_rate": errors as f64 / durations.len() as f64,
            "p50_ns": nearest_rank(durations, 0.5), "p95_ns": nearest_rank(durations, 0.95),
            "p99_ns": nearest_rank(durations, 0.99), "max_ns": durations.iter().max(),
            "rate_per_sec": rate(durations.len() as u64),
        })
    };
    let services = skein(api, &["services"]).ok().json();
    assert_json_eq(
        &services,
        &json!({
            "window": {"start_unix_nano": 0, "end_unix_nano": null},
            "services": [
                svc("checkout", &[100 * MS, 20 * MS, 50 * MS, 20 * MS], 3, 0),
                svc("inventory", &[10 * MS, 5 * MS], 2, 0),
                svc("payments", &[60 * MS], 1, 1),
            ],
        }),
    );
    assert_eq!(
        skein(api, &["services", "--fields", "service,errors,error_rate"])
            .ok()
            .json()["services"],
        json!([
            {"service": "checkout", "errors": 0, "error_rate": 0.0},
            {"service": "inventory", "errors": 0, "error_rate": 0.0},
            {"service": "payments", "errors": 1, "error_rate": 1.0},
        ])
    );

    let op = |name: &str, durations: &[u64]| {
        json!({
            "service": "checkout", "name": name, "spans": durations.len(), "errors": 0, "error_rate": 0.0,
            "p50_ns": nearest_rank(durations, 0.5), "p95_ns": nearest_rank(durations, 0.95),
            "p99_ns": nearest_rank(durations, 0.99), "rate_per_sec": rate(durations.len() as u64),
        })
    };
    assert_json_eq(
        &skein(api, &["operations", "checkout"]).ok().json(),
        &json!({
            "service": "checkout",
            "window": {"start_unix_nano": 0, "end_unix_nano": null},
            "operations": [op("GET /cart", &[20 * MS]), op("GET /checkout", &[100 * MS, 50 * MS]), op("reserve", &[20 * MS])],
        }),
    );
    // A service name is one path segment, whatever it contains.
    let r = skein(api, &["operations", "no such/service"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.json()["operations"], json!([]));
    assert_eq!(r.json()["service"], "no such/service");

    // Tables: a header, aligned columns, numbers right-aligned, humanized.
    // (Percentiles are within 1%, so their exact text is not asserted.)
    let t = skein(api, &["services", "--format", "table"]).ok().stdout.clone();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 4, "{t}");
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        words(lines[0]),
        [
            "SERVICE", "SPANS", "TRACES", "ERRORS", "ERROR%", "P50", "P95", "P99", "MAX", "RATE/S"
        ]
    );
    assert!(
        lines[0].starts_with("SERVICE    SPANS  TRACES  ERRORS  ERROR%  "),
        "{t}"
    );
    assert!(
        lines[1].starts_with("checkout       4       3       0    0.0%  "),
        "{t}"
    );
    assert!(
        lines[3].starts_with("payments       1       1       1  100.0%  "),
        "{t}"
    );
    assert_eq!(words(lines[1])[8..], ["100ms", "2"], "{t}");
    assert_eq!(words(lines[2])[8..], ["10ms", "1"], "{t}");
    assert_eq!(words(lines[3])[8..], ["60ms", "0.5"], "{t}");
    for l in &lines {
        // The last column is right-aligned: every line is as wide.
        assert_eq!(l.chars().count(), lines[0].chars().count(), "aligned: {t}");
    }
    let t = skein(
        api,
        &[
            "operations",
            "checkout",
            "--format",
            "table",
            "--fields",
            "name,spans,error_rate",
        ],
    )
    .ok()
    .stdout
    .clone();
    assert_eq!(
        t,
        "NAME           SPANS  ERROR%\nGET /cart          1    0.0%\nGET /checkout      2    0.0%\nreserve            1    0.0%\n"
    );
}

#[test]
fn query_spans_traces_logs_and_metrics() {
    let Shop { s, b, _dir } = shop();
    let api = &s.api;

    // An attribute filter, typed loosely: exactly the payments span.
    let r = skein(api, &["query", "spans", "--attr", "http.status_code=502"])
        .ok()
        .json();
    assert_eq!(r, json!({"spans": [a4_json(b)], "next_cursor": null}));
    let names = |r: &Value, list: &str, key: &str| -> Vec<Value> {
        r[list].as_array().unwrap().iter().map(|x| x[key].clone()).collect()
    };
    let r = skein(
        api,
        &[
            "query",
            "spans",
            "--attr",
            "user.tier=gold",
            "--attr",
            "http.status_code=200",
        ],
    )
    .ok()
    .json();
    assert_eq!(names(&r, "spans", "span_id"), [json!("a000000000000001")]);
    let r = skein(
        api,
        &["query", "spans", "--service", "checkout", "--name", "GET /checkout"],
    )
    .ok()
    .json();
    assert_eq!(
        names(&r, "spans", "span_id"),
        [json!("b000000000000001"), json!("a000000000000001")]
    );
    let r = skein(
        api,
        &[
            "query",
            "spans",
            "--min-duration",
            "50ms",
            "--kind",
            "server",
            "--status",
            "ok",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        names(&r, "spans", "span_id"),
        [json!("b000000000000001"), json!("a000000000000001")]
    );
    let r = skein(
        api,
        &[
            "query",
            "spans",
            "--name-contains",
            "STOCK",
            "--last",
            "1h",
            "--resource",
            "service.name=inventory",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        names(&r, "spans", "span_id"),
        [json!("b000000000000002"), json!("a000000000000003")]
    );
    let r = skein(api, &["query", "spans", "--event", "attempt=2"]).ok().json();
    assert_eq!(names(&r, "spans", "span_id"), [json!("a000000000000004")]);
    let r = skein(api, &["query", "spans", "--trace-id", TA, "--root"]).ok().json();
    assert_eq!(names(&r, "spans", "span_id"), [json!("a000000000000001")]);
    let r = skein(api, &["query", "spans", "--service", "payments", "--explain"])
        .ok()
        .json();
    assert!(r["explain"].is_object(), "{r}");

    // Pages: newest first, next_cursor until the last page.
    let p1 = skein(api, &["query", "spans", "--service", "checkout", "--limit", "2"])
        .ok()
        .json();
    assert_eq!(
        names(&p1, "spans", "span_id"),
        [json!("c000000000000001"), json!("b000000000000001")]
    );
    let cursor = p1["next_cursor"].as_str().expect("a next page").to_string();
    let p2 = skein(
        api,
        &[
            "query",
            "spans",
            "--service",
            "checkout",
            "--limit",
            "2",
            "--cursor",
            &cursor,
        ],
    )
    .ok()
    .json();
    assert_eq!(
        names(&p2, "spans", "span_id"),
        [json!("a000000000000002"), json!("a000000000000001")]
    );
    assert_eq!(p2["next_cursor"], Value::Null);

    // --fields trims each span; dotted paths reach into objects.
    let r = skein(
        api,
        &[
            "query",
            "spans",
            "--service",
            "payments",
            "--fields",
            "name,status.code,attributes.http.status_code",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        r,
        json!({"spans": [{"name": "POST /charge", "status.code": "error", "attributes.http.status_code": 502}], "next_cursor": null})
    );

    // Traces: one summary per trace with a matching span.
    let r = skein(api, &["query", "traces", "--service", "payments"]).ok().json();
    assert_eq!(
        r,
        json!({"traces": [{
            "trace_id": TA,
            "root": {"span_id": "a000000000000001", "service": "checkout", "name": "GET /checkout", "duration_ns": 100 * MS},
            "start_time_unix_nano": b, "end_time_unix_nano": b + 100 * MS, "duration_ns": 100 * MS,
            "span_count": 4, "error_count": 1, "services": ["checkout", "inventory", "payments"],
        }], "next_cursor": null})
    );
    let r = skein(api, &["query", "traces", "--fields", "trace_id,span_count"])
        .ok()
        .json();
    assert_eq!(
        r["traces"],
        json!([{"trace_id": TC, "span_count": 1}, {"trace_id": TB, "span_count": 2}, {"trace_id": TA, "span_count": 4}])
    );

    // Trace pages: each trace once, though its spans straddle the pages.
    let mut cursor: Option<String> = None;
    let mut listed = Vec::new();
    for _ in 0..3 {
        let mut args = vec!["query", "traces", "--limit", "1", "--fields", "trace_id"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let r = skein(api, &args).ok().json();
        listed.extend(names(&r, "traces", "trace_id"));
        cursor = r["next_cursor"].as_str().map(str::to_string);
    }
    assert_eq!(listed, [json!(TC), json!(TB), json!(TA)]);
    // The last page says so: no cursor to an empty page.
    assert_eq!(cursor, None);

    // Logs.
    let r = skein(api, &["query", "logs", "--severity", "warn"]).ok().json();
    assert_eq!(
        names(&r, "logs", "body"),
        [json!("cache miss"), json!("charge failed: card declined")]
    );
    let r = skein(api, &["query", "logs", "--body", "DECLINED"]).ok().json();
    assert_eq!(
        r,
        json!({"logs": [{
            "time_unix_nano": b + 60 * MS, "observed_time_unix_nano": b + 60 * MS, "service": "payments",
            "severity_number": 17, "severity_text": "ERROR", "severity": "error",
            "body": "charge failed: card declined", "attributes": {}, "resource": {"service.name": "payments"},
            "trace_id": TA, "span_id": "a000000000000004", "event_name": null,
            "scope": {"name": "", "version": null},
        }], "next_cursor": null})
    );
    let r = skein(api, &["query", "logs", "--trace-id", TA, "--fields", "body"])
        .ok()
        .json();
    assert_eq!(
        r["logs"],
        json!([{"body": "charge failed: card declined"}, {"body": "reserved 2 items"}])
    );
    let r = skein(
        api,
        &[
            "query",
            "logs",
            "--span-id",
            "a000000000000003",
            "--service",
            "inventory",
        ],
    )
    .ok()
    .json();
    assert_eq!(names(&r, "logs", "body"), [json!("reserved 2 items")]);

    // Metrics.
    let r = skein(api, &["query", "metrics", "--name", "queue.depth"]).ok().json();
    assert_eq!(
        r,
        json!({"points": [
            {"name": "queue.depth", "type": "gauge", "unit": null, "description": null, "service": "payments",
             "time_unix_nano": b + 10 * SEC, "start_time_unix_nano": b, "attributes": {},
             "resource": {"service.name": "payments"}, "value": 7},
            {"name": "queue.depth", "type": "gauge", "unit": null, "description": null, "service": "payments",
             "time_unix_nano": b - 3 * MIN, "start_time_unix_nano": b - 3 * MIN - 10 * SEC, "attributes": {},
             "resource": {"service.name": "payments"}, "value": 3},
        ], "next_cursor": null})
    );
    let r = skein(
        api,
        &[
            "query",
            "metrics",
            "--service",
            "checkout",
            "--fields",
            "name,value,monotonic,temporality",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        r["points"],
        json!([{"name": "http.requests", "value": 42, "monotonic": true, "temporality": "cumulative"}])
    );

    // A table of spans.
    let t = skein(api, &["query", "spans", "--trace-id", TA, "--format", "table"])
        .ok()
        .stdout
        .clone();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 5, "{t}");
    assert_eq!(
        lines[0],
        format!(
            "{:<24}  {:<32}  {:<16}  SERVICE    NAME           KIND      DURATION  STATUS",
            "START", "TRACE", "SPAN"
        )
    );
    let row = lines.iter().find(|l| l.contains("POST /charge")).unwrap();
    assert_eq!(
        *row,
        format!(
            "{}  {TA}  a000000000000004  payments   POST /charge   server        60ms  error: card declined",
            output_time(b + 30 * MS)
        )
    );
    // More pages are pointed at.
    let t = skein(api, &["query", "spans", "--limit", "1", "--format", "table"])
        .ok()
        .stdout
        .clone();
    assert!(t.lines().last().unwrap().starts_with("(more: --cursor "), "{t}");
}

/// RFC 3339 UTC to the millisecond, as tables show times.
fn output_time(ns: u64) -> String {
    let secs = ns / SEC;
    let millis = (ns % SEC) / MS;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[test]
fn get_trace_waterfall_and_correlate() {
    let Shop { s, b, _dir } = shop();
    let api = &s.api;

    let t = skein(api, &["get", "trace", TA]).ok().json();
    let tree: Vec<(Value, Value, Value)> = t["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["service"].clone(), s["name"].clone(), s["depth"].clone()))
        .collect();
    assert_eq!(
        tree,
        [
            (json!("checkout"), json!("GET /checkout"), json!(0)),
            (json!("checkout"), json!("reserve"), json!(1)),
            (json!("inventory"), json!("SELECT stock"), json!(2)),
            (json!("payments"), json!("POST /charge"), json!(1)),
        ]
    );
    let mut a4 = a4_json(b);
    a4["depth"] = json!(1);
    assert_eq!(t["spans"][3], a4);
    assert_eq!(
        t["root"],
        json!({"span_id": "a000000000000001", "service": "checkout", "name": "GET /checkout", "duration_ns": 100 * MS})
    );
    for (k, v) in [
        ("trace_id", json!(TA)),
        ("start_time_unix_nano", json!(b)),
        ("end_time_unix_nano", json!(b + 100 * MS)),
        ("duration_ns", json!(100 * MS)),
        ("span_count", json!(4)),
        ("error_count", json!(1)),
        ("services", json!(["checkout", "inventory", "payments"])),
    ] {
        assert_eq!(t[k], v, "{k}");
    }
    assert_eq!(
        skein(api, &["get", "trace", TA, "--fields", "name,depth"]).ok().json()["spans"],
        json!([
            {"name": "GET /checkout", "depth": 0}, {"name": "reserve", "depth": 1},
            {"name": "SELECT stock", "depth": 2}, {"name": "POST /charge", "depth": 1},
        ])
    );
    // OTLP/JSON.
    let otlp = skein(api, &["get", "trace", TA, "--format", "otlp"]).ok().json();
    let n: usize = otlp["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rs| rs["scopeSpans"].as_array().unwrap())
        .map(|ss| ss["spans"].as_array().unwrap().len())
        .sum();
    assert_eq!(n, 4);

    // The waterfall: the tree indented by depth, bars placed in the trace.
    let w = skein(api, &["get", "trace", TA, "--format", "table"])
        .ok()
        .stdout
        .clone();
    let lines: Vec<&str> = w.lines().collect();
    assert_eq!(
        lines[0],
        format!("TRACE {TA}  100ms  4 spans  1 error  services: checkout, inventory, payments")
    );
    assert_eq!(
        lines[1],
        format!("{:<26}  DURATION  STATUS  |{:<40}|", "SPAN", "0 → 100ms")
    );
    let bar =
        |from: usize, to: usize| format!("|{}{}{}|", " ".repeat(from), "█".repeat(to - from), " ".repeat(40 - to));
    let row = |label: &str, dur: &str, status: &str, bar: String| format!("{label:<26}  {dur:>8}  {status:<6}  {bar}");
    assert_eq!(lines[2], row("checkout GET /checkout", "100ms", "", bar(0, 40)));
    assert_eq!(lines[3], row("  checkout reserve", "20ms", "", bar(2, 10)));
    assert_eq!(lines[4], row("    inventory SELECT stock", "10ms", "", bar(4, 8)));
    assert_eq!(lines[5], row("  payments POST /charge", "60ms", "error", bar(12, 36)));
    assert_eq!(lines.len(), 6);

    // Correlate: the trace, its logs by time, its services' metrics nearby.
    let c = skein(api, &["correlate", "--trace", TA]).ok().json();
    assert_eq!(c["trace"], t);
    let bodies: Vec<&Value> = c["logs"].as_array().unwrap().iter().map(|l| &l["body"]).collect();
    assert_eq!(
        bodies,
        [&json!("reserved 2 items"), &json!("charge failed: card declined")]
    );
    let metrics: Vec<(Value, Value)> = c["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].clone(), m["value"].clone()))
        .collect();
    assert_eq!(
        metrics,
        [(json!("http.requests"), json!(42)), (json!("queue.depth"), json!(7))]
    );
    assert_eq!(
        c["metrics_window"],
        json!({"start_unix_nano": b - MIN, "end_unix_nano": b + 100 * MS + MIN})
    );
    assert_eq!(
        skein(api, &["correlate", "--trace", TA, "--fields", "metrics_window"])
            .ok()
            .json(),
        json!({"metrics_window": {"start_unix_nano": b - MIN, "end_unix_nano": b + 100 * MS + MIN}})
    );
    let ct = skein(api, &["correlate", "--trace", TA, "--format", "table"])
        .ok()
        .stdout
        .clone();
    assert!(ct.contains("\nLOGS (2)\nTIME"), "{ct}");
    assert!(
        ct.contains("  payments   error     charge failed: card declined  "),
        "{ct}"
    );
    assert!(ct.contains("\nMETRICS (2)\n"), "{ct}");

    // Not there: exit 1, the API's error on stderr.
    for args in [&["get", "trace", MISSING][..], &["correlate", "--trace", MISSING]] {
        let r = skein(api, args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "");
        assert_eq!(
            r.error(),
            json!({"error": {"code": "not_found", "message": format!("trace {MISSING} not found")}})
        );
    }
}

#[test]
fn tail_and_watch_print_ndjson() {
    let Shop { s, b, _dir } = shop();
    let api = &s.api;

    // The latest records of both signals, oldest first, one JSON per line.
    let r = skein(api, &["tail", "--limit", "3"]);
    r.ok();
    let lines = r.lines();
    let got: Vec<(Value, Value)> = lines
        .iter()
        .map(|l| {
            (
                l["signal"].clone(),
                l["start_time_unix_nano"]
                    .clone()
                    .as_u64()
                    .or(l["time_unix_nano"].as_u64())
                    .into(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (json!("span"), json!(b + 2 * SEC)),
            (json!("log"), json!(b + 2 * SEC + 5 * MS)),
            (json!("log"), json!(b + 3 * SEC)),
        ]
    );
    assert_eq!(lines[0]["span_id"], "c000000000000001");
    assert_eq!(lines[2]["body"], "cache miss");
    let r = skein(
        api,
        &[
            "tail",
            "--signal",
            "spans",
            "--status",
            "error",
            "--fields",
            "signal,name",
        ],
    );
    assert_eq!(r.ok().lines(), [json!({"signal": "span", "name": "POST /charge"})]);
    let r = skein(api, &["tail", "--status", "error", "--fields", "signal,service"]);
    assert_eq!(
        r.ok().lines(),
        [
            json!({"signal": "span", "service": "payments"}),
            json!({"signal": "log", "service": "payments"})
        ]
    );
    let r = skein(api, &["tail", "--service", "nobody"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    let t = skein(api, &["tail", "--limit", "1", "--format", "table"])
        .ok()
        .stdout
        .clone();
    assert_eq!(
        t,
        format!("{}  log   checkout  WARN  cache miss\n", output_time(b + 3 * SEC))
    );

    // Watch: each tick is the summary of the window since the previous one.
    // Spans keep arriving (stamped now) for 1.5s of the 2s tick; the summary
    // counts exactly those inside its window (it opened when watch started).
    let child = cmd(api, &["watch", "--count", "1", "--interval", "2s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let spawned = Instant::now();
    let mut sent = Vec::new();
    while spawned.elapsed() < Duration::from_millis(1500) {
        let t = now_ns();
        let id = 0x1000 + sent.len() as u64;
        let mut live = span(
            &format!("{id:032x}"),
            &format!("{id:016x}"),
            None,
            "live",
            "tick",
            "server",
            t,
            3 * MS,
        );
        live["status"] = json!("error");
        post_spans(&s, json!([live]));
        sent.push(t);
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let w = &v["window"];
    let (ws, we) = (
        w["start_unix_nano"].as_u64().unwrap(),
        w["end_unix_nano"].as_u64().unwrap(),
    );
    assert!(we - ws >= 2 * SEC - 50 * MS && we - ws < 3 * SEC, "{w}");
    let inside = sent.iter().filter(|t| (ws..we).contains(*t)).count();
    assert!(inside >= 1, "{inside} of {} spans in {w}", sent.len());
    assert_eq!(
        (v["spans"].clone(), v["traces"].clone(), v["error_spans"].clone()),
        (json!(inside), json!(inside), json!(inside))
    );
    assert_eq!(v["top_services"][0]["service"], "live");
    assert_eq!(v["top_services"][0]["spans"], inside);
}

#[test]
fn tail_follow_streams_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let mut child = cmd(&s.api, &["tail", "-f", "--count", "2", "--service", "live"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || BufReader::new(stdout).lines().map(|l| l.unwrap()).collect::<Vec<_>>());
    // The stream only carries what arrives after it connected: send until
    // the tail has seen two records.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0u64;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "tail -f saw nothing");
        i += 1;
        let other = span(
            &format!("{:032x}", 0xee00 + i),
            &format!("{:016x}", 0xee00 + i),
            None,
            "other",
            "x",
            "server",
            now_ns(),
            MS,
        );
        let live = span(
            &format!("{:032x}", 0xff00 + i),
            &format!("{:016x}", 0xff00 + i),
            None,
            "live",
            "GET /live",
            "server",
            now_ns(),
            MS,
        );
        post_spans(&s, json!([other, live]));
        std::thread::sleep(Duration::from_millis(150));
    }
    let lines = reader.join().unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for l in lines {
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(
            (v["signal"].clone(), v["service"].clone(), v["name"].clone()),
            (json!("span"), json!("live"), json!("GET /live"))
        );
    }
}

// ---------------------------------------------------------------------------
// Regressions: summarize against hand-computed answers; anomalies against a planted change.

#[test]
fn summarize_matches_hand_computed_answers() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let api = &s.api;
    let n = now_ns();
    let (base, cur) = (n - 20 * MIN, n - 2 * MIN);
    let mut spans = Vec::new();
    let mut id = 0u64;
    let mut add = |service: &str, name: &str, at: u64, count: u64, dur: u64, errors: u64, spans: &mut Vec<Value>| {
        for i in 0..count {
            id += 1;
            let mut sp = span(
                &format!("{id:032x}"),
                &format!("{id:016x}"),
                None,
                service,
                name,
                "server",
                at + i * SEC,
                dur,
            );
            sp["status"] = json!(if i < errors { "error" } else { "ok" });
            spans.push(sp);
        }
    };
    // slow: p95 10ms → 30ms. steady: 10ms throughout. flaky: 0% → 50% errors.
    add("slow", "GET /slow", base, 10, 10 * MS, 0, &mut spans);
    add("slow", "GET /slow", cur, 10, 30 * MS, 0, &mut spans);
    add("steady", "GET /steady", base, 12, 10 * MS, 0, &mut spans);
    add("steady", "GET /steady", cur, 12, 10 * MS, 0, &mut spans);
    add("flaky", "GET /flaky", base, 10, 10 * MS, 0, &mut spans);
    add("flaky", "GET /flaky", cur, 10, 10 * MS, 5, &mut spans);
    // Outside every window asked about.
    add("ancient", "GET /old", n - 2 * 3600 * SEC, 3, 10 * MS, 3, &mut spans);
    post_spans(&s, Value::Array(spans));
    let (flaky, slow, ancient) = (resource("flaky"), resource("slow"), resource("ancient"));
    let mut logs: Vec<LogRecord> = (0..3)
        .map(|i| log(&flaky, cur + i * SEC, 9, "ok", None, None))
        .collect();
    logs.extend((0..2).map(|i| log(&flaky, cur + 10 * SEC + i * SEC, 17, "upstream reset", None, None)));
    logs.push(log(&slow, base, 13, "slow query", None, None));
    logs.push(log(&ancient, n - 2 * 3600 * SEC, 17, "long ago", None, None));
    post_otlp(&s, "/v1/logs", logs_to_otlp(&logs).encode_to_vec());
    let depth = Arc::new(MetricDesc {
        name: "pool.size".into(),
        ..Default::default()
    });
    let points = vec![
        point(&slow, &depth, n - MIN, 4),
        point(&slow, &depth, n - MIN + 10 * SEC, 5),
    ];
    post_otlp(&s, "/v1/metrics", metrics_to_otlp(&points).encode_to_vec());

    // The last hour: 64 spans, all roots; 5 errors; 6 logs; 2 points.
    let sm = skein(api, &["summarize", "--last", "1h"]).ok().json();
    let pick = |v: &Value, keys: &[&str]| -> Value { keys.iter().map(|k| (k.to_string(), v[*k].clone())).collect() };
    assert_eq!(
        pick(
            &sm,
            &[
                "service",
                "spans",
                "traces",
                "error_spans",
                "error_rate",
                "services",
                "logs",
                "logs_by_severity",
                "metric_series",
                "metric_points"
            ]
        ),
        json!({"service": null, "spans": 64, "traces": 64, "error_spans": 5, "error_rate": 5.0 / 64.0, "services": 3,
               "logs": 6, "logs_by_severity": {"error": 2, "info": 3, "warn": 1}, "metric_series": 1, "metric_points": 2})
    );
    let durations: Vec<u64> = [vec![10 * MS; 54], vec![30 * MS; 10]].concat();
    assert_json_eq(
        &sm["latency"],
        &json!({"p50_ns": 10 * MS, "p95_ns": nearest_rank(&durations, 0.95), "p99_ns": 30 * MS, "max_ns": 30 * MS}),
    );
    let top: Vec<Value> = sm["top_services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| pick(t, &["service", "spans", "traces", "errors", "error_rate", "max_ns"]))
        .collect();
    assert_eq!(
        top,
        [
            json!({"service": "steady", "spans": 24, "traces": 24, "errors": 0, "error_rate": 0.0, "max_ns": 10 * MS}),
            json!({"service": "flaky", "spans": 20, "traces": 20, "errors": 5, "error_rate": 0.25, "max_ns": 10 * MS}),
            json!({"service": "slow", "spans": 20, "traces": 20, "errors": 0, "error_rate": 0.0, "max_ns": 30 * MS}),
        ]
    );
    let top_err: Vec<Value> = sm["top_error_operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| pick(t, &["service", "name", "spans", "errors", "error_rate"]))
        .collect();
    assert_eq!(
        top_err,
        [json!({"service": "flaky", "name": "GET /flaky", "spans": 20, "errors": 5, "error_rate": 0.25})]
    );
    let w = &sm["window"];
    assert_eq!(
        w["end_unix_nano"].as_u64().unwrap() - w["start_unix_nano"].as_u64().unwrap(),
        3600 * SEC
    );

    // The last 5 minutes, and one service.
    let sm = skein(
        api,
        &[
            "summarize",
            "--last",
            "5m",
            "--fields",
            "spans,traces,error_spans,logs,logs_by_severity",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        sm,
        json!({"spans": 32, "traces": 32, "error_spans": 5, "logs": 5, "logs_by_severity": {"error": 2, "info": 3}})
    );
    let sm = skein(
        api,
        &[
            "summarize",
            "--service",
            "flaky",
            "--fields",
            "service,spans,error_spans,logs,services",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        sm,
        json!({"service": "flaky", "spans": 20, "error_spans": 5, "logs": 5, "services": 1})
    );
    // The default window is the last hour.
    assert_eq!(
        skein(api, &["summarize", "--fields", "spans"]).ok().json(),
        json!({"spans": 64})
    );
    // Nothing in the window: exit 1.
    let r = skein(
        api,
        &[
            "summarize",
            "--since",
            "2001-01-01T00:00:00Z",
            "--until",
            "2001-01-02T00:00:00Z",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["spans"], 0);
    let t = skein(api, &["summarize", "--format", "table"]).ok().stdout.clone();
    assert!(
        t.contains("\nSPANS    64 in 64 traces, 5 errors (7.8%), 3 services\n"),
        "{t}"
    );
    assert!(t.contains("\nLOGS     6 (error 2, info 3, warn 1)\n"), "{t}");
    assert!(t.contains("\nTOP SERVICES\nSERVICE  SPANS"), "{t}");
    assert!(t.contains("\nTOP ERROR OPERATIONS\nSERVICE  OPERATION"), "{t}");
}

/// An hour of `api GET /pay → db SELECT`, six traces a minute, the query
/// ten times slower from minute 30 of 40; the last span a minute ago.
fn slow_db_world(s: &Server) -> u64 {
    let n = now_ns();
    let start = n - 41 * MIN;
    let mut spans = Vec::new();
    for m in 0..40u64 {
        for j in 0..6u64 {
            let t = start + m * MIN + j * 10 * SEC;
            let trace = format!("{:016x}{:016x}", m + 1, j + 1);
            let db = if m >= 30 { 40 * MS } else { 4 * MS } + (j * 7 + m) % 5 * MS / 10;
            let mut api = span(
                &trace,
                &format!("{:016x}", m * 100 + j * 2 + 1),
                None,
                "api",
                "GET /pay",
                "server",
                t,
                db + 2 * MS,
            );
            api["resource"] = json!({"service.version": "7.1"});
            let mut q = span(
                &trace,
                &format!("{:016x}", m * 100 + j * 2 + 2),
                Some(&format!("{:016x}", m * 100 + j * 2 + 1)),
                "db",
                "SELECT",
                "client",
                t + MS,
                db,
            );
            q["resource"] = json!({"host.name": "db-1"});
            spans.push(api);
            spans.push(q);
        }
    }
    post_spans(s, Value::Array(spans));
    start + 30 * MIN
}

#[test]
fn anomalies_find_where_a_dependency_slowed_down_and_who_inherited_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let api = &s.api;
    let change = slow_db_world(&s);
    let near = |f: &Value| {
        let t = f["started_at_unix_nano"].as_u64().unwrap();
        assert!(t.abs_diff(change) <= 2 * MIN, "{f}");
    };

    let v = skein(api, &["anomalies"]).ok().json();
    assert_eq!(v["mode"], "change_detection");
    assert_eq!(v["bucket_seconds"], 60);
    let w = &v["window"];
    // The last hour, on whole minutes.
    let covered = w["end_unix_nano"].as_u64().unwrap() - w["start_unix_nano"].as_u64().unwrap();
    assert!(covered == 60 * MIN || covered == 61 * MIN, "{w}");
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 2, "{v}");
    assert_eq!(
        (&f[0]["service"], &f[0]["operation"], &f[0]["kind"], &f[0]["role"]),
        (&json!("db"), &json!("SELECT"), &json!("latency"), &json!("cause")),
        "{v}"
    );
    near(&f[0]);
    assert_eq!(f[0]["exemplar_trace_ids"].as_array().unwrap().len(), 3);
    assert!(f[0].get("explain").is_none(), "explain only when asked");
    assert_eq!(
        (&f[1]["service"], &f[1]["role"], &f[1]["caused_by"]),
        (
            &json!("api"),
            &json!("affected"),
            &json!({"service": "db", "operation": "SELECT"})
        ),
        "{v}"
    );
    near(&f[1]);
    let msg = f[1]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("api GET /pay: p95 ") && msg.ends_with("; inherited from db SELECT"),
        "{msg}"
    );

    // People get a table; --explain adds how each finding was reached.
    let t = skein(api, &["anomalies", "--format", "table"]).ok().stdout.clone();
    assert!(t.contains("SERVICE  OPERATION  KIND     ROLE"), "{t}");
    assert!(t.contains("; inherited from db"), "{t}");
    let t = skein(api, &["anomalies", "--explain", "--format", "table"])
        .ok()
        .stdout
        .clone();
    assert!(t.contains("\ndb SELECT (latency):\n  - latency change point"), "{t}");
    assert!(t.contains("  - critical path over "), "{t}");
    let v = skein(api, &["anomalies", "--explain"]).ok().json();
    assert!(v["findings"][0]["explain"].as_array().unwrap().len() >= 3, "{v}");
    assert!(v["explain"]["sources"].is_array(), "{v}");

    // One service; fewer findings.
    let v = skein(api, &["anomalies", "--service", "api"]).ok().json();
    assert_eq!(v["findings"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["findings"][0]["service"], "api");
    let v = skein(api, &["anomalies", "--limit", "1", "--fields", "service,role"])
        .ok()
        .json();
    assert_eq!(v["findings"], json!([{"service": "db", "role": "cause"}]));

    // The fixed-split form: the last 15 minutes against the 30 before.
    let v = skein(api, &["anomalies", "--last", "15m", "--baseline", "30m"])
        .ok()
        .json();
    assert_eq!(v["mode"], "fixed_split");
    let len = |k: &str| v[k]["end_unix_nano"].as_u64().unwrap() - v[k]["start_unix_nano"].as_u64().unwrap();
    assert_eq!((len("current"), len("baseline")), (15 * MIN, 30 * MIN));
    assert_eq!(v["findings"][0]["service"], "db", "{v}");
    assert_eq!(v["findings"][0]["role"], "cause");

    // Before the change there is nothing to find: exit 1.
    let until = (change - 3 * MIN).to_string();
    let r = skein(api, &["anomalies", "--lookback", "20m", "--until", &until]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["findings"], json!([]));
    let r = skein(
        api,
        &["anomalies", "--lookback", "20m", "--until", &until, "--format", "table"],
    );
    assert!(r.stdout.contains("(no anomalies)"), "{}", r.stdout);

    // A look-back the data cannot support names the flag: exit 2.
    for (args, word) in [
        (
            vec!["anomalies", "--lookback", "0s"],
            "lookback must be longer than zero",
        ),
        (
            vec!["anomalies", "--lookback", "40d"],
            "lookback is longer than the 31 days",
        ),
        (vec!["anomalies", "--last", "0s"], "last must be longer than zero"),
        (
            vec!["anomalies", "--until", "2999-01-01T00:00:00Z"],
            "until is in the future",
        ),
    ] {
        let r = skein(api, &args);
        assert_eq!(r.code, 2, "{args:?}: {} {}", r.stdout, r.stderr);
        assert!(r.stderr.contains(word), "{args:?}: {}", r.stderr);
    }
    let r = skein(api, &["anomalies", "--lookback", "1h", "--last", "5m"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);

    // summarize carries the top findings.
    let v = skein(api, &["summarize"]).ok().json();
    assert_eq!(v["findings"][0]["service"], "db", "{v}");
    let t = skein(api, &["summarize", "--format", "table"]).ok().stdout.clone();
    assert!(t.contains("\nFINDINGS\nSERVICE  OPERATION"), "{t}");
}

// ---------------------------------------------------------------------------
// Exit codes, errors, help, the skill file.

#[test]
fn exit_codes_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let api = &s.api;

    // 1: nothing found; the empty answer is still printed.
    let r = skein(api, &["query", "spans", "--service", "nope"]);
    assert_eq!((r.code, r.stderr.as_str()), (1, ""));
    assert_eq!(r.json(), json!({"spans": [], "next_cursor": null}));
    assert_eq!(skein(api, &["services"]).code, 1);
    assert_eq!(skein(api, &["query", "logs"]).code, 1);
    assert_eq!(skein(api, &["query", "metrics"]).code, 1);
    assert_eq!(skein(api, &["query", "traces"]).code, 1);

    // 2: usage errors, found before any request, as JSON on stderr.
    for (args, needle) in [
        (&["query", "spans", "--last", "5parsecs"][..], "5parsecs"),
        (&["query", "spans", "--min-duration", "5"], "no unit"),
        (&["query", "spans", "--kind", "sideways"], "sideways"),
        (&["query", "spans", "--attr", "novalue"], "KEY=VALUE"),
        (&["query", "logs", "--severity", "loud"], "loud"),
        (&["services", "--bogus"], "--bogus"),
        (&["query", "spans", "--last", "1h", "--since", "2h"], "--since"),
        (&["watch", "--interval", "soon"], "soon"),
        (&["frobnicate"], "frobnicate"),
        (&["services", "--format", "otlp"], "otlp"),
        (&["status", "--server", "ftp://x"], "http://"),
    ] {
        let r = skein(api, args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "", "{args:?}");
        let e = r.error();
        assert_eq!(e["error"]["code"], "usage", "{args:?}: {e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(needle),
            "{args:?}: {e}"
        );
    }
    // 2: the API refused the request (400): its code and message.
    let r = skein(api, &["query", "spans", "--limit", "0"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.error(),
        json!({"error": {"code": "bad_request", "message": "parameter limit: must be between 1 and 10000"}})
    );
    let r = skein(api, &["get", "trace", "xyz"]);
    assert_eq!((r.code, r.error()["error"]["code"].clone()), (2, json!("bad_request")));

    // 3: nobody listening.
    let nobody = format!("http://127.0.0.1:{}", common::free_port());
    for args in [
        &["status"][..],
        &["services"],
        &["get", "trace", MISSING],
        &["tail", "-f"],
    ] {
        let r = skein(&nobody, args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        let e = r.error();
        assert_eq!(e["error"]["code"], "unreachable", "{e}");
        let m = e["error"]["message"].as_str().unwrap();
        assert!(m.contains(&nobody) && m.contains("skein serve"), "{m}");
    }
    // --server wins over SKEIN_SERVER.
    assert_eq!(skein(&nobody, &["status", "--server", api]).ok().json()["ready"], true);

    // 3: no answer in time.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let r = skein(&silent_url, &["services", "--timeout", "300ms"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.error()["error"]["message"].as_str().unwrap().contains("no answer"),
        "{}",
        r.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(silent);

    // 4: a server error, or something that is not a Skein API.
    let (url, handle) = fake_server(&[
        (
            "500 Internal Server Error",
            "application/json",
            r#"{"error":{"code":"internal","message":"disk on fire"}}"#,
        ),
        ("200 OK", "text/html", "<html>"),
        ("404 Not Found", "text/plain", "not found"),
    ]);
    let r = skein(&url, &["services"]);
    assert_eq!(r.code, 4);
    assert_eq!(
        r.error(),
        json!({"error": {"code": "internal", "message": "disk on fire"}})
    );
    let r = skein(&url, &["services"]);
    assert_eq!(
        (r.code, r.error()["error"]["code"].clone()),
        (4, json!("unexpected_response"))
    );
    let r = skein(&url, &["get", "trace", MISSING]);
    assert_eq!((r.code, r.error()["error"]["code"].clone()), (4, json!("http_404")));
    handle.join().unwrap();
}

/// A one-connection-per-answer HTTP server that replies with `answers` in
/// order, then stops.
fn fake_server(answers: &[(&str, &str, &str)]) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let answers: Vec<String> = answers
        .iter()
        .map(|(status, ct, body)| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        })
        .collect();
    let h = std::thread::spawn(move || {
        for a in answers {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let mut req = Vec::new();
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            c.write_all(a.as_bytes()).unwrap();
        }
    });
    (url, h)
}

#[test]
fn help_documents_every_command_and_flag() {
    let r = skein("http://127.0.0.1:1", &["--help"]);
    r.ok();
    for c in [
        "serve",
        "status",
        "summarize",
        "anomalies",
        "services",
        "operations",
        "llm",
        "sessions",
        "session",
        "query",
        "get",
        "correlate",
        "watch",
        "tail",
        "skill",
    ] {
        assert!(
            r.stdout.contains(&format!("\n  {c}")),
            "--help lists {c}:\n{}",
            r.stdout
        );
    }
    for f in [
        "--server",
        "--token",
        "--format",
        "--fields",
        "--timeout",
        "SKEIN_SERVER",
        "Exit codes",
    ] {
        assert!(r.stdout.contains(f), "--help documents {f}");
    }
    let r = skein("http://127.0.0.1:1", &["query", "spans", "--help"]);
    for f in [
        "--service",
        "--name",
        "--name-contains",
        "--kind",
        "--status",
        "--min-duration",
        "--max-duration",
        "--attr",
        "--resource",
        "--event",
        "--trace-id",
        "--root",
        "--last",
        "--since",
        "--until",
        "--limit",
        "--cursor",
        "--explain",
    ] {
        assert!(r.ok().stdout.contains(f), "query spans --help documents {f}");
    }
    let r = skein("http://127.0.0.1:1", &["query", "logs", "--help"]);
    for f in ["--severity", "--body", "--trace-id", "--span-id"] {
        assert!(r.ok().stdout.contains(f), "query logs --help documents {f}");
    }
}

#[test]
fn skill_install_writes_the_skill_file() {
    let tmp = tempfile::tempdir().unwrap();
    let nobody = "http://127.0.0.1:1";
    let dir = tmp.path().join("skills");
    let r = skein(nobody, &["skill", "install", "--dir", dir.to_str().unwrap()]);
    let path = dir.join("SKILL.md");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        r.ok().json(),
        json!({"path": path.display().to_string(), "changed": true, "bytes": text.len()})
    );
    assert!(text.starts_with("---\nname: skein\ndescription: "), "{text}");
    for needle in [
        "skein status",
        "skein summarize",
        "skein anomalies",
        "skein get trace",
        "skein correlate --trace",
        "Exit codes",
    ] {
        assert!(text.contains(needle), "the skill teaches {needle}");
    }
    assert_eq!(skein(nobody, &["skill", "show"]).ok().stdout, text);
    // Idempotent.
    assert_eq!(
        skein(nobody, &["skill", "install", "--dir", dir.to_str().unwrap()])
            .ok()
            .json()["changed"],
        false
    );
    // --project: under the git root; the default: under $HOME.
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    let o = cmd(nobody, &["skill", "install", "--project", "--format", "table"])
        .current_dir(repo.join("src/deep"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let want = repo.join(".claude/skills/skein/SKILL.md");
    assert_eq!(String::from_utf8(o.stdout).unwrap(), format!("{}\n", want.display()));
    assert_eq!(std::fs::read_to_string(want).unwrap(), text);
    let home = tmp.path().join("home");
    let o = cmd(nobody, &["skill", "install"]).env("HOME", &home).output().unwrap();
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(home.join(".claude/skills/skein/SKILL.md")).unwrap(),
        text
    );
}

#[test]
fn the_docs_and_the_skill_agree() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    let skill = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/cli/SKILL.md")).unwrap();
    // The exit-code contract is stated identically in both.
    for line in [
        "| 0 | ok |",
        "| 1 | no results |",
        "| 2 | usage error |",
        "| 3 | server unreachable |",
        "| 4 | server error |",
    ] {
        assert!(docs.contains(line), "docs/cli.md: {line}");
        assert!(skill.contains(line), "SKILL.md: {line}");
    }
    for c in [
        "skein status",
        "skein summarize",
        "skein anomalies",
        "skein services",
        "skein operations",
        "skein llm usage",
        "skein llm tools",
        "skein sessions",
        "skein session",
        "skein query traces",
        "skein query spans",
        "skein query logs",
        "skein query metrics",
        "skein get trace",
        "skein correlate",
        "skein watch",
        "skein tail",
        "skein skill install",
    ] {
        assert!(docs.contains(c), "docs/cli.md documents {c}");
    }
}

#[test]
fn llm_usage_sessions_scores_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("data"), &[]);
    let t0 = now_ns() - 60_000_000_000;
    let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    let spans: Vec<Value> = (0..3)
        .map(|i| {
            json!({"trace_id": trace, "span_id": format!("00f067aa0ba902c{i}"), "name": "chat gpt-4o",
                   "service": "agent", "start_time_unix_nano": t0 + i * 1000, "duration_ns": 1_000_000,
                   "attributes": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                  "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1000,
                                  "gen_ai.usage.output_tokens": 100, "gen_ai.conversation.id": "conv-9"}})
        })
        .collect();
    post_spans(&s, Value::Array(spans));

    let r = skein(&s.api, &["llm", "usage", "--by", "model"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["groups"][0]["key"], "gpt-4o");
    assert_eq!(v["groups"][0]["calls"], 3);
    assert_eq!(v["totals"]["input_tokens"], 3000);
    assert_eq!(v["groups"][0]["cost_usd"].as_f64().map(|c| c > 0.0), Some(true));

    let r = skein(&s.api, &["sessions"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["sessions"][0]["session_id"], "conv-9");
    assert_eq!(v["sessions"][0]["llm_calls"], 3);
    let r = skein(&s.api, &["session", "conv-9"]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["turns"].as_array().map(Vec::len), Some(3));
    assert_eq!(skein(&s.api, &["session", "nope"]).code, 1);

    let r = skein(
        &s.api,
        &["score", "add", "--trace", trace, "--name", "helpful", "--value", "true"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let id = serde_json::from_str::<Value>(&r.stdout).unwrap()["id"].clone();
    let scores = s.get_json(&format!("/api/v1/scores?trace_id={trace}"));
    assert_eq!(scores["scores"][0]["id"], id);
    assert_eq!(scores["scores"][0]["value"], true);
    let r = skein(
        &s.api,
        &[
            "score",
            "add",
            "--trace",
            "00000000000000000000000000000001",
            "--name",
            "x",
            "--value",
            "1",
        ],
    );
    assert_eq!(r.code, 4, "an unknown trace is refused: {}", r.stderr);

    let r = skein(&s.api, &["export", "spans", "--service", "agent"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[3], json!({"export_complete": true, "count": 3}));
    assert!(lines[..3].iter().all(|l| l["llm"]["model"] == "gpt-4o"));
}
