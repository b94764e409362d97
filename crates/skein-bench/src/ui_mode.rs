//! `skein-bench ui`: how fast the web UI shows each view over a big store.
//! One `skein serve` holding the agent corpus (1M spans by default: LLM
//! calls, sessions, tools, errors, logs) ending now, then headless Chromium
//! (tests/conformance/ui/browser.mjs timings) loads every view from
//! scratch several times; the figure per view is the median time from
//! navigation start until the view shows its data.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Args;
use prost::Message;
use serde_json::{Value, json};
use skein_model::corpus::agent::AgentCorpus;

use crate::machine::Machine;
use crate::server::SkeinProcess;

#[derive(Args, Debug)]
pub struct UiArgs {
    /// The skein binary to benchmark.
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Spans in the agent corpus.
    #[arg(long, default_value_t = 1_000_000)]
    pub spans: u64,
    /// Loads of each view; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// The browser script (run with node from its folder).
    #[arg(long, default_value = "tests/conformance/ui/browser.mjs")]
    pub script: PathBuf,
    /// Where BENCHMARKS.md and benchmarks.json go.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Keep the server's data here (default: a temporary directory). A
    /// directory that already holds the corpus is not loaded again, so a
    /// view can be re-timed (or the server profiled) within the corpus's
    /// hour without waiting for the load.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// Every view must show its data within this (issue #20).
const TARGET_MS: f64 = 500.0;
/// Traces per OTLP request.
const BATCH_TRACES: u64 = 500;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn post(http: &reqwest::blocking::Client, url: &str, body: Vec<u8>) -> Result<(), String> {
    let r = http
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .map_err(|e| format!("POST {url}: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("POST {url}: HTTP {}", r.status()));
    }
    Ok(())
}

/// Sends the corpus over OTLP/HTTP and waits until every span is stored.
fn load(server: &SkeinProcess, c: &AgentCorpus) -> Result<(), String> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| e.to_string())?;
    let traces = c.traces;
    let mut t = 0;
    while t < traces {
        let end = (t + BATCH_TRACES).min(traces);
        let body = skein_model::otlp::spans_to_otlp(&c.spans(t..end)).encode_to_vec();
        post(&http, &format!("{}/v1/traces", server.otlp_http), body)?;
        t = end;
    }
    let logs = c.log_count();
    let mut l = 0;
    while l < logs {
        let end = (l + 1000).min(logs);
        let body = skein_model::otlp::logs_to_otlp(&c.logs(l..end)).encode_to_vec();
        post(&http, &format!("{}/v1/logs", server.otlp_http), body)?;
        l = end;
    }
    for chunk in metric_points(c).chunks(2000) {
        let body = skein_model::otlp::metrics_to_otlp(chunk).encode_to_vec();
        post(&http, &format!("{}/v1/metrics", server.otlp_http), body)?;
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let stats: Value = http
            .get(format!("{}/api/v1/stats", server.api))
            .send()
            .and_then(|r| r.json())
            .map_err(|e| format!("stats: {e}"))?;
        if stats["spans"].as_u64() >= Some(c.span_count()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {} of {} spans stored", stats["spans"], c.span_count()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Services and routes of the metrics the bench sends.
const METRIC_SERVICES: usize = 12;
const METRIC_ROUTES: &[&str] = &["/", "/checkout", "/search", "/chat", "/api/items"];
/// One point per series every this often over the corpus's hour.
const METRIC_STEP_NS: u64 = 15_000_000_000;

/// What the metrics view charts: per service and route, a cumulative
/// request counter and a cumulative duration histogram, one point every
/// 15 s over the corpus's hour (the agent corpus itself has no metrics).
fn metric_points(c: &AgentCorpus) -> Vec<skein_model::MetricPoint> {
    use skein_model::metric::{HistogramValue, MetricDesc, MetricKind, Number, PointValue, Temporality};
    use skein_model::{KeyValue, MetricPoint, Resource};
    use std::sync::Arc;
    let cumulative = Temporality::Cumulative;
    let requests = Arc::new(MetricDesc {
        name: "http.server.requests".into(),
        unit: "{request}".into(),
        kind: MetricKind::Sum {
            temporality: cumulative,
            monotonic: true,
        },
        ..Default::default()
    });
    let duration = Arc::new(MetricDesc {
        name: "http.server.duration".into(),
        unit: "ms".into(),
        kind: MetricKind::Histogram {
            temporality: cumulative,
        },
        ..Default::default()
    });
    let bounds = vec![5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0];
    let start = c.end_ns - skein_model::corpus::HOUR_NS;
    let mut out = Vec::new();
    for svc in 0..METRIC_SERVICES {
        let resource = Arc::new(Resource::with_service(c.service_name(svc)));
        for (r, route) in METRIC_ROUTES.iter().enumerate() {
            let attributes = vec![KeyValue::new("http.route", *route)];
            let (mut n, mut buckets) = (0u64, vec![0u64; bounds.len() + 1]);
            let mut t = start + METRIC_STEP_NS;
            while t <= c.end_ns {
                let step = 50 + ((svc * 7 + r * 3) as u64 * (t / METRIC_STEP_NS)) % 40;
                n += step;
                for (i, b) in buckets.iter_mut().enumerate() {
                    *b += step * (i as u64 + 1) / 36;
                }
                let base = MetricPoint {
                    attributes: attributes.clone(),
                    start_time_unix_nano: start,
                    time_unix_nano: t,
                    resource: resource.clone(),
                    ..Default::default()
                };
                out.push(MetricPoint {
                    metric: requests.clone(),
                    value: PointValue::Number(Some(Number::Int(n as i64))),
                    ..base.clone()
                });
                out.push(MetricPoint {
                    metric: duration.clone(),
                    value: PointValue::Histogram(HistogramValue {
                        count: buckets.iter().sum(),
                        sum: Some(n as f64 * 42.0),
                        bucket_counts: buckets.clone(),
                        explicit_bounds: bounds.clone(),
                        min: None,
                        max: None,
                    }),
                    ..base
                });
                t += METRIC_STEP_NS;
            }
        }
    }
    out
}

/// How many spans the server holds.
fn stored_spans(server: &SkeinProcess) -> Result<u64, String> {
    let stats: Value = reqwest::blocking::get(format!("{}/api/v1/stats", server.api))
        .and_then(|r| r.json())
        .map_err(|e| format!("stats: {e}"))?;
    Ok(stats["spans"].as_u64().unwrap_or(0))
}

/// Runs the browser script's `timings` mode; its per-view figures.
fn timings(args: &UiArgs, api: &str) -> Result<Value, String> {
    let script = args
        .script
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.script.display()))?;
    let dir = script.parent().ok_or("the script has no folder")?;
    let out = Command::new("node")
        .current_dir(dir)
        .arg(&script)
        .args(["timings", "--api", api, "--runs", &args.runs.to_string()])
        .output()
        .map_err(|e| format!("node: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "browser script failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("UI-TIMINGS "))
        .ok_or_else(|| format!("no UI-TIMINGS line in: {stdout}"))?;
    serde_json::from_str(line).map_err(|e| format!("UI-TIMINGS: {e}"))
}

pub fn run(args: &UiArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let corpus = AgentCorpus::new(args.spans, now_ns());
    let server = match &args.data_dir {
        Some(dir) => SkeinProcess::start_at(&args.skein_bin, dir, &[])?,
        None => SkeinProcess::start(&args.skein_bin, &[])?,
    };
    let started = Instant::now();
    if stored_spans(&server)? < corpus.span_count() {
        load(&server, &corpus)?;
    }
    let load_s = started.elapsed().as_secs_f64();
    let views = timings(args, &server.api)?;
    server.stop()?;
    let worst = views
        .as_object()
        .map(|m| m.values().filter_map(|v| v["median_ms"].as_f64()).fold(0.0, f64::max))
        .unwrap_or(f64::NAN);
    for (name, v) in views.as_object().into_iter().flatten() {
        println!(
            "{name:>10}: median {:.0} ms, max {:.0} ms ({})",
            v["median_ms"].as_f64().unwrap_or(f64::NAN),
            v["max_ms"].as_f64().unwrap_or(f64::NAN),
            v["path"].as_str().unwrap_or("")
        );
    }
    let result = json!({
        "machine": machine.finish(),
        "params": {"corpus": "agent", "spans": corpus.span_count(), "logs": corpus.log_count(), "runs": args.runs,
                   "browser": "headless Chromium (/usr/bin/chromium) via playwright-core", "load_seconds": load_s},
        "results": {"views": views, "worst_median_ms": worst, "target_ms": TARGET_MS, "meets_target": worst <= TARGET_MS},
    });
    crate::report::write(&args.out, "ui", result)
}
