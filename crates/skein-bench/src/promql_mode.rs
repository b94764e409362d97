//! `skein-bench promql`: the PromQL figures of issue #23, side by side with
//! the real Prometheus on the same samples in one run.
//!
//! Counter series (10k by default) over a day at 15 s (57.6M samples) are
//! remote-written, in time order, to one `skein serve` and to one
//! `prometheus` (its remote-write receiver, on loopback, data in a
//! temporary directory). Then each server answers, several times:
//!
//! - instant: `sum by (job) (rate(bench_requests_total[5m]))` at the last
//!   sample, over every series;
//! - range: the same over the 1k series of one `group`, for the whole day
//!   at a 60 s step.
//!
//! Both answers must agree (same series, values within a relative 1e-9),
//! or the run fails. The figures are medians.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};
use skein_model::remote_write::{Label, Sample, TimeSeries, WriteRequest, encode};

use crate::machine::Machine;
use crate::server::SkeinProcess;
use crate::stats::median;

#[derive(Args, Debug)]
pub struct PromqlArgs {
    /// The skein binary to benchmark.
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// The Prometheus binary to compare with.
    #[arg(long, default_value = "prometheus")]
    pub prometheus_bin: PathBuf,
    /// Counter series (a multiple of 100: ten jobs by ten groups).
    #[arg(long, default_value_t = 10_000)]
    pub series: u64,
    /// Hours of samples, ending now.
    #[arg(long, default_value_t = 24)]
    pub hours: u64,
    /// Runs of each query on each server; the medians are reported.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Where BENCHMARKS.md and benchmarks.json go.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Keep Skein's data in this new directory (to profile queries on it
    /// after the run); a temporary directory otherwise.
    #[arg(long)]
    pub keep_data: Option<PathBuf>,
}

const METRIC: &str = "bench_requests_total";
const SCRAPE_MS: i64 = 15_000;
const RANGE_STEP_S: i64 = 60;
/// Scrapes per remote-write request and series, and series per request.
const CHUNK_SCRAPES: i64 = 40;
const CHUNK_SERIES: u64 = 500;
/// The targets.
const TARGET_INSTANT_MS: f64 = 50.0;
const TARGET_RANGE_MS: f64 = 500.0;

pub fn instant_query() -> String {
    format!("sum by (job) (rate({METRIC}[5m]))")
}

pub fn range_query() -> String {
    format!("sum by (job) (rate({METRIC}{{group=\"g0\"}}[5m]))")
}

/// Series `i`'s labels: ten jobs, ten groups across them, one instance each.
fn labels(i: u64) -> Vec<Label> {
    let l = |name: &str, value: String| Label {
        name: name.into(),
        value,
    };
    vec![
        l("__name__", METRIC.into()),
        l("group", format!("g{}", (i / 10) % 10)),
        l("instance", format!("host-{i:05}")),
        l("job", format!("job-{}", i % 10)),
    ]
}

/// What series `i`'s counter grows by at scrape `k`: 0 to 9, from a hash,
/// so every server sees the same integers (exact in a double).
fn increment(i: u64, k: i64) -> f64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x % 10) as f64
}

/// A Prometheus of our own: loopback port, temporary data directory.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

fn start_prometheus(bin: &std::path::Path) -> Result<Prometheus, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(&cfg, "global:\n  scrape_interval: 15s\n").map_err(|e| e.to_string())?;
    let port = free_port()?;
    let log = std::fs::File::create(dir.path().join("prometheus.log")).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver")
        .arg("--storage.tsdb.retention.time=30d")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("start {}: {e} (./test.sh installs Prometheus)", bin.display()))?;
    let p = Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while reqwest::blocking::get(format!("{}/-/ready", p.url))
        .map(|r| !r.status().is_success())
        .unwrap_or(true)
    {
        if Instant::now() > deadline {
            return Err("Prometheus did not become ready in 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(p)
}

/// Remote-writes every sample to each of `urls`, chunk by chunk in time
/// order (each chunk to all servers at once); the seconds each took.
fn load(args: &PromqlArgs, t0: i64, scrapes: i64, urls: &[String]) -> Result<Vec<f64>, String> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let mut busy = vec![Duration::ZERO; urls.len()];
    let mut totals = vec![0.0f64; args.series as usize];
    let pb = indicatif::ProgressBar::new(scrapes as u64);
    let mut k0 = 0;
    while k0 < scrapes {
        let k1 = (k0 + CHUNK_SCRAPES).min(scrapes);
        let mut first = 0;
        while first < args.series {
            let last = (first + CHUNK_SERIES).min(args.series);
            let timeseries = (first..last)
                .map(|i| TimeSeries {
                    labels: labels(i),
                    samples: (k0..k1)
                        .map(|k| {
                            totals[i as usize] += increment(i, k);
                            Sample {
                                value: totals[i as usize],
                                timestamp: t0 + k * SCRAPE_MS,
                            }
                        })
                        .collect(),
                    histograms: Vec::new(),
                })
                .collect();
            let body = encode(&WriteRequest { timeseries });
            std::thread::scope(|s| {
                let sends: Vec<_> = urls
                    .iter()
                    .map(|url| {
                        let (http, body) = (&http, &body);
                        s.spawn(move || {
                            let started = Instant::now();
                            let r = http
                                .post(url)
                                .header("content-type", "application/x-protobuf")
                                .header("content-encoding", "snappy")
                                .header("x-prometheus-remote-write-version", "0.1.0")
                                .body(body.clone())
                                .send()
                                .map_err(|e| format!("POST {url}: {e}"))?;
                            let status = r.status();
                            if !status.is_success() {
                                return Err(format!("POST {url}: HTTP {status}: {}", r.text().unwrap_or_default()));
                            }
                            Ok(started.elapsed())
                        })
                    })
                    .collect();
                for (b, h) in busy.iter_mut().zip(sends) {
                    *b += h.join().map_err(|_| "a sender panicked".to_string())??;
                }
                Ok::<(), String>(())
            })?;
            first = last;
        }
        pb.inc((k1 - k0) as u64);
        k0 = k1;
    }
    pb.finish_and_clear();
    Ok(busy.iter().map(Duration::as_secs_f64).collect())
}

/// A query's answer: each series' labels (as JSON) → its `(t, v)` points.
type Answer = BTreeMap<String, Vec<(f64, f64)>>;

/// A query's answer, and the milliseconds it took.
fn ask(
    http: &reqwest::blocking::Client,
    base: &str,
    path: &str,
    params: &[(&str, String)],
) -> Result<(f64, Answer), String> {
    let started = Instant::now();
    let r = http
        .get(format!("{base}{path}"))
        .query(params)
        .send()
        .map_err(|e| format!("{base}{path}: {e}"))?;
    let v: Value = r.json().map_err(|e| format!("{base}{path}: {e}"))?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    if v["status"] != "success" {
        return Err(format!("{base}{path}: {v}"));
    }
    let mut out = BTreeMap::new();
    for s in v["data"]["result"].as_array().into_iter().flatten() {
        let key = s["metric"].to_string();
        let point = |p: &Value| -> (f64, f64) {
            let t = p[0].as_f64().unwrap_or(f64::NAN);
            let v = p[1].as_str().and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
            (t, v)
        };
        let points = match s.get("values") {
            Some(vs) => vs.as_array().into_iter().flatten().map(point).collect(),
            None => vec![point(&s["value"])],
        };
        out.insert(key, points);
    }
    Ok((ms, out))
}

/// Points compared, or how the answers differ.
fn agree(a: &Answer, b: &Answer) -> Result<usize, String> {
    if a.keys().ne(b.keys()) {
        return Err(format!(
            "different series: {:?} against {:?}",
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>()
        ));
    }
    let mut n = 0;
    for (k, xs) in a {
        let ys = &b[k];
        if xs.len() != ys.len() {
            return Err(format!("{k}: {} points against {}", xs.len(), ys.len()));
        }
        for (x, y) in xs.iter().zip(ys) {
            let close = (x.1 - y.1).abs() <= 1e-9 * x.1.abs().max(y.1.abs()).max(1e-300);
            if x.0 != y.0 || !close {
                return Err(format!("{k}: {x:?} against {y:?}"));
            }
            n += 1;
        }
    }
    Ok(n)
}

pub fn run(args: &PromqlArgs) -> Result<(), String> {
    if args.series == 0 || !args.series.is_multiple_of(100) {
        return Err("--series must be a positive multiple of 100".into());
    }
    let machine = Machine::probe();
    let scrapes = (args.hours as i64 * 3_600_000 / SCRAPE_MS).max(1);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    // Aligned to the scrape interval, the last scrape a minute ago.
    let end = (now_ms - 60_000) / SCRAPE_MS * SCRAPE_MS;
    let t0 = end - (scrapes - 1) * SCRAPE_MS;
    let skein = match &args.keep_data {
        Some(dir) if dir.exists() => return Err(format!("--keep-data {}: already exists", dir.display())),
        Some(dir) => SkeinProcess::start_at(&args.skein_bin, dir, &[])?,
        None => SkeinProcess::start(&args.skein_bin, &[])?,
    };
    let prom = start_prometheus(&args.prometheus_bin)?;
    let urls = [
        format!("{}/prometheus/api/v1/write", skein.api),
        format!("{}/api/v1/write", prom.url),
    ];
    println!(
        "promql: writing {} series x {scrapes} scrapes ({} samples) to Skein and Prometheus",
        args.series,
        args.series * scrapes as u64
    );
    let busy = load(args, t0, scrapes, &urls)?;
    // Queries are timed on a settled store: the hot tier flushed (it is
    // written out once it is a minute old) and no compaction running, so
    // no background work lands in the timings.
    let deadline = Instant::now() + Duration::from_secs(300);
    while skein.stats()?["hot_records"].as_u64().unwrap_or(0) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    skein.wait_settled()?;
    let samples = args.series * scrapes as u64;
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|e| e.to_string())?;
    let secs = |ms: i64| format!("{:.3}", ms as f64 / 1e3);
    let instant = [("query", instant_query()), ("time", secs(end))];
    let range = [
        ("query", range_query()),
        ("start", secs(t0 + 300_000)),
        ("end", secs(end)),
        ("step", RANGE_STEP_S.to_string()),
    ];
    let bases = [
        (skein.api.clone() + "/prometheus", "skein"),
        (prom.url.clone(), "prometheus"),
    ];
    let mut times: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    let mut compared = BTreeMap::new();
    for (what, path, params) in [
        ("instant", "/api/v1/query", &instant[..]),
        ("range", "/api/v1/query_range", &range[..]),
    ] {
        let mut answers = Vec::new();
        for (base, name) in &bases {
            let mut last = BTreeMap::new();
            // One unmeasured run first: Prometheus memory-maps its chunks
            // and Skein fills its page cache on the first read.
            for run in 0..=args.runs.max(1) {
                let (ms, answer) = ask(&http, base, path, params)?;
                if run > 0 {
                    times.entry((what, name)).or_default().push(ms);
                }
                last = answer;
            }
            answers.push(last);
        }
        let points =
            agree(&answers[0], &answers[1]).map_err(|e| format!("{what} query: Skein and Prometheus differ: {e}"))?;
        if points == 0 {
            return Err(format!("{what} query: both answered nothing"));
        }
        println!(
            "promql {what}: skein {:.1} ms, prometheus {:.1} ms (p50), {points} points agree",
            median(times[&(what, "skein")].clone()),
            median(times[&(what, "prometheus")].clone())
        );
        compared.insert(what, points);
    }
    let skein_rss = skein.peak_rss_bytes();
    let skein_disk = crate::server::dir_bytes(&skein.data_dir);
    skein.stop()?;
    drop(prom);
    let p50 = |what, name| median(times[&(what, name)].clone());
    let (si, pi, sr, pr) = (
        p50("instant", "skein"),
        p50("instant", "prometheus"),
        p50("range", "skein"),
        p50("range", "prometheus"),
    );
    let result = json!({
        "machine": machine.finish(),
        "params": {"series": args.series, "hours": args.hours, "scrape_s": SCRAPE_MS / 1000, "samples": samples, "runs": args.runs,
                   "instant_query": instant_query(), "range_query": range_query(), "range_step_s": RANGE_STEP_S,
                   "prometheus": prometheus_version(&args.prometheus_bin)},
        "results": {
            "load_seconds": {"skein": busy[0], "prometheus": busy[1]},
            "samples_per_s": {"skein": samples as f64 / busy[0].max(1e-9), "prometheus": samples as f64 / busy[1].max(1e-9)},
            "skein_peak_rss_bytes": skein_rss, "skein_disk_bytes": skein_disk,
            "instant_ms": {"skein": si, "prometheus": pi, "ratio": si / pi.max(1e-9), "points_compared": compared["instant"]},
            "range_ms": {"skein": sr, "prometheus": pr, "ratio": sr / pr.max(1e-9), "points_compared": compared["range"]},
            "target_instant_ms": TARGET_INSTANT_MS, "target_range_ms": TARGET_RANGE_MS,
            "meets_targets": si <= TARGET_INSTANT_MS && sr <= TARGET_RANGE_MS,
            "within_2x_of_prometheus": si <= 2.0 * pi && sr <= 2.0 * pr,
        },
    });
    crate::report::write(&args.out, "promql", result)
}

fn prometheus_version(bin: &std::path::Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default()
}
