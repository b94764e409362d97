//! `skein-bench storage`: the same data and queries on local disk and on
//! object storage (an S3 API served by `moto_server` on loopback), side by
//! side in one run. Ingest, then per query: p50 warm (the local cache and
//! page cache filled), and cold (object storage: a restart with the cache
//! and staged copies deleted, so the first reading of each trace goes to
//! the bucket), with the bucket requests and bytes each query cost and the
//! cache's hit ratio; and once more with no cache at all (`--cache-size
//! 0`), where every read past the resident indexes is a range request.
//! Every answer is checked.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};
use skein_model::corpus::Corpus;

use crate::http1::Connection;
use crate::load::{self, Protocol};
use crate::machine::Machine;
use crate::server::SkeinProcess;
use crate::stats::Samples;

#[derive(Args, Debug)]
pub struct StorageArgs {
    /// The skein binary to benchmark.
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Spans ingested into each side.
    #[arg(long, default_value_t = 200_000)]
    pub spans: u64,
    /// Distinct traces read by id (cold, then warm).
    #[arg(long, default_value_t = 200)]
    pub lookups: u64,
    /// Where BENCHMARKS.md and benchmarks.json go.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

const BUCKET: &str = "skein-bench";
const SPANS_PER_TRACE: u64 = 10;

struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Result<Moto, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| e.to_string())?;
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("moto_server: {e} (pip install 'moto[server]')"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("moto_server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let r = reqwest::blocking::Client::new()
            .put(format!("http://127.0.0.1:{port}/{BUCKET}"))
            .send()
            .map_err(|e| format!("create bucket: {e}"))?;
        if !r.status().is_success() {
            return Err(format!("create bucket: HTTP {}", r.status()));
        }
        Ok(Moto { child, port })
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s3_flags(port: u16, prefix: &str) -> Vec<String> {
    [
        "--storage",
        &format!("s3://{BUCKET}/{prefix}"),
        "--s3-endpoint",
        &format!("http://127.0.0.1:{port}"),
        "--s3-allow-http",
        "--s3-region",
        "us-east-1",
        "--s3-access-key-id",
        "test",
        "--s3-secret-access-key",
        "test",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Bucket requests and bytes so far (zeros on local disk).
fn requests(p: &SkeinProcess) -> (u64, u64, u64, u64) {
    let st = p.stats().unwrap_or(Value::Null);
    let o = &st["object_storage"];
    let n = |k: &str| o[k].as_u64().unwrap_or(0);
    (
        n("get_requests"),
        n("bytes_fetched"),
        n("cache_hits"),
        n("cache_misses"),
    )
}

struct QueryFigures {
    latency: Value,
    gets_per_query: f64,
    bytes_per_query: f64,
}

/// Runs `paths` once each on a fresh connection, checking every answer.
fn measure(p: &SkeinProcess, paths: &[String], check: &dyn Fn(&Value) -> bool) -> Result<QueryFigures, String> {
    let mut c = Connection::new(&p.api)?;
    let before = requests(p);
    let mut s = Samples::default();
    for path in paths {
        let started = Instant::now();
        let a = c.get(path)?;
        s.push(started.elapsed());
        let v: Value = serde_json::from_slice(&a.body).map_err(|e| format!("{path}: {e}"))?;
        if a.status != 200 || !check(&v) {
            return Err(format!("wrong answer to {path}: HTTP {} {v}", a.status));
        }
    }
    let after = requests(p);
    let n = paths.len().max(1) as f64;
    Ok(QueryFigures {
        latency: serde_json::to_value(s.summary()).unwrap_or(Value::Null),
        gets_per_query: (after.0 - before.0) as f64 / n,
        bytes_per_query: (after.1 - before.1) as f64 / n,
    })
}

fn figures_json(q: &QueryFigures) -> Value {
    json!({"latency": q.latency, "bucket_gets_per_query": q.gets_per_query, "bucket_bytes_per_query": q.bytes_per_query})
}

fn side(args: &StorageArgs, corpus: &Corpus, extra: &[String], remote: bool) -> Result<Value, String> {
    let tmp = tempfile::Builder::new()
        .prefix("skein-bench-storage-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let data = tmp.path().join("data");
    let p = SkeinProcess::start_at(&args.skein_bin, &data, extra)?;
    let traces = args.spans / SPANS_PER_TRACE;
    let payloads: Vec<_> = (0..traces)
        .step_by(100)
        .map(|t| load::encode(Protocol::OtlpHttpProtobuf, &corpus.spans(t..(t + 100).min(traces))))
        .collect();
    let ingest = load::run(
        &p.target(),
        Protocol::OtlpHttpProtobuf,
        "/v1/traces",
        Arc::new(payloads),
        4,
        None,
        None,
    )?;
    // Stop (flush, and upload for object storage) and start again: every
    // query below reads parts, none the hot tier.
    let upload_started = Instant::now();
    p.stop()?;
    let stop_seconds = upload_started.elapsed().as_secs_f64();
    if remote {
        // Cold: nothing of the bucket is on local disk.
        for d in ["cache", "parts"] {
            let _ = std::fs::remove_dir_all(data.join(d));
        }
    }
    let p = SkeinProcess::start_at(&args.skein_bin, &data, extra)?;
    let lookups: Vec<String> = (0..args.lookups)
        .map(|i| {
            let t = i * (traces / args.lookups.max(1)).max(1) % traces.max(1);
            format!("/api/v1/traces/{}", corpus.spans(t..t + 1)[0].trace_id.to_hex())
        })
        .collect();
    let whole_trace = |v: &Value| v["span_count"] == SPANS_PER_TRACE;
    let cold = measure(&p, &lookups, &whole_trace)?;
    let warm = measure(&p, &lookups, &whole_trace)?;
    let filter: Vec<String> = (0..50)
        .map(|_| "/api/v1/spans?attr.http.method=GET&limit=100".to_string())
        .collect();
    let filter = measure(&p, &filter, &|v| v["spans"].as_array().is_some_and(|a| a.len() == 100))?;
    let services: Vec<String> = (0..20).map(|_| "/api/v1/services?last=30d".to_string()).collect();
    let services = measure(&p, &services, &|v| {
        v["services"].as_array().is_some_and(|a| !a.is_empty())
    })?;
    let (_, _, hits, misses) = requests(&p);
    let stats = p.stats()?;
    p.stop()?;
    Ok(json!({
        "ingest_spans_per_sec": ingest.records_per_sec(),
        "ingest_errors": ingest.errors,
        "stop_seconds": stop_seconds,
        "trace_by_id_cold": figures_json(&cold),
        "trace_by_id_warm": figures_json(&warm),
        "attribute_filter": figures_json(&filter),
        "services": figures_json(&services),
        "cache_hit_ratio": if hits + misses == 0 { Value::Null } else { json!(hits as f64 / (hits + misses) as f64) },
        "bucket_bytes": stats["object_storage"]["remote_bytes"],
        "part_bytes": stats["part_bytes"],
    }))
}

pub fn run(args: &StorageArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let end_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let corpus = Corpus::new(args.spans, end_ns);
    let moto = Moto::start()?;
    println!("local disk…");
    let local = side(args, &corpus, &[], false)?;
    println!("object storage (moto_server on loopback)…");
    let remote = side(args, &corpus, &s3_flags(moto.port, "cached"), true)?;
    println!("object storage without a cache…");
    let mut flags = s3_flags(moto.port, "uncached");
    flags.extend(["--cache-size".to_string(), "0".to_string()]);
    let uncached = side(args, &corpus, &flags, true)?;
    drop(moto);
    for (name, v) in [("local", &local), ("s3", &remote), ("s3 without cache", &uncached)] {
        println!(
            "{name}: ingest {:.0} spans/s, trace by id cold p50 {} ms, warm p50 {} ms",
            v["ingest_spans_per_sec"].as_f64().unwrap_or(0.0),
            v["trace_by_id_cold"]["latency"]["p50_ms"],
            v["trace_by_id_warm"]["latency"]["p50_ms"],
        );
    }
    let result = json!({
        "machine": machine.finish(),
        "params": {"spans": args.spans, "lookups": args.lookups, "s3": "moto_server on loopback", "cache_size": "1GiB (default)"},
        "results": {"local": local, "s3": remote, "s3_uncached": uncached},
    });
    crate::report::write(&args.out, "storage", result)
}
