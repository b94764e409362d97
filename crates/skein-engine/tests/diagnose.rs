//! Diagnosis against planted faults: a deploy that raises errors, a slow
//! dependency whose callers slow down with it, errors that propagate up a
//! call chain, one bad host among many, regressions starting at several
//! points in the hour, and a quiet system that must report nothing. Each
//! world is an hour of traffic through a small shop (frontend → checkout →
//! payments → db, and frontend → catalog → db), part of it flushed to a
//! part and the rest in the hot tier. The culprit must come first, its
//! start within two minutes, with its evidence.

use std::sync::Arc;

use skein_engine::{DiagnoseRequest, Diagnosis, Engine, EngineOptions, Finding, Window};
use skein_model::{
    AnyValue, Event, KeyValue, LogRecord, Resource, Span, SpanId, SpanKind, Status, StatusCode, TraceId,
};

const MIN: u64 = 60_000_000_000;
const MS: u64 = 1_000_000;
/// The end of every world's hour (a whole minute).
const NOW: u64 = (skein_engine::testdata::END_NS / MIN) * MIN;
const START: u64 = NOW - 60 * MIN;

#[derive(Default, Clone, Copy)]
struct Faults {
    /// From this minute, checkout runs version 2.0, which rejects 40% of orders.
    deploy_errors: Option<u64>,
    /// From this minute, the checkout database query is 8× slower.
    slow_db: Option<u64>,
    /// From this minute, payments declines 30% of charges; checkout and
    /// frontend fail with it.
    payments_fail: Option<u64>,
    /// From this minute, checkout on host h-3 (one of 8) fails every call.
    bad_host: Option<u64>,
    /// From this minute, catalog times out on 35% of listings.
    catalog_errors: Option<u64>,
    /// From this minute, each of search's 12 quiet operations fails 15%
    /// of its calls: too few for any operation alone.
    search_errors: Option<u64>,
    /// From this minute, reports' traffic moves from its fast operation
    /// to its slow one; neither changes.
    reports_mix_shift: Option<u64>,
}

/// search's operations: one call a minute each.
const SEARCH_OPS: [&str; 12] = [
    "products", "orders", "users", "reviews", "stores", "coupons", "brands", "articles", "faq", "jobs", "events",
    "media",
];

fn h(a: u64, b: u64, c: u64) -> u64 {
    let mut x = a
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .wrapping_add(c.wrapping_mul(0x1656_67B1_9E37_79F9));
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 32)
}

/// `base` ±40%, deterministically.
fn jitter(base: u64, seed: u64) -> u64 {
    (base as f64 * (0.6 + 0.8 * (seed % 1000) as f64 / 1000.0)) as u64
}

fn resource(service: &str, version: &str, host: &str) -> Arc<Resource> {
    let mut r = Resource::with_service(service);
    r.attributes.push(KeyValue::new("service.version", version));
    r.attributes.push(KeyValue::new("host.name", host));
    Arc::new(r)
}

struct Call {
    service: Arc<Resource>,
    name: &'static str,
    /// Own time, half before the child and half after.
    own_ns: u64,
    error: Option<String>,
    exception: Option<(&'static str, String)>,
}

struct World {
    spans: Vec<Span>,
    logs: Vec<LogRecord>,
}

impl World {
    /// A chain of calls, each the parent of the next; returns the trace.
    fn chain(&mut self, trace: TraceId, t0: u64, calls: Vec<Call>) {
        // Durations bottom-up.
        let mut durations = vec![0u64; calls.len()];
        let mut below = 0;
        for (i, c) in calls.iter().enumerate().rev() {
            durations[i] = c.own_ns + below;
            below = durations[i];
        }
        let mut start = t0;
        let mut parent = None;
        for (i, c) in calls.iter().enumerate() {
            let span_id = SpanId((h(trace.as_u128() as u64, i as u64, 7) | 1).to_be_bytes());
            let end = start + durations[i];
            let mut s = Span {
                trace_id: trace,
                span_id,
                parent_span_id: parent,
                name: c.name.to_string(),
                kind: if i == 0 { SpanKind::Server } else { SpanKind::Client },
                start_time_unix_nano: start,
                end_time_unix_nano: end,
                resource: c.service.clone(),
                status: Status {
                    code: if c.error.is_some() {
                        StatusCode::Error
                    } else {
                        StatusCode::Ok
                    },
                    message: c.error.clone().unwrap_or_default(),
                },
                ..Default::default()
            };
            if let Some((ty, msg)) = &c.exception {
                s.events.push(Event {
                    time_unix_nano: end,
                    name: "exception".into(),
                    attributes: vec![
                        KeyValue::new("exception.type", *ty),
                        KeyValue::new("exception.message", msg.as_str()),
                    ],
                    dropped_attributes_count: 0,
                });
            }
            if let Some(e) = &c.error
                && c.name == "POST /order"
            {
                let mut l = LogRecord {
                    time_unix_nano: end,
                    observed_time_unix_nano: end,
                    severity_number: 17,
                    severity_text: "ERROR".into(),
                    body: AnyValue::Str(format!("checkout failed: {e}")),
                    resource: c.service.clone(),
                    ..Default::default()
                };
                l.trace_id = Some(trace);
                l.span_id = Some(span_id);
                self.logs.push(l);
            }
            self.spans.push(s);
            parent = Some(span_id);
            start += c.own_ns / 2;
        }
    }
}

fn world(f: Faults) -> World {
    let mut w = World {
        spans: Vec::new(),
        logs: Vec::new(),
    };
    let after = |from: Option<u64>, m: u64| from.is_some_and(|x| m >= x);
    for m in 0..60 {
        for j in 0..30u64 {
            let t0 = START + m * MIN + j * 2_000_000_000 + h(m, j, 1) % 1_000_000_000;
            let trace = TraceId(((h(m, j, 2) as u128) << 64 | h(m, j, 3) as u128).to_be_bytes());
            let r = h(m, j, 4) % 1000;
            let host = format!("h-{}", j % 8);
            let v2 = after(f.deploy_errors, m);
            let deploy_fail = v2 && r < 400;
            let host_fail = after(f.bad_host, m) && host == "h-3";
            let pay_fail = after(f.payments_fail, m) && r < 300;
            let db_factor = if after(f.slow_db, m) { 8 } else { 1 };
            let checkout_err = if deploy_fail {
                Some(format!("order {} rejected: invalid state", 1000 + h(m, j, 5) % 9000))
            } else if host_fail {
                Some(format!("connection reset by peer 10.0.0.{}", j % 250))
            } else if pay_fail {
                Some("payment failed".to_string())
            } else {
                None
            };
            // Background noise: 0.3% of frontend calls fail on their own.
            let noise = h(m, j, 6) % 1000 < 3;
            let front_err = (checkout_err.is_some() || noise).then(|| "HTTP 500".to_string());
            w.chain(
                trace,
                t0,
                vec![
                    Call {
                        service: resource("frontend", "1.0", "web-1"),
                        name: "GET /checkout",
                        own_ns: jitter(2 * MS, h(m, j, 10)),
                        error: front_err,
                        exception: None,
                    },
                    Call {
                        service: resource("checkout", if v2 { "2.0" } else { "1.9" }, &host),
                        name: "POST /order",
                        own_ns: jitter(3 * MS, h(m, j, 11)),
                        error: checkout_err,
                        exception: None,
                    },
                    Call {
                        service: resource("payments", "3.1", "pay-1"),
                        name: "charge",
                        own_ns: jitter(5 * MS, h(m, j, 12)),
                        error: pay_fail.then(|| "declined".to_string()),
                        exception: pay_fail.then(|| {
                            (
                                "PaymentDeclined",
                                format!("card {} declined by issuer", 4000 + h(m, j, 13) % 999),
                            )
                        }),
                    },
                    Call {
                        service: resource("db", "15", "db-1"),
                        name: "SELECT orders",
                        own_ns: jitter(2 * MS, h(m, j, 14)) * db_factor,
                        error: None,
                        exception: None,
                    },
                ],
            );
        }
        for j in 0..12u64 {
            let t0 = START + m * MIN + j * 5_000_000_000 + h(m, j, 21) % 1_000_000_000;
            let trace = TraceId(((h(m, j, 22) as u128) << 64 | h(m, j, 23) as u128).to_be_bytes());
            let fail = after(f.catalog_errors, m) && h(m, j, 24) % 1000 < 350;
            w.chain(
                trace,
                t0,
                vec![
                    Call {
                        service: resource("frontend", "1.0", "web-1"),
                        name: "GET /items",
                        own_ns: jitter(MS, h(m, j, 25)),
                        error: fail.then(|| "HTTP 504".to_string()),
                        exception: None,
                    },
                    Call {
                        service: resource("catalog", "4.2", "cat-1"),
                        name: "list",
                        own_ns: jitter(4 * MS, h(m, j, 26)),
                        error: fail.then(|| format!("timeout after {} ms", 900 + h(m, j, 27) % 200)),
                        exception: None,
                    },
                ],
            );
        }
        for (j, name) in SEARCH_OPS.iter().enumerate() {
            let j = j as u64;
            let t0 = START + m * MIN + j * 4_000_000_000 + h(m, j, 31) % 1_000_000_000;
            let trace = TraceId(((h(m, j, 32) as u128) << 64 | h(m, j, 33) as u128).to_be_bytes());
            let fail = after(f.search_errors, m) && h(m, j, 34) % 1000 < 150;
            w.chain(
                trace,
                t0,
                vec![Call {
                    service: resource("search", "7.0", "search-1"),
                    name,
                    own_ns: jitter(3 * MS, h(m, j, 35)),
                    error: fail.then(|| format!("index shard {} unavailable", h(m, j, 36) % 16)),
                    exception: None,
                }],
            );
        }
        if f.reports_mix_shift.is_some() {
            let shifted = after(f.reports_mix_shift, m);
            for j in 0..22u64 {
                let slow = if shifted { j >= 2 } else { j < 2 };
                let t0 = START + m * MIN + j * 2_500_000_000 + h(m, j, 41) % 1_000_000_000;
                let trace = TraceId(((h(m, j, 42) as u128) << 64 | h(m, j, 43) as u128).to_be_bytes());
                w.chain(
                    trace,
                    t0,
                    vec![Call {
                        service: resource("reports", "1.0", "rep-1"),
                        name: if slow {
                            "GET /report/yearly"
                        } else {
                            "GET /report/daily"
                        },
                        own_ns: jitter(if slow { 20 * MS } else { MS }, h(m, j, 44)),
                        error: None,
                        exception: None,
                    }],
                );
            }
        }
    }
    w
}

/// The world in an engine: the first 45 minutes flushed to a part, the
/// rest in the hot tier.
fn engine_with(dir: &std::path::Path, w: World) -> Engine {
    let e = Engine::open(EngineOptions::new(dir)).unwrap();
    let split = NOW - 15 * MIN;
    let (old, new): (Vec<Span>, Vec<Span>) = w.spans.into_iter().partition(|s| s.start_time_unix_nano < split);
    e.ingest_spans(old).unwrap();
    e.ingest_logs(w.logs).unwrap();
    e.flush().unwrap();
    e.ingest_spans(new).unwrap();
    e
}

fn diagnose(e: &Engine) -> Diagnosis {
    e.diagnose(&DiagnoseRequest {
        window: Window::new(START, NOW),
        split_at: None,
        service: None,
        limit: 10,
        explain: true,
    })
    .unwrap()
    .0
}

fn run(f: Faults) -> Diagnosis {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_with(dir.path(), world(f));
    let d = diagnose(&e);
    e.close().unwrap();
    d
}

fn describe(d: &Diagnosis) -> String {
    serde_json::to_string_pretty(&d.findings).unwrap()
}

fn is(f: &Finding, service: &str, op: &str, kind: &str, role: &str) -> bool {
    let v = serde_json::to_value(f).unwrap();
    f.service == service && f.operation.as_deref() == Some(op) && v["kind"] == kind && v["role"] == role
}

/// The start lies within two minutes of the planted minute.
fn started_near(f: &Finding, minute: u64) {
    let want = START + minute * MIN;
    let diff = f.started_at_unix_nano.abs_diff(want);
    assert!(
        diff <= 2 * MIN,
        "{} {:?} started {} min off",
        f.service,
        f.operation,
        diff as f64 / MIN as f64
    );
}

fn caused_by(f: &Finding) -> Option<(String, String)> {
    f.caused_by.as_ref().map(|c| (c.service.clone(), c.operation.clone()))
}

#[test]
fn a_quiet_hour_has_no_findings() {
    let d = run(Faults::default());
    assert!(d.operations_examined >= 6, "{}", d.operations_examined);
    assert!(d.findings.is_empty(), "{}", describe(&d));
}

#[test]
fn a_deploy_that_raises_errors_is_found_with_its_version_and_messages() {
    let d = run(Faults {
        deploy_errors: Some(35),
        ..Default::default()
    });
    let first = &d.findings[0];
    assert!(
        is(first, "checkout", "POST /order", "errors", "cause"),
        "{}",
        describe(&d)
    );
    started_near(first, 35);
    let version = first
        .changed_attributes
        .iter()
        .find(|c| c.key == "service.version")
        .unwrap_or_else(|| panic!("{}", describe(&d)));
    assert_eq!(
        (version.value.as_str(), version.before_value.as_deref()),
        ("2.0", Some("1.9"))
    );
    assert_eq!(version.share_of_bad, 1.0);
    let t = &first.error_templates[0];
    assert_eq!(t.template, "order <n> rejected: invalid state", "{}", describe(&d));
    assert!(t.count >= 10, "{t:?}");
    assert!(
        first
            .error_templates
            .iter()
            .any(|t| t.source == "log" && t.template == "checkout failed: order <n> rejected: invalid state"),
        "{}",
        describe(&d)
    );
    assert_eq!(first.exemplar_trace_ids.len(), 3);
    assert!(first.message.contains("service.version 1.9 → 2.0"), "{}", first.message);
    assert!(!first.explain.is_empty());
    // The frontend only passed the errors on.
    let front = d
        .findings
        .iter()
        .find(|f| f.service == "frontend")
        .unwrap_or_else(|| panic!("{}", describe(&d)));
    assert!(
        is(front, "frontend", "GET /checkout", "errors", "affected"),
        "{}",
        describe(&d)
    );
    assert_eq!(caused_by(front), Some(("checkout".into(), "POST /order".into())));
    started_near(front, 35);
    // Nothing else changed.
    assert_eq!(d.findings.len(), 2, "{}", describe(&d));
}

#[test]
fn a_slow_dependency_is_the_cause_and_its_callers_are_affected() {
    let d = run(Faults {
        slow_db: Some(40),
        ..Default::default()
    });
    let first = &d.findings[0];
    assert!(is(first, "db", "SELECT orders", "latency", "cause"), "{}", describe(&d));
    started_near(first, 40);
    assert!(first.after.p50_ns > 5 * first.before.p50_ns, "{}", describe(&d));
    assert_eq!(first.impact_unit, "extra_seconds");
    assert_eq!(first.exemplar_trace_ids.len(), 3);
    for (service, op) in [
        ("payments", "charge"),
        ("checkout", "POST /order"),
        ("frontend", "GET /checkout"),
    ] {
        let f = d
            .findings
            .iter()
            .find(|f| f.service == service && f.operation.as_deref() == Some(op))
            .unwrap_or_else(|| panic!("{service} missing: {}", describe(&d)));
        assert!(is(f, service, op, "latency", "affected"), "{}", describe(&d));
        assert_eq!(
            caused_by(f),
            Some(("db".into(), "SELECT orders".into())),
            "{}",
            describe(&d)
        );
        started_near(f, 40);
    }
    assert!(d.findings.iter().all(|f| f.service != "catalog"), "{}", describe(&d));
}

#[test]
fn errors_that_propagate_up_a_chain_are_traced_to_where_they_begin() {
    let d = run(Faults {
        payments_fail: Some(20),
        ..Default::default()
    });
    let first = &d.findings[0];
    assert!(is(first, "payments", "charge", "errors", "cause"), "{}", describe(&d));
    started_near(first, 20);
    let origin = first.error_origin.as_ref().unwrap();
    assert_eq!((origin.service.as_str(), origin.share), ("payments", 1.0));
    assert!(
        first
            .error_templates
            .iter()
            .any(|t| t.template == "PaymentDeclined: card <n> declined by issuer"),
        "{}",
        describe(&d)
    );
    for (service, op) in [("checkout", "POST /order"), ("frontend", "GET /checkout")] {
        let f = d
            .findings
            .iter()
            .find(|f| f.service == service && f.operation.as_deref() == Some(op))
            .unwrap_or_else(|| panic!("{service} missing: {}", describe(&d)));
        assert!(is(f, service, op, "errors", "affected"), "{}", describe(&d));
        assert_eq!(caused_by(f), Some(("payments".into(), "charge".into())));
    }
}

#[test]
fn one_bad_host_among_many_is_named() {
    let d = run(Faults {
        bad_host: Some(30),
        ..Default::default()
    });
    let first = &d.findings[0];
    assert!(
        is(first, "checkout", "POST /order", "errors", "cause"),
        "{}",
        describe(&d)
    );
    started_near(first, 30);
    let host = &first.changed_attributes[0];
    assert_eq!(
        (host.key.as_str(), host.value.as_str()),
        ("host.name", "h-3"),
        "{}",
        describe(&d)
    );
    assert_eq!(host.share_of_bad, 1.0);
    assert!(host.share_before < 0.5);
    assert_eq!(
        first.error_templates[0].template,
        "connection reset by peer <n>.<n>.<n>.<n>"
    );
}

#[test]
fn regressions_at_several_points_in_the_hour_are_each_found_with_their_start() {
    let d = run(Faults {
        slow_db: Some(12),
        catalog_errors: Some(47),
        ..Default::default()
    });
    let causes: Vec<&Finding> = d
        .findings
        .iter()
        .filter(|f| serde_json::to_value(f).unwrap()["role"] == "cause")
        .collect();
    assert_eq!(causes.len(), 2, "{}", describe(&d));
    let db = causes.iter().find(|f| f.service == "db").unwrap();
    assert!(is(db, "db", "SELECT orders", "latency", "cause"));
    started_near(db, 12);
    let catalog = causes.iter().find(|f| f.service == "catalog").unwrap();
    assert!(is(catalog, "catalog", "list", "errors", "cause"), "{}", describe(&d));
    started_near(catalog, 47);
    assert_eq!(catalog.error_templates[0].template, "timeout after <n> ms");
    // The look-back cut short leaves the first regression out of reach:
    // only the second is found.
    let dir = tempfile::tempdir().unwrap();
    let e = engine_with(
        dir.path(),
        world(Faults {
            slow_db: Some(12),
            catalog_errors: Some(47),
            ..Default::default()
        }),
    );
    let late = e
        .diagnose(&DiagnoseRequest {
            window: Window::new(NOW - 30 * MIN, NOW),
            split_at: None,
            service: Some("catalog".into()),
            limit: 10,
            explain: false,
        })
        .unwrap()
        .0;
    assert_eq!(late.findings.len(), 1, "{}", describe(&late));
    assert!(late.findings[0].explain.is_empty());
    // Compaction and a restart keep the answer.
    e.compact().unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(EngineOptions::new(dir.path())).unwrap();
    let again = diagnose(&e);
    assert_eq!(
        again
            .findings
            .iter()
            .map(|f| (&f.service, &f.operation))
            .collect::<Vec<_>>(),
        d.findings
            .iter()
            .map(|f| (&f.service, &f.operation))
            .collect::<Vec<_>>()
    );
}

#[test]
fn errors_spread_thinly_over_a_services_operations_are_found_for_the_service() {
    let d = run(Faults {
        search_errors: Some(30),
        ..Default::default()
    });
    assert_eq!(d.findings.len(), 1, "{}", describe(&d));
    let f = &d.findings[0];
    let v = serde_json::to_value(f).unwrap();
    assert_eq!(
        (f.service.as_str(), &v["operation"]),
        ("search", &serde_json::Value::Null)
    );
    assert_eq!((&v["kind"], &v["role"]), (&"errors".into(), &"cause".into()));
    started_near(f, 30);
    assert_eq!(
        f.error_templates[0].template,
        "index shard <n> unavailable",
        "{}",
        describe(&d)
    );
    assert_eq!(f.exemplar_trace_ids.len(), 3);
    assert!(f.message.starts_with("search (across its operations"), "{}", f.message);
    assert!(
        f.explain.iter().any(|e| e.contains("sum of its operations")),
        "{:?}",
        f.explain
    );
    // frontend and search; the others have one operation each.
    assert_eq!(d.services_examined, 2);
}

#[test]
fn traffic_moving_to_a_slower_operation_is_not_a_slowdown() {
    // The service's median goes from 1 ms to 20 ms, but no operation got
    // slower: each is measured against its own quantiles.
    let d = run(Faults {
        reports_mix_shift: Some(30),
        ..Default::default()
    });
    assert!(d.findings.is_empty(), "{}", describe(&d));
}

#[test]
fn an_operation_finding_hides_the_same_kind_for_its_service() {
    // catalog has one operation; checkout's deploy shows in POST /order,
    // so neither service repeats it as a service finding.
    let d = run(Faults {
        deploy_errors: Some(35),
        catalog_errors: Some(40),
        ..Default::default()
    });
    assert!(d.findings.iter().all(|f| f.operation.is_some()), "{}", describe(&d));
}
