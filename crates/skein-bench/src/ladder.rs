//! `skein-bench ladder`: the read-cliff method — fill each signal to 1M,
//! 10M, 100M… rows, run the dashboard queries three times at each level,
//! and stop at the first level where a median exceeds 5 s.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::{Value, json};
use skein_model::corpus::Corpus;
use skein_model::metric::{MetricDesc, MetricKind, Number, PointValue};
use skein_model::{KeyValue, MetricPoint, Resource, Scope};

use crate::e2e::bar;
use crate::expected::{self, TopN};
use crate::load::{self, Payload, Protocol, Target};
use crate::machine::Machine;
use crate::server::{SkeinProcess, get_json, get_json_within};
use crate::stats::median;

#[derive(clap::Args, Debug, Clone)]
pub struct LadderArgs {
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Highest level to try, e.g. 100k, 1M, 10M, 100M.
    #[arg(long, default_value = "100M")]
    pub max_level: String,
    /// Lowest level (levels grow ×10 from it).
    #[arg(long, default_value = "1M")]
    pub min_level: String,
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// A dashboard query passes when its median is at most this.
    #[arg(long, default_value_t = 5.0)]
    pub budget_seconds: f64,
    /// Drive a running OTLP/HTTP endpoint's ingest (queries need Skein's API).
    #[arg(long)]
    pub target: Option<String>,
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Extra `skein serve` flags, e.g. --server-arg=--hot-max-bytes=32MiB.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
}

pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix('k') {
        (n, 1_000)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = t.strip_suffix('b') {
        (n, 1_000_000_000)
    } else {
        (t.as_str(), 1)
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("invalid count {s:?} (e.g. 100k, 1M, 10M)"))
}

const SERIES: u64 = 200;
const POINT_STEP_NS: u64 = 1_000_000_000;

/// Metric points `range`: 200 gauge series (20 services × 10 hosts), one
/// point per series per second, ending at `end_ns`.
fn metric_points(range: std::ops::Range<u64>, end_ns: u64, total: u64) -> Vec<MetricPoint> {
    let desc = Arc::new(MetricDesc {
        name: "http.server.active_requests".into(),
        unit: "{request}".into(),
        kind: MetricKind::Gauge,
        ..Default::default()
    });
    let resources: Vec<Arc<Resource>> = (0..20)
        .map(|s| Arc::new(Resource::with_service(&skein_model::corpus::service_name(s))))
        .collect();
    let scope = Arc::new(Scope::default());
    let steps = total.div_ceil(SERIES);
    range
        .map(|i| {
            let series = i % SERIES;
            let step = i / SERIES;
            MetricPoint {
                metric: desc.clone(),
                attributes: vec![KeyValue::new("host.name", format!("host-{}", series / 20))],
                start_time_unix_nano: 0,
                time_unix_nano: end_ns - (steps - step) * POINT_STEP_NS,
                flags: 0,
                exemplars: Vec::new(),
                value: PointValue::Number(Some(Number::Int((i * 7919 % 100) as i64))),
                resource: resources[(series % 20) as usize].clone(),
                scope: scope.clone(),
            }
        })
        .collect()
}

fn fill(
    target: &Target,
    clients: usize,
    path: &'static str,
    payloads: Vec<Payload>,
    pb: Option<indicatif::ProgressBar>,
) -> Result<(), String> {
    let r = load::run(
        target,
        Protocol::OtlpHttpProtobuf,
        path,
        Arc::new(payloads),
        clients,
        None,
        pb,
    )?;
    if r.errors > 0 {
        return Err(format!("{path}: {} requests failed: {:?}", r.errors, r.first_error));
    }
    Ok(())
}

/// Traces generated and sent at a time (1M spans, 1M logs, 1M points).
const CHUNK_TRACES: u64 = 100_000;
const METRIC_LIMIT: u64 = 10_000;

enum Needle {
    Substring(&'static str),
    Word(&'static str),
}

impl Needle {
    fn matches(&self, body: &str) -> bool {
        match self {
            Needle::Substring(n) => body.to_lowercase().contains(&n.to_lowercase()),
            Needle::Word(w) => skein_model::corpus::agent::contains_word(body, w),
        }
    }
}

/// How a dashboard query's answer is checked.
enum Check {
    Services,
    Operations,
    Summary(u64),
    Logs(Needle),
    Trace(u64),
    Points,
    Anomalies,
}

/// The expected answers of the dashboard queries, kept while generating.
#[derive(Default)]
struct Streaming {
    by_service: std::collections::HashMap<String, u64>,
    body: Option<TopN>,
    text: Option<TopN>,
    /// Points of the queried series (svc-03, host-0).
    series_points: u64,
}

impl Streaming {
    fn add_spans(&mut self, spans: &[skein_model::Span]) {
        for s in spans {
            *self.by_service.entry(s.service_name().to_string()).or_default() += 1;
        }
    }
    fn add_logs(&mut self, logs: &[skein_model::LogRecord]) {
        let body = self.body.get_or_insert_with(|| TopN::new(100));
        let text = self.text.get_or_insert_with(|| TopN::new(100));
        for l in logs {
            let b = l.body.as_str().unwrap_or_default();
            if Needle::Substring(expected::BODY_NEEDLE).matches(b) {
                body.push(expected::log_key(l));
            }
            if Needle::Word(expected::TEXT_WORD).matches(b) {
                text.push(expected::log_key(l));
            }
        }
    }
    fn add_points(&mut self, pts: &[MetricPoint]) {
        let svc = skein_model::corpus::service_name(3);
        self.series_points += pts
            .iter()
            .filter(|p| {
                p.resource.service_name() == svc
                    && p.attributes.first().and_then(|kv| kv.value.as_str()) == Some("host-0")
            })
            .count() as u64;
    }

    fn check(&self, check: &Check, v: &Value, corpus: &Corpus) -> Result<(), String> {
        match check {
            Check::Services => {
                let list = v["services"].as_array().ok_or("no services")?;
                for s in list {
                    let name = s["service"].as_str().unwrap_or_default();
                    let want = self.by_service.get(name).copied().unwrap_or(0);
                    if s["spans"].as_u64() != Some(want) {
                        return Err(format!("service {name}: {} spans, expected {want}", s["spans"]));
                    }
                }
                if list.len() != self.by_service.len() {
                    return Err(format!("{} services, expected {}", list.len(), self.by_service.len()));
                }
            }
            Check::Operations => {
                let ops = v["operations"].as_array().ok_or("no operations")?;
                if ops.is_empty() {
                    return Err("no operations".into());
                }
            }
            Check::Summary(level) => {
                for k in ["spans", "logs"] {
                    if v[k].as_u64() != Some(*level) {
                        return Err(format!("summary {k} {}, expected {level}", v[k]));
                    }
                }
            }
            Check::Logs(needle) => {
                let logs = v["logs"].as_array().ok_or("no logs")?;
                let mut got = Vec::with_capacity(logs.len());
                for l in logs {
                    let body = l["body"].as_str().unwrap_or_default();
                    if !needle.matches(body) {
                        return Err(format!("a hit without the needle: {body:?}"));
                    }
                    got.push((
                        l["time_unix_nano"].as_u64().ok_or("log without time")?,
                        u128::from_str_radix(l["trace_id"].as_str().unwrap_or("0"), 16).unwrap_or(0),
                        u64::from_str_radix(l["span_id"].as_str().unwrap_or("0"), 16).unwrap_or(0),
                    ));
                }
                got.sort_unstable_by(|a, b| b.cmp(a));
                let top = match needle {
                    Needle::Substring(_) => &self.body,
                    Needle::Word(_) => &self.text,
                };
                let want = top.as_ref().map(TopN::sorted).unwrap_or_default();
                if got != want {
                    return Err(format!(
                        "{} logs, first {:?}; expected {}, first {:?}",
                        got.len(),
                        got.first(),
                        want.len(),
                        want.first()
                    ));
                }
            }
            Check::Trace(t) => {
                let mut got: Vec<&str> = v["spans"]
                    .as_array()
                    .ok_or("no spans")?
                    .iter()
                    .filter_map(|s| s["span_id"].as_str())
                    .collect();
                got.sort_unstable();
                let mut want: Vec<String> = corpus.trace(*t).iter().map(|s| s.span_id.to_hex()).collect();
                want.sort_unstable();
                if got != want {
                    return Err(format!("trace {t}: {} spans, expected {}", got.len(), want.len()));
                }
            }
            Check::Anomalies => {
                v["findings"].as_array().ok_or("no findings list")?;
                if v["operations_examined"].as_u64().is_none_or(|n| n == 0) {
                    return Err("no operations examined".into());
                }
            }
            Check::Points => {
                let n = v["points"].as_array().ok_or("no points")?.len() as u64;
                let want = self.series_points.min(METRIC_LIMIT);
                if n != want {
                    return Err(format!("{n} points, expected {want}"));
                }
            }
        }
        Ok(())
    }
}

pub fn run(args: &LadderArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let max = parse_count(&args.max_level)?;
    let min = parse_count(&args.min_level)?.min(max);
    let mut levels = Vec::new();
    let mut l = min;
    while l <= max {
        levels.push(l);
        l *= 10;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let corpus = Corpus::new(max, now);
    let server = match &args.target {
        Some(_) => None,
        None => Some(SkeinProcess::start(&args.skein_bin, &args.server_args)?),
    };
    let target = match (&server, &args.target) {
        (Some(s), _) => s.target(),
        (None, Some(t)) => Target {
            otlp_http: t.trim_end_matches('/').to_string(),
            grpc: String::new(),
            api: t.trim_end_matches('/').to_string(),
        },
        (None, None) => unreachable!(),
    };
    // A query that does not answer in ten budgets has failed its level:
    // it is recorded as such (the cliff is what the ladder looks for),
    // not left to abort the run on the HTTP client's own timeout.
    let patience = Duration::from_secs_f64((args.budget_seconds * QUERY_PATIENCE).max(1.0));
    let client = reqwest::blocking::Client::builder()
        .timeout(patience)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let mut filled = 0u64;
    let mut results: Vec<Value> = Vec::new();
    let mut cliff = Value::from(format!("none up to {} rows per signal", args.max_level));
    // Expected answers, kept as the data is generated: counts and the
    // newest 100 of each search, so memory stays flat whatever the level.
    let mut exp = Streaming::default();
    for &level in &levels {
        // Spans: traces [filled/10, level/10); logs: 10 per trace; metrics.
        // Generated, encoded and sent a chunk at a time.
        let (t0, t1) = (filled / corpus.spans_per_trace, level / corpus.spans_per_trace);
        let pb = bar(level - filled, "filling (spans, logs, metrics)");
        let mut c0 = t0;
        while c0 < t1 {
            let c1 = (c0 + CHUNK_TRACES).min(t1);
            let mut span_payloads = Vec::new();
            let mut log_payloads = Vec::new();
            let mut t = c0;
            while t < c1 {
                let end = (t + 100).min(c1);
                let spans = corpus.spans(t..end);
                exp.add_spans(&spans);
                span_payloads.push(load::encode(Protocol::OtlpHttpProtobuf, &spans));
                let logs: Vec<_> = (t..end).flat_map(|x| corpus.trace_logs(x)).collect();
                exp.add_logs(&logs);
                log_payloads.push(Payload {
                    records: logs.len() as u64,
                    body: skein_model::otlp::logs_to_otlp(&logs).encode_to_vec().into(),
                });
                t = end;
            }
            let (m0, m1) = (c0 * corpus.spans_per_trace, c1 * corpus.spans_per_trace);
            let metric_payloads: Vec<Payload> = (m0..m1)
                .step_by(1000)
                .map(|i| {
                    let pts = metric_points(i..(i + 1000).min(m1), now, max);
                    exp.add_points(&pts);
                    Payload {
                        records: pts.len() as u64,
                        body: skein_model::otlp::metrics_to_otlp(&pts).encode_to_vec().into(),
                    }
                })
                .collect();
            fill(&target, args.clients, "/v1/traces", span_payloads, None)?;
            fill(&target, args.clients, "/v1/logs", log_payloads, None)?;
            fill(&target, args.clients, "/v1/metrics", metric_payloads, None)?;
            pb.inc(m1 - m0);
            c0 = c1;
        }
        pb.finish_and_clear();
        filled = level;
        wait_count(&target.api, level)?;
        let storage = storage(&target.api)?;

        let trace_index = t1.saturating_sub(1) / 2;
        let trace = corpus.trace_id(trace_index).to_hex();
        let needle = expected::BODY_NEEDLE.replace(' ', "%20").replace(':', "%3A");
        let queries: Vec<(&str, String, Check)> = vec![
            ("services RED", "/api/v1/services".into(), Check::Services),
            (
                "per-operation percentiles",
                format!("/api/v1/services/{}/operations", skein_model::corpus::service_name(3)),
                Check::Operations,
            ),
            (
                "logs by severity",
                "/api/v1/summary?since=0".into(),
                Check::Summary(level),
            ),
            (
                "log body search",
                format!("/api/v1/logs?body_contains={needle}&limit=100"),
                Check::Logs(Needle::Substring(expected::BODY_NEEDLE)),
            ),
            (
                "log full-text search",
                format!("/api/v1/logs?text={}&limit=100", expected::TEXT_WORD),
                Check::Logs(Needle::Word(expected::TEXT_WORD)),
            ),
            (
                "diagnosis (anomalies, 1h look-back)",
                format!("/api/v1/anomalies?lookback=1h&until={now}"),
                Check::Anomalies,
            ),
            (
                "trace lookup",
                format!("/api/v1/traces/{trace}"),
                Check::Trace(trace_index),
            ),
            (
                "metric series over time",
                format!(
                    "/api/v1/metrics?name=http.server.active_requests&resource.service.name={}&attr.host.name=host-0&limit={METRIC_LIMIT}",
                    skein_model::corpus::service_name(3)
                ),
                Check::Points,
            ),
        ];
        let mut qs = Vec::new();
        let mut level_pass = true;
        for (name, path, check) in &queries {
            let mut times = Vec::new();
            let mut answered = true;
            for _ in 0..3 {
                let t = Instant::now();
                let Some(v) = get_json_within(&client, &format!("{}{path}", target.api))? else {
                    answered = false;
                    break;
                };
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                exp.check(check, &v, &corpus)
                    .map_err(|e| format!("level {level}, {name}: wrong answer: {e}"))?;
            }
            if !answered {
                eprintln!("level {level}, {name}: no answer within {patience:?}");
                level_pass = false;
                qs.push(json!({
                    "name": name,
                    "median_ms": format!("no answer in {} s", patience.as_secs()),
                    "runs_ms": times,
                    "pass": false,
                    "verified": false,
                }));
                continue;
            }
            let m = median(times.clone());
            let pass = m <= args.budget_seconds * 1000.0;
            level_pass &= pass;
            qs.push(json!({"name": name, "median_ms": m, "runs_ms": times, "pass": pass, "verified": true}));
        }
        eprintln!("level {level}: {}", if level_pass { "pass" } else { "FAIL" });
        results.push(json!({"rows": level, "queries": qs, "pass": level_pass, "storage": storage}));
        if !level_pass {
            cliff = Value::from(format!("{level} rows per signal"));
            break;
        }
    }
    if let Some(s) = server {
        s.stop()?;
    }
    let result = json!({
        "machine": machine.finish(),
        "params": {"max_level": args.max_level, "min_level": args.min_level, "budget_seconds": args.budget_seconds, "server_args": args.server_args},
        "levels": results,
        "cliff": cliff,
    });
    crate::report::write(&args.out, "ladder", result)
}

/// Budgets a dashboard query may take before it counts as no answer.
const QUERY_PATIENCE: f64 = 10.0;

/// What holding a level costs the server, from its `/api/v1/stats` once
/// every row is in (compaction may still be running, as it says).
fn storage(api: &str) -> Result<Value, String> {
    let s = get_json(&format!("{api}/api/v1/stats"))?;
    Ok(json!({
        "parts": s["parts"],
        "bytes_on_disk": s["bytes_on_disk"],
        "index_memory_bytes": s["index_memory_bytes"],
        "resident_memory_bytes": s["resident_memory_bytes"],
        "compacting": s["compacting"],
    }))
}

fn wait_count(api: &str, level: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let s = get_json(&format!("{api}/api/v1/stats"))?;
        if s["spans"].as_u64() >= Some(level)
            && s["logs"].as_u64() >= Some(level)
            && s["metric_points"].as_u64() >= Some(level)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("server did not reach {level} rows: {s}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that takes the request and never answers is no answer,
    /// not an error: the ladder records the query as failing its level.
    #[test]
    fn a_query_that_does_not_answer_in_time_is_no_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let held = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_secs(2));
            drop(conn);
        });
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        assert_eq!(get_json_within(&client, &format!("http://{addr}/slow")).unwrap(), None);
        held.join().unwrap();
        // Nothing listening is an error, not a slow answer.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert!(get_json_within(&client, &format!("http://{closed}/gone")).is_err());
    }
}
