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
use crate::expected;
use crate::load::{self, Payload, Protocol, Target};
use crate::machine::Machine;
use crate::server::{SkeinProcess, get_json};
use crate::stats::{Samples, median};

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

fn fill(target: &Target, clients: usize, path: &'static str, payloads: Vec<Payload>, what: &str) -> Result<(), String> {
    let pb = bar(payloads.iter().map(|p| p.records).sum(), what);
    let r = load::run(
        target,
        Protocol::OtlpHttpProtobuf,
        path,
        Arc::new(payloads),
        clients,
        None,
        Some(pb.clone()),
    )?;
    pb.finish_and_clear();
    if r.errors > 0 {
        return Err(format!("{what}: {} requests failed: {:?}", r.errors, r.first_error));
    }
    Ok(())
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
        None => Some(SkeinProcess::start(&args.skein_bin, &[])?),
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
    let mut filled = 0u64;
    let mut results: Vec<Value> = Vec::new();
    let mut cliff = Value::from(format!("none up to {} rows per signal", args.max_level));
    for &level in &levels {
        // Spans: traces [filled/10, level/10); logs: 10 per trace; metrics.
        let (t0, t1) = (filled / corpus.spans_per_trace, level / corpus.spans_per_trace);
        let mut span_payloads = Vec::new();
        let mut log_payloads = Vec::new();
        let mut t = t0;
        let pb = bar(level - filled, "encoding level");
        while t < t1 {
            let end = (t + 100).min(t1);
            span_payloads.push(load::encode(Protocol::OtlpHttpProtobuf, &corpus.spans(t..end)));
            let logs: Vec<_> = (t..end).flat_map(|x| corpus.trace_logs(x)).collect();
            log_payloads.push(Payload {
                records: logs.len() as u64,
                body: skein_model::otlp::logs_to_otlp(&logs).encode_to_vec().into(),
            });
            pb.inc((end - t) * corpus.spans_per_trace);
            t = end;
        }
        pb.finish_and_clear();
        let metric_payloads: Vec<Payload> = (filled..level)
            .step_by(1000)
            .map(|i| {
                let pts = metric_points(i..(i + 1000).min(level), now, max);
                Payload {
                    records: pts.len() as u64,
                    body: skein_model::otlp::metrics_to_otlp(&pts).encode_to_vec().into(),
                }
            })
            .collect();
        fill(&target, args.clients, "/v1/traces", span_payloads, "filling spans")?;
        fill(&target, args.clients, "/v1/logs", log_payloads, "filling logs")?;
        fill(&target, args.clients, "/v1/metrics", metric_payloads, "filling metrics")?;
        filled = level;
        wait_count(&target.api, level)?;

        let trace = corpus.trace_id(t1.saturating_sub(1) / 2).to_hex();
        let needle = expected::BODY_NEEDLE.replace(' ', "%20").replace(':', "%3A");
        let queries: Vec<(&str, String)> = vec![
            ("services RED", "/api/v1/services".into()),
            ("per-operation percentiles", format!("/api/v1/services/{}/operations", skein_model::corpus::service_name(3))),
            ("logs by severity", "/api/v1/summary?since=0".into()),
            ("log body search", format!("/api/v1/logs?body_contains={needle}&limit=100")),
            ("trace lookup", format!("/api/v1/traces/{trace}")),
            (
                "metric series over time",
                "/api/v1/metrics?name=http.server.active_requests&resource.service.name=svc-03&attr.host.name=host-0&limit=10000"
                    .into(),
            ),
        ];
        let mut qs = Vec::new();
        let mut level_pass = true;
        for (name, path) in &queries {
            let mut s = Samples::default();
            let mut times = Vec::new();
            for _ in 0..3 {
                let t = Instant::now();
                get_json(&format!("{}{path}", target.api))?;
                let d = t.elapsed();
                s.push(d);
                times.push(d.as_secs_f64() * 1000.0);
            }
            let m = median(times.clone());
            let pass = m <= args.budget_seconds * 1000.0;
            level_pass &= pass;
            qs.push(json!({"name": name, "median_ms": m, "runs_ms": times, "pass": pass}));
        }
        eprintln!("level {level}: {}", if level_pass { "pass" } else { "FAIL" });
        results.push(json!({"rows": level, "queries": qs, "pass": level_pass}));
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
        "params": {"max_level": args.max_level, "min_level": args.min_level, "budget_seconds": args.budget_seconds},
        "levels": results,
        "cliff": cliff,
    });
    crate::report::write(&args.out, "ladder", result)
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
