//! `skein-bench sql`: the SQL figure of issue #23. One `skein serve` holding
//! the canonical corpus (10M spans by default, over the last hour), then
//! `SELECT service_name, count(*), approx_percentile_cont(duration_ns, 0.95)
//! FROM spans WHERE <last hour> GROUP BY service_name` through
//! `POST /api/v1/sql`, several times; the figure is the median, and every
//! answer's counts must add up to the spans stored.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use prost::Message;
use serde_json::{Value, json};
use skein_model::corpus::Corpus;

use crate::machine::Machine;
use crate::server::SkeinProcess;
use crate::stats::median;

#[derive(Args, Debug)]
pub struct SqlArgs {
    /// The skein binary to benchmark.
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Spans in the canonical corpus.
    #[arg(long, default_value_t = 10_000_000)]
    pub spans: u64,
    /// Runs of the query; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Where BENCHMARKS.md and benchmarks.json go.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

/// The target for the query over 10M spans.
const TARGET_S: f64 = 1.0;
const BATCH_TRACES: u64 = 500;
/// How far past now the corpus's hour ends.
const SLACK: Duration = Duration::from_secs(600);

pub const QUERY: &str = "SELECT service_name, count(*) AS spans, approx_percentile_cont(duration_ns, 0.95) AS p95_ns \
     FROM spans WHERE start_time_unix_nano > now() - INTERVAL '1 hour' GROUP BY service_name";

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn load(http: &reqwest::blocking::Client, server: &SkeinProcess, c: &Corpus) -> Result<(), String> {
    let mut t = 0;
    while t < c.traces {
        let end = (t + BATCH_TRACES).min(c.traces);
        let body = skein_model::otlp::spans_to_otlp(&c.spans(t..end)).encode_to_vec();
        let url = format!("{}/v1/traces", server.otlp_http);
        let r = http
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .map_err(|e| format!("POST {url}: {e}"))?;
        if !r.status().is_success() {
            return Err(format!("POST {url}: HTTP {}", r.status()));
        }
        t = end;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
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
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One run: seconds, and the spans the answer counted.
fn query(http: &reqwest::blocking::Client, api: &str) -> Result<(f64, u64), String> {
    let started = Instant::now();
    let r = http
        .post(format!("{api}/api/v1/sql"))
        .json(&json!({"query": QUERY}))
        .send()
        .map_err(|e| format!("sql: {e}"))?;
    let status = r.status();
    let v: Value = r.json().map_err(|e| format!("sql answer: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    if !status.is_success() {
        return Err(format!("sql: HTTP {status}: {v}"));
    }
    let counted = v["rows"]
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r[1].as_u64()).sum())
        .unwrap_or(0);
    Ok((secs, counted))
}

pub fn run(args: &SqlArgs) -> Result<(), String> {
    let machine = Machine::probe();
    // The corpus's hour ends ten minutes from now, so that every span stays
    // inside `now() - 1 hour` while the load and the runs take (10M spans
    // load in about a minute here; with one minute of slack the oldest
    // spans aged out before the first run).
    let corpus = Corpus::new(args.spans, now_ns() + SLACK.as_nanos() as u64);
    let server = SkeinProcess::start(&args.skein_bin, &[])?;
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    load(&http, &server, &corpus)?;
    let load_s = started.elapsed().as_secs_f64();
    if started.elapsed() >= SLACK {
        return Err(format!(
            "the load took {load_s:.0} s: the oldest spans have left the query's hour"
        ));
    }
    let mut times = Vec::new();
    let mut counted = 0;
    for _ in 0..args.runs.max(1) {
        let (s, n) = query(&http, &server.api)?;
        println!("sql: {s:.3} s, {n} spans counted");
        times.push(s);
        counted = n;
    }
    server.stop()?;
    let m = median(times.clone());
    let result = json!({
        "machine": machine.finish(),
        "params": {"corpus": "canonical", "spans": corpus.span_count(), "runs": args.runs, "query": QUERY, "load_seconds": load_s},
        "results": {"median_s": m, "max_s": times.iter().cloned().fold(0.0, f64::max), "spans_counted": counted,
                    "counts_verified": counted == corpus.span_count(), "target_s": TARGET_S, "meets_target": m <= TARGET_S},
    });
    crate::report::write(&args.out, "sql", result)
}
