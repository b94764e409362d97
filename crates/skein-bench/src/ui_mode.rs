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
    let server = SkeinProcess::start(&args.skein_bin, &[])?;
    let started = Instant::now();
    load(&server, &corpus)?;
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
