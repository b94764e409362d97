//! PromQL against the real Prometheus (Debian's `prometheus`, installed by
//! `./test.sh`): the same samples go to both by remote write (Skein's
//! `/prometheus/api/v1/write`, Prometheus's own receiver), then every query
//! of [`QUERIES`] is asked of both, instant (at several times) and range,
//! and must give the same series and values (relative error ≤ 1e-9).
//!
//! Native histograms the same way: integer histograms of several schemas,
//! zero buckets and a counter reset, and the queries of
//! [`HISTOGRAM_QUERIES`], whose answers hold histograms as well as floats.
//!
//! Also: a real Prometheus scraping a tiny exporter and remote-writing to
//! Skein; and the Prometheus error format for bad input.
//!
//! These tests fail, never skip, when Prometheus is missing.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, free_port};
use serde_json::Value;
use skein_server::prometheus::remote_write::{Histogram, Label, Sample, TimeSeries, WriteRequest, encode};

const STEP_MS: i64 = 15_000;
/// Two hours of samples.
const SAMPLES: i64 = 480;
const MIN: i64 = 60_000;

/// A Prometheus server of our own on a loopback port (never the system
/// service), with its data in a temporary directory.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus_binary() -> &'static str {
    let ok = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the `prometheus` binary is missing: ./test.sh installs it (apt-get install -y --no-install-recommends prometheus)"
    );
    "prometheus"
}

fn start_prometheus(dir: &Path, config: &str) -> Prometheus {
    let bin = prometheus_binary();
    std::fs::create_dir_all(dir).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, config).unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver")
        .arg("--enable-feature=native-histograms")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    let p = Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::blocking::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if client
            .get(format!("{}/-/ready", p.url))
            .send()
            .is_ok_and(|r| r.status().is_success())
        {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus did not become ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A deterministic pseudo-random sequence (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Gen {
    labels: Vec<(String, String)>,
    samples: Vec<(i64, f64)>,
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The data set: counters (with resets), gauges, a classic histogram, a
/// series ended by a staleness marker and one that just stops.
fn generate(t0: i64) -> Vec<Gen> {
    let mut rng = Rng(0x5eed_cafe_f00d_1234);
    let mut out = Vec::new();
    let jobs = ["api", "web"];
    let instances = ["10.0.0.1:9100", "10.0.0.2:9100"];
    // Scrape times with a little jitter, as real scrapes have.
    let times =
        |rng: &mut Rng| -> Vec<i64> { (0..SAMPLES).map(|i| t0 + i * STEP_MS + rng.below(400) as i64).collect() };
    for job in jobs {
        for inst in instances {
            for method in ["GET", "POST"] {
                for status in ["200", "500"] {
                    let ts = times(&mut rng);
                    let mut v = 0.0;
                    let reset_at = if method == "POST" && status == "200" {
                        Some(100 + rng.below(200) as usize)
                    } else {
                        None
                    };
                    let mut samples = Vec::new();
                    for (i, t) in ts.into_iter().enumerate() {
                        if Some(i) == reset_at {
                            v = rng.below(3) as f64;
                        } else {
                            v += rng.below(if status == "200" { 20 } else { 3 }) as f64;
                        }
                        samples.push((t, v));
                    }
                    out.push(Gen {
                        labels: labels(&[
                            ("__name__", "http_requests_total"),
                            ("job", job),
                            ("instance", inst),
                            ("method", method),
                            ("status", status),
                        ]),
                        samples,
                    });
                }
            }
            for room in ["a", "b"] {
                let ts = times(&mut rng);
                let mut v = 18.0 + rng.unit() * 6.0;
                let samples = ts
                    .into_iter()
                    .map(|t| {
                        v += (rng.unit() - 0.5) * 0.8;
                        (t, (v * 1000.0).round() / 1000.0)
                    })
                    .collect();
                out.push(Gen {
                    labels: labels(&[
                        ("__name__", "temperature_celsius"),
                        ("job", job),
                        ("instance", inst),
                        ("room", room),
                    ]),
                    samples,
                });
            }
            // A classic histogram: cumulative buckets, sum and count.
            let bounds = ["0.1", "0.5", "1", "5", "+Inf"];
            let ts = times(&mut rng);
            let mut counts = [0.0f64; 5];
            let mut sum = 0.0;
            let mut series: Vec<Vec<(i64, f64)>> = vec![Vec::new(); 7];
            for t in ts {
                for _ in 0..rng.below(8) {
                    let x = rng.unit() * rng.unit() * 6.0;
                    sum += x;
                    for (i, b) in [0.1, 0.5, 1.0, 5.0, f64::INFINITY].iter().enumerate() {
                        if x <= *b {
                            counts[i] += 1.0;
                        }
                    }
                }
                for (s, c) in series.iter_mut().zip(counts) {
                    s.push((t, c));
                }
                series[5].push((t, sum));
                series[6].push((t, counts[4]));
            }
            for (i, s) in series.into_iter().enumerate() {
                let mut l = vec![("job", job), ("instance", inst)];
                let name = match i {
                    0..5 => {
                        l.push(("le", bounds[i]));
                        "request_duration_seconds_bucket"
                    }
                    5 => "request_duration_seconds_sum",
                    _ => "request_duration_seconds_count",
                };
                l.push(("__name__", name));
                out.push(Gen {
                    labels: labels(&l),
                    samples: s,
                });
            }
        }
    }
    // Ends at 60 minutes with a staleness marker.
    let mut samples: Vec<(i64, f64)> = (0..240).map(|i| (t0 + i * STEP_MS, (i / 40) as f64)).collect();
    samples.push((t0 + 240 * STEP_MS, f64::from_bits(0x7ff0_0000_0000_0002)));
    out.push(Gen {
        labels: labels(&[("__name__", "batch_job_last_success"), ("job", "batch")]),
        samples,
    });
    // Stops at 70 minutes without a marker: gone once the lookback passes.
    out.push(Gen {
        labels: labels(&[("__name__", "ephemeral_gauge"), ("job", "batch"), ("instance", "x")]),
        samples: (0..280)
            .map(|i| (t0 + i * STEP_MS + 7, (i % 13) as f64 * 1.5))
            .collect(),
    });
    out
}

/// The samples as remote-write requests, oldest first, ten minutes each
/// (Prometheus appends in time order).
fn requests(data: &[Gen], t0: i64) -> Vec<Vec<u8>> {
    let chunk = 10 * MIN;
    let mut out = Vec::new();
    let mut from = t0;
    let end = t0 + SAMPLES * STEP_MS + MIN;
    while from < end {
        let req = WriteRequest {
            timeseries: data
                .iter()
                .map(|g| TimeSeries {
                    labels: g
                        .labels
                        .iter()
                        .map(|(n, v)| Label {
                            name: n.clone(),
                            value: v.clone(),
                        })
                        .collect(),
                    samples: g
                        .samples
                        .iter()
                        .filter(|(t, _)| *t >= from && *t < from + chunk)
                        .map(|&(timestamp, value)| Sample { value, timestamp })
                        .collect(),
                    histograms: Vec::new(),
                })
                .filter(|s| !s.samples.is_empty())
                .collect(),
        };
        out.push(encode(&req));
        from += chunk;
    }
    out
}

fn post_write(client: &reqwest::blocking::Client, url: &str, body: &[u8]) -> (u16, String) {
    let r = client
        .post(url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(body.to_vec())
        .send()
        .expect("remote write is answered");
    let status = r.status().as_u16();
    (status, r.text().unwrap_or_default())
}

/// The queries of the conformance suite.
const QUERIES: &[&str] = &[
    "http_requests_total",
    "http_requests_total{method=\"GET\"}",
    "http_requests_total{method!=\"GET\"}",
    "http_requests_total{status=~\"5..\"}",
    "http_requests_total{status!~\"2..\", job=\"api\"}",
    "{__name__=~\"http_.*|temperature_.*\", job=\"web\"}",
    "rate(http_requests_total[5m])",
    "irate(http_requests_total[5m])",
    "increase(http_requests_total[10m])",
    "rate(http_requests_total[1m])",
    "delta(temperature_celsius[10m])",
    "idelta(temperature_celsius[5m])",
    "double_exponential_smoothing(temperature_celsius[10m], 0.3, 0.6)",
    "double_exponential_smoothing(http_requests_total[15m], 0.5, 0.1)",
    "deriv(temperature_celsius[10m])",
    "predict_linear(temperature_celsius[10m], 600)",
    "avg_over_time(temperature_celsius[10m])",
    "min_over_time(temperature_celsius[10m])",
    "max_over_time(temperature_celsius[10m])",
    "sum_over_time(temperature_celsius[10m])",
    "count_over_time(temperature_celsius[10m])",
    "last_over_time(temperature_celsius[10m])",
    "stddev_over_time(temperature_celsius[10m])",
    "stdvar_over_time(temperature_celsius[10m])",
    "quantile_over_time(0.9, temperature_celsius[10m])",
    "present_over_time(ephemeral_gauge[10m])",
    "changes(temperature_celsius[10m])",
    "resets(http_requests_total[30m])",
    "sum by (job) (rate(http_requests_total[5m]))",
    "sum(rate(http_requests_total[5m])) by (job, status)",
    "sum without (instance) (rate(http_requests_total[5m]))",
    "avg by (method) (rate(http_requests_total[5m]))",
    "min by (job) (temperature_celsius)",
    "max without (room) (temperature_celsius)",
    "count by (status) (http_requests_total)",
    "topk(3, rate(http_requests_total[5m]))",
    "bottomk(2, temperature_celsius)",
    "topk by (job) (1, temperature_celsius)",
    "quantile(0.75, temperature_celsius)",
    "quantile by (job) (0.5, rate(http_requests_total[5m]))",
    "count_values(\"reading\", round(temperature_celsius))",
    "stddev(temperature_celsius)",
    "stdvar by (job) (temperature_celsius)",
    "group by (job) (http_requests_total)",
    "histogram_quantile(0.9, rate(request_duration_seconds_bucket[5m]))",
    "histogram_quantile(0.5, sum by (le, job) (rate(request_duration_seconds_bucket[5m])))",
    "histogram_quantile(0.99, sum by (le) (rate(request_duration_seconds_bucket[10m])))",
    "rate(request_duration_seconds_sum[5m]) / rate(request_duration_seconds_count[5m])",
    "http_requests_total / on(job, instance) group_left sum by (job, instance) (http_requests_total)",
    "sum by (job, instance) (rate(http_requests_total[5m])) / on(job, instance) group_right rate(http_requests_total[5m])",
    "rate(http_requests_total{status=\"500\"}[5m]) / ignoring(status) rate(http_requests_total{status=\"200\"}[5m])",
    "temperature_celsius > 20",
    "temperature_celsius > bool 20",
    "20 < temperature_celsius",
    "http_requests_total{status=\"500\"} and on(job, instance) (temperature_celsius > 21)",
    "http_requests_total or temperature_celsius",
    "http_requests_total unless on(job) temperature_celsius{job=\"api\"}",
    "temperature_celsius == bool on(job, instance, room) temperature_celsius",
    "absent(nonexistent_metric{job=\"x\"})",
    "absent(temperature_celsius)",
    "absent_over_time(batch_job_last_success[5m])",
    "label_replace(temperature_celsius, \"host\", \"$1\", \"instance\", \"(.*):.*\")",
    "label_join(temperature_celsius, \"id\", \"-\", \"job\", \"instance\", \"room\")",
    "clamp(temperature_celsius, 19, 23)",
    "clamp_min(temperature_celsius, 20)",
    "clamp_max(temperature_celsius, 20)",
    "abs(-temperature_celsius)",
    "ceil(temperature_celsius) - floor(temperature_celsius)",
    "round(temperature_celsius, 0.5)",
    "sqrt(temperature_celsius) + exp(temperature_celsius / 10)",
    "ln(temperature_celsius) * log2(temperature_celsius) / log10(temperature_celsius)",
    "sgn(delta(temperature_celsius[10m]))",
    "time()",
    "vector(1)",
    "scalar(sum(temperature_celsius))",
    "timestamp(temperature_celsius)",
    "hour() + minute() + day_of_week() + month() + year() + day_of_month() + days_in_month() + day_of_year()",
    "temperature_celsius offset 10m",
    "rate(http_requests_total[5m] offset 15m)",
    "rate(http_requests_total[5m] @ end())",
    "temperature_celsius @ start()",
    "max_over_time(rate(http_requests_total[5m])[30m:1m])",
    "avg_over_time(temperature_celsius[20m:2m])",
    "min_over_time(sum by (job) (temperature_celsius)[15m:30s] offset 5m)",
    "batch_job_last_success",
    "ephemeral_gauge",
    "sort(temperature_celsius)",
    "sort_desc(sum by (job) (rate(http_requests_total[5m])))",
    "-temperature_celsius * 2 + 1",
    "2 ^ 3 % 5",
    "temperature_celsius % 3",
    "count(temperature_celsius) > bool 3",
    "max by (job, room) (temperature_celsius) / on(job) group_left(extra) label_replace(sum by (job) (http_requests_total), \"extra\", \"x-$1\", \"job\", \"(.*)\")",
];

/// Range-vector queries: instant only.
const MATRIX_QUERIES: &[&str] = &[
    "temperature_celsius[2m]",
    "rate(http_requests_total{job=\"api\"}[5m])[10m:1m]",
    "batch_job_last_success[3m]",
];

fn get(client: &reqwest::blocking::Client, url: &str, params: &[(&str, String)]) -> (u16, Value) {
    let r = client.get(url).query(params).send().expect("answered");
    let status = r.status().as_u16();
    let body = r.text().unwrap_or_default();
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|_| panic!("{url}: not JSON: {body}")),
    )
}

/// The same query in the Prometheus under test: Debian's 2.42 knows
/// `double_exponential_smoothing` by its name before 3.0, `holt_winters`
/// (the same function; promql-parser has only the new name).
fn for_prometheus<'a>(params: &[(&'a str, String)]) -> Vec<(&'a str, String)> {
    params
        .iter()
        .map(|(k, v)| (*k, v.replace("double_exponential_smoothing", "holt_winters")))
        .collect()
}

fn parse_value(v: &Value) -> f64 {
    match v.as_str().expect("a value is a string") {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        s => s.parse().expect("a float"),
    }
}

fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// A point: its time and its numbers (a float's value; a histogram's
/// count, sum, then each bucket's boundary rule, bounds and count).
type Point = (f64, Vec<f64>);

fn point(p: &Value) -> Point {
    let t = p[0].as_f64().expect("a timestamp");
    let v = &p[1];
    if v.is_string() {
        return (t, vec![parse_value(v)]);
    }
    let mut nums = vec![parse_value(&v["count"]), parse_value(&v["sum"])];
    for b in v["buckets"].as_array().into_iter().flatten() {
        nums.push(b[0].as_f64().expect("a boundary rule"));
        nums.extend(b.as_array().expect("a bucket")[1..].iter().map(parse_value));
    }
    (t, nums)
}

/// A result as `labels → [point]`.
fn normalize(data: &Value) -> (String, BTreeMap<String, Vec<Point>>) {
    let kind = data["resultType"].as_str().unwrap_or("").to_string();
    let mut out = BTreeMap::new();
    match kind.as_str() {
        "scalar" => {
            out.insert("scalar".into(), vec![point(&data["result"])]);
        }
        "vector" | "matrix" => {
            for s in data["result"].as_array().expect("an array") {
                let key = s["metric"].to_string();
                let mut pts: Vec<Point> = ["value", "histogram"]
                    .iter()
                    .filter_map(|k| s.get(*k))
                    .chain(
                        ["values", "histograms"]
                            .iter()
                            .filter_map(|k| s.get(*k))
                            .flat_map(|a| a.as_array().expect("points").iter()),
                    )
                    .map(point)
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                assert!(out.insert(key.clone(), pts).is_none(), "duplicate series {key}");
            }
        }
        other => panic!("unexpected result type {other}"),
    }
    (kind, out)
}

fn compare(what: &str, skein: &Value, prom: &Value) -> Result<usize, String> {
    if prom["status"] != "success" {
        return Err(format!("{what}: Prometheus failed: {prom}"));
    }
    if skein["status"] != "success" {
        return Err(format!("{what}: Skein failed: {skein}"));
    }
    let (sk, s) = normalize(&skein["data"]);
    let (pk, p) = normalize(&prom["data"]);
    if sk != pk {
        return Err(format!("{what}: result type {sk}, Prometheus {pk}"));
    }
    if s.keys().ne(p.keys()) {
        let only_s: Vec<_> = s.keys().filter(|k| !p.contains_key(*k)).take(3).collect();
        let only_p: Vec<_> = p.keys().filter(|k| !s.contains_key(*k)).take(3).collect();
        return Err(format!(
            "{what}: {} series, Prometheus {}; only in Skein: {only_s:?}; only in Prometheus: {only_p:?}",
            s.len(),
            p.len()
        ));
    }
    let mut points = 0;
    for (k, sp) in &s {
        let pp = &p[k];
        if sp.len() != pp.len() {
            let st: Vec<f64> = sp.iter().map(|x| x.0).collect();
            let pt: Vec<f64> = pp.iter().map(|x| x.0).collect();
            return Err(format!(
                "{what}: {k}: {} points, Prometheus {} (Skein at {st:?}, Prometheus at {pt:?})",
                sp.len(),
                pp.len()
            ));
        }
        for (a, b) in sp.iter().zip(pp) {
            if a.0 != b.0 || a.1.len() != b.1.len() || a.1.iter().zip(&b.1).any(|(x, y)| !close(*x, *y)) {
                return Err(format!("{what}: {k}: Skein {a:?}, Prometheus {b:?}"));
            }
            points += 1;
        }
    }
    Ok(points)
}

/// Whole minutes, two and a half hours ago: recent enough for
/// Prometheus's head block.
fn recent_start() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (now - 150 * MIN) / MIN * MIN
}

/// Remote-writes each body to Prometheus and to Skein.
fn write_both(client: &reqwest::blocking::Client, prom: &str, skein: &str, bodies: &[Vec<u8>]) {
    for body in bodies {
        let (s, text) = post_write(client, &format!("{prom}/api/v1/write"), body);
        assert!(s / 100 == 2, "Prometheus refused a write: {s} {text}");
        let (s, text) = post_write(client, &format!("{skein}/prometheus/api/v1/write"), body);
        assert_eq!(s, 204, "Skein refused a write: {text}");
    }
}

fn secs(t: i64) -> String {
    format!("{:.3}", t as f64 / 1000.0)
}

/// Prometheus and Skein holding the same remote-written data. Skein has
/// a small hot tier, so it answers from several Parquet parts (read as
/// series samples) and the hot tier at once.
struct Oracle {
    prom: Prometheus,
    skein: Server,
    client: reqwest::blocking::Client,
    /// Where the data starts.
    t0: i64,
    _dir: tempfile::TempDir,
}

impl Oracle {
    /// Starts both and writes them `bodies(t0)`.
    fn start(hot_max_bytes: &str, bodies: impl FnOnce(i64) -> Vec<Vec<u8>>) -> Oracle {
        let dir = tempfile::tempdir().unwrap();
        let prom = start_prometheus(
            &dir.path().join("prom"),
            "global:\n  scrape_interval: 15s\n  evaluation_interval: 1m\n",
        );
        let skein = Server::start(&dir.path().join("skein"), &["--hot-max-bytes", hot_max_bytes]);
        let client = reqwest::blocking::Client::new();
        let t0 = recent_start();
        write_both(&client, &prom.url, &skein.api, &bodies(t0));
        let parts = skein.get_json("/api/v1/stats")["parts"].as_u64().unwrap_or(0);
        assert!(
            parts >= 2,
            "the samples should sit in parts too, not only the hot tier: {parts} parts"
        );
        Oracle {
            prom,
            skein,
            client,
            t0,
            _dir: dir,
        }
    }

    /// Fails unless Skein's `path` (`series`, `labels`, `label/…/values`)
    /// lists what Prometheus's does, over all the data.
    fn same_listing(&self, path: &str, extra: Vec<(&str, String)>) {
        let mut params = vec![("start", secs(self.t0 - MIN)), ("end", secs(self.t0 + 130 * MIN))];
        params.extend(extra);
        let sorted = |url: String| {
            let (_, v) = get(&self.client, &url, &params);
            let mut a: Vec<String> = v["data"]
                .as_array()
                .unwrap_or_else(|| panic!("{url}: no data: {v}"))
                .iter()
                .map(|x| x.to_string())
                .collect();
            a.sort();
            a
        };
        assert_eq!(
            sorted(format!("{}/prometheus/api/v1/{path}", self.skein.api)),
            sorted(format!("{}/api/v1/{path}", self.prom.url)),
            "{path} {params:?}"
        );
    }

    /// Asks both each query, instant at each of `instants` and (but for
    /// `matrix` queries) from 5 to 115 minutes in at 60 s steps, and fails
    /// on any difference; the points that agreed.
    fn agree(&self, queries: &[&str], matrix: &[&str], instants: &[i64]) -> usize {
        let (skein, prom, client) = (&self.skein.api, &self.prom.url, &self.client);
        let (start, end, step) = (self.t0 + 5 * MIN, self.t0 + 115 * MIN, 60);
        let mut failures = Vec::new();
        let mut points = 0;
        let mut check = |what: String, s: &Value, p: &Value| match compare(&what, s, p) {
            Ok(n) => points += n,
            Err(e) => failures.push(e),
        };
        for q in queries.iter().chain(matrix) {
            for &t in instants {
                let params = [("query", q.to_string()), ("time", secs(t))];
                let (_, s) = get(client, &format!("{skein}/prometheus/api/v1/query"), &params);
                let (_, p) = get(client, &format!("{prom}/api/v1/query"), &for_prometheus(&params));
                check(format!("{q} @ {}", secs(t)), &s, &p);
            }
            if !matrix.contains(q) {
                let params = [
                    ("query", q.to_string()),
                    ("start", secs(start)),
                    ("end", secs(end)),
                    ("step", step.to_string()),
                ];
                let (_, s) = get(client, &format!("{skein}/prometheus/api/v1/query_range"), &params);
                let (_, p) = get(client, &format!("{prom}/api/v1/query_range"), &for_prometheus(&params));
                check(format!("{q} over [{start}, {end}]"), &s, &p);
            }
        }
        assert!(
            failures.is_empty(),
            "{} of the comparisons differ from Prometheus ({points} points agreed):\n{}",
            failures.len(),
            failures.join("\n")
        );
        points
    }
}

#[test]
fn promql_answers_as_prometheus_does() {
    let o = Oracle::start("1MiB", |t0| requests(&generate(t0), t0));
    let (prom, skein, client, t0) = (&o.prom, &o.skein, o.client.clone(), o.t0);
    let instants = [
        t0 + 30 * MIN + 7_000,
        t0 + 60 * MIN + 20_000,
        t0 + 74 * MIN,
        t0 + 118 * MIN,
    ];
    assert!(
        QUERIES.len() + MATRIX_QUERIES.len() >= 60,
        "the suite has at least 60 queries"
    );
    let points = o.agree(QUERIES, MATRIX_QUERIES, &instants);
    assert!(points > 10_000, "the queries compared real data ({points} points)");

    // The metadata endpoints list what Prometheus lists.
    for (path, extra) in [
        ("series", vec![("match[]", "temperature_celsius".to_string())]),
        ("series", vec![("match[]", "{job=\"batch\"}".to_string())]),
        ("labels", vec![]),
        ("label/job/values", vec![]),
        ("label/__name__/values", vec![]),
        (
            "label/le/values",
            vec![("match[]", "request_duration_seconds_bucket".to_string())],
        ),
    ] {
        o.same_listing(path, extra);
    }

    // Bad input: Prometheus's error format and status.
    for (path, params) in [
        ("query", vec![("query", "sum(".to_string())]),
        ("query", vec![("query", "no_such_function(up)".to_string())]),
        ("query", vec![("query", "rate(up)".to_string())]),
        (
            "query_range",
            vec![
                ("query", "up".to_string()),
                ("start", "0".to_string()),
                ("end", "86400".to_string()),
                ("step", "1".to_string()),
            ],
        ),
        (
            "query_range",
            vec![
                ("query", "up".to_string()),
                ("start", "100".to_string()),
                ("end", "50".to_string()),
                ("step", "10".to_string()),
            ],
        ),
        (
            "query",
            vec![("query", "up".to_string()), ("time", "yesterday".to_string())],
        ),
    ] {
        let (ss, s) = get(&client, &format!("{}/prometheus/api/v1/{path}", skein.api), &params);
        let (ps, p) = get(&client, &format!("{}/api/v1/{path}", prom.url), &params);
        assert_eq!(
            (ss, &s["status"], &s["errorType"]),
            (ps, &p["status"], &p["errorType"]),
            "{params:?}: Skein {s}, Prometheus {p}"
        );
        assert_eq!(ss, 400);
        assert!(s["error"].as_str().is_some_and(|e| !e.is_empty()), "{s}");
    }
    // A form POST answers as a GET does.
    let r: Value = client
        .post(format!("{}/prometheus/api/v1/query", skein.api))
        .form(&[("query", "count(temperature_celsius)"), ("time", &secs(instants[0]))])
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["data"]["result"][0]["value"][1], "8", "{r}");
    let (_, b) = get(
        &client,
        &format!("{}/prometheus/api/v1/status/buildinfo", skein.api),
        &[],
    );
    assert_eq!(b["status"], "success");
    assert!(b["data"]["version"].as_str().is_some_and(|v| v.starts_with('2')));
    let (_, m) = get(&client, &format!("{}/prometheus/api/v1/metadata", skein.api), &[]);
    assert_eq!(m["data"]["temperature_celsius"][0]["type"], "gauge", "{m}");

    // The CLI: an instant query, a range query, and a syntax error (exit 2).
    let cli = |args: &[&str]| {
        let out = Command::new(common::bin())
            .args(["--server", &skein.api, "query", "metrics"])
            .args(args)
            .output()
            .expect("the CLI runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let until = (instants[0] / 1000).to_string();
    let (code, out, err) = cli(&[
        "--promql",
        "sum by (job) (rate(http_requests_total[5m]))",
        "--until",
        &until,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["resultType"], "vector");
    assert_eq!(v["result"].as_array().map(Vec::len), Some(2), "{v}");
    let since = ((instants[0] - 10 * MIN) / 1000).to_string();
    let (code, out, err) = cli(&[
        "--promql",
        "count(temperature_celsius)",
        "--step",
        "5m",
        "--since",
        &since,
        "--until",
        &until,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["result"][0]["values"].as_array().map(Vec::len), Some(3), "{v}");
    let (code, _, err) = cli(&["--promql", "sum("]);
    assert_eq!(code, Some(2));
    assert!(err.contains("bad_data"), "{err}");
}

/// The native histogram queries of the conformance suite.
/// Not here, where Prometheus 2.42 reads a histogram as the float 0 (or
/// ignores the operation) and later versions, as Skein, do not: `avg`,
/// `last_over_time`, `irate`, `changes`, `resets`, `topk`, `-` and `*`/`/`
/// by a scalar (the evaluator's tests cover them).
const HISTOGRAM_QUERIES: &[&str] = &[
    "rpc_duration_seconds",
    "rpc_duration_seconds{method=\"GET\"}",
    "histogram_count(rpc_duration_seconds)",
    "histogram_sum(rpc_duration_seconds)",
    "rate(rpc_duration_seconds[5m])",
    "increase(rpc_duration_seconds{job=\"api\"}[10m])",
    "histogram_count(rate(rpc_duration_seconds[5m]))",
    "histogram_sum(rate(rpc_duration_seconds[1m]))",
    "histogram_quantile(0.9, rate(rpc_duration_seconds[5m]))",
    "histogram_quantile(0.5, rpc_duration_seconds)",
    "histogram_quantile(0.99, sum by (job) (rate(rpc_duration_seconds[5m])))",
    "histogram_fraction(0, 0.25, rate(rpc_duration_seconds[5m]))",
    "histogram_fraction(-1, 1, rpc_duration_seconds)",
    "sum(rpc_duration_seconds)",
    "sum by (method) (rate(rpc_duration_seconds[5m]))",
    "count(rpc_duration_seconds)",
    "histogram_count(sum(increase(rpc_duration_seconds[10m])))",
    "delta(rpc_duration_seconds[5m])",
    "count_over_time(rpc_duration_seconds[1m])",
    "rpc_duration_seconds + rpc_duration_seconds",
    "histogram_quantile(0.01, rpc_duration_seconds{method=\"POST\"})",
    "timestamp(rpc_duration_seconds)",
    "absent(rpc_duration_seconds)",
    "group by (job) (rpc_duration_seconds)",
    "rate(rpc_duration_seconds[5m]) unless on (method) rpc_duration_seconds{method=\"GET\"}",
    "count_over_time(rate(rpc_duration_seconds[5m])[10m:1m])",
    "max_over_time(histogram_count(rate(rpc_duration_seconds[5m]))[10m:1m])",
];

const HISTOGRAM_MATRIX_QUERIES: &[&str] = &[
    "rpc_duration_seconds{method=\"POST\"}[2m]",
    "rate(rpc_duration_seconds{job=\"web\"}[5m])[10m:2m]",
];

/// Native histogram series, one request per 10 minutes: latencies
/// observed into buckets of each series' schema (a finer schema, a
/// coarser one, a zero bucket, negative observations), one series reset
/// an hour in.
fn histogram_requests(t0: i64) -> Vec<Vec<u8>> {
    struct State {
        labels: Vec<Label>,
        schema: i32,
        zero_threshold: f64,
        zero: u64,
        positive: BTreeMap<i32, u64>,
        negative: BTreeMap<i32, u64>,
        sum: f64,
        histograms: Vec<Histogram>,
    }
    let mut rng = Rng(0x0b5e_77ed_1a7e_0c1e);
    let mut series: Vec<State> = [
        ("api", "GET", 0, 0.0),
        ("api", "POST", 3, 0.001),
        ("web", "GET", 1, 0.001),
        ("web", "POST", -1, 0.0),
    ]
    .iter()
    .map(|&(job, method, schema, zero_threshold)| State {
        labels: [
            ("__name__", "rpc_duration_seconds"),
            ("job", job),
            ("instance", "10.0.0.1:9100"),
            ("method", method),
        ]
        .iter()
        .map(|(n, v)| Label {
            name: n.to_string(),
            value: v.to_string(),
        })
        .collect(),
        schema,
        zero_threshold,
        zero: 0,
        positive: BTreeMap::new(),
        negative: BTreeMap::new(),
        sum: 0.0,
        histograms: Vec::new(),
    })
    .collect();
    for i in 0..SAMPLES {
        let t = t0 + i * STEP_MS + rng.below(400) as i64;
        for (k, s) in series.iter_mut().enumerate() {
            if k == 2 && i == SAMPLES / 2 {
                // A restart: every count starts again.
                (s.zero, s.sum) = (0, 0.0);
                s.positive.clear();
                s.negative.clear();
            }
            for _ in 0..rng.below(6) {
                // A latency from ~1 ms to ~4 s; now and then ~0, or
                // (a clock step) negative.
                let v = match rng.below(20) {
                    0 => 0.0005 * rng.unit(),
                    1 if k == 3 => -0.5 * rng.unit() - 0.01,
                    _ => 2f64.powf(-10.0 + 12.0 * rng.unit()),
                };
                s.sum += v;
                if v.abs() <= s.zero_threshold {
                    s.zero += 1;
                    continue;
                }
                // The bucket of |v|: the smallest i with |v| <= 2^(i / 2^schema).
                let idx = (v.abs().log2() * 2f64.powi(s.schema)).ceil() as i32;
                *if v > 0.0 { &mut s.positive } else { &mut s.negative }
                    .entry(idx)
                    .or_default() += 1;
            }
            let pos: Vec<(i32, u64)> = s.positive.iter().map(|(i, c)| (*i, *c)).collect();
            let neg: Vec<(i32, u64)> = s.negative.iter().map(|(i, c)| (*i, *c)).collect();
            s.histograms.push(Histogram::from_buckets(
                t,
                s.schema,
                (s.zero_threshold, s.zero),
                &pos,
                &neg,
                s.sum,
            ));
        }
    }
    let chunk = 10 * MIN;
    let mut out = Vec::new();
    let mut from = t0;
    while from < t0 + SAMPLES * STEP_MS {
        let timeseries = series
            .iter()
            .map(|s| TimeSeries {
                labels: s.labels.clone(),
                samples: Vec::new(),
                histograms: s
                    .histograms
                    .iter()
                    .filter(|h| h.timestamp >= from && h.timestamp < from + chunk)
                    .cloned()
                    .collect(),
            })
            .collect();
        out.push(encode(&WriteRequest { timeseries }));
        from += chunk;
    }
    out
}

#[test]
fn native_histograms_answer_as_prometheus_does() {
    let o = Oracle::start("256KiB", histogram_requests);
    let t0 = o.t0;
    let instants = [
        t0 + 30 * MIN + 7_000,
        t0 + 61 * MIN,
        t0 + 90 * MIN + 40_000,
        t0 + 118 * MIN,
    ];
    let points = o.agree(HISTOGRAM_QUERIES, HISTOGRAM_MATRIX_QUERIES, &instants);
    for (path, extra) in [
        ("series", vec![("match[]", "rpc_duration_seconds".to_string())]),
        ("series", vec![("match[]", "{method=\"POST\"}".to_string())]),
        ("labels", vec![]),
        ("label/__name__/values", vec![]),
        (
            "label/method/values",
            vec![("match[]", "rpc_duration_seconds".to_string())],
        ),
    ] {
        o.same_listing(path, extra);
    }
    assert!(points > 2_000, "the queries compared real data ({points} points)");

    // People see a histogram as its count, sum and buckets.
    let out = Command::new(common::bin())
        .args(["--server", &o.skein.api, "query", "metrics", "--format", "table"])
        .args(["--promql", "rpc_duration_seconds{method=\"GET\"}"])
        .args(["--until", &(instants[1] / 1000).to_string()])
        .output()
        .expect("the CLI runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(table.matches("histogram count=").count(), 2, "{table}");
}

#[test]
fn remote_write_refuses_bad_bodies_and_stores_nothing_from_them() {
    let dir = tempfile::tempdir().unwrap();
    let skein = Server::start(&dir.path().join("skein"), &[]);
    let client = reqwest::blocking::Client::new();
    let url = format!("{}/prometheus/api/v1/write", skein.api);
    let (s, text) = post_write(&client, &url, b"not snappy at all");
    assert_eq!(s, 400);
    assert!(text.contains("snappy"), "{text}");
    let garbage = snap_block(b"\x0a\xff\xff\xff\xff");
    let (s, text) = post_write(&client, &url, &garbage);
    assert_eq!(s, 400);
    assert!(text.contains("protobuf"), "{text}");
    let ts = |pairs: &[(&str, &str)]| TimeSeries {
        labels: pairs
            .iter()
            .map(|(n, v)| Label {
                name: n.to_string(),
                value: v.to_string(),
            })
            .collect(),
        samples: vec![Sample {
            value: 1.0,
            timestamp: 1_700_000_000_000,
        }],
        histograms: Vec::new(),
    };
    let req = WriteRequest {
        timeseries: vec![ts(&[("__name__", "kept_if_valid")]), ts(&[("job", "nameless")])],
    };
    let (s, text) = post_write(&client, &url, &encode(&req));
    assert_eq!(s, 400);
    assert!(text.contains("no __name__") && text.contains("nameless"), "{text}");
    let (_, r) = get(
        &client,
        &format!("{}/prometheus/api/v1/query", skein.api),
        &[("query", "kept_if_valid".into()), ("time", "1700000000".into())],
    );
    assert_eq!(
        r["data"]["result"],
        serde_json::json!([]),
        "nothing of the refused request is stored: {r}"
    );
}

fn snap_block(raw: &[u8]) -> Vec<u8> {
    // A snappy block: the length as a varint, then one literal.
    let mut out = vec![raw.len() as u8, ((raw.len() - 1) << 2) as u8];
    out.extend_from_slice(raw);
    out
}

/// A tiny exporter: `/metrics` in the Prometheus text format, forever.
fn exporter() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let mut scrapes = 0u64;
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            scrapes += 1;
            let body = format!(
                "# HELP exporter_widgets_total Widgets made.\n# TYPE exporter_widgets_total counter\nexporter_widgets_total{{color=\"blue\"}} {}\n# TYPE exporter_temperature gauge\nexporter_temperature 42.5\n",
                scrapes * 10
            );
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, h)
}

#[test]
fn a_real_prometheus_remote_writes_its_scrapes_to_skein() {
    let dir = tempfile::tempdir().unwrap();
    let skein = Server::start(&dir.path().join("skein"), &[]);
    let (port, _exporter) = exporter();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1m\n\
         scrape_configs:\n  - job_name: exporter\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n\
         remote_write:\n  - url: {}/prometheus/api/v1/write\n    queue_config:\n      batch_send_deadline: 1s\n      min_backoff: 100ms\n",
        skein.api
    );
    let _prom = start_prometheus(&dir.path().join("prom"), &config);
    let client = reqwest::blocking::Client::new();
    let instance = format!("127.0.0.1:{port}");
    // Remote write ships within seconds; a minute is the most we wait.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (widgets, temperature, up) = loop {
        let ask = |q: &str| {
            get(
                &client,
                &format!("{}/prometheus/api/v1/query", skein.api),
                &[("query", q.to_string())],
            )
            .1
        };
        let w = ask("exporter_widgets_total");
        let t = ask("exporter_temperature");
        let u = ask("up");
        let found = |v: &Value| v["data"]["result"].as_array().is_some_and(|a| !a.is_empty());
        if found(&w) && found(&t) && found(&u) {
            break (w, t, u);
        }
        assert!(Instant::now() < deadline, "no scrape reached Skein: {w} {t} {u}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let w = &widgets["data"]["result"][0];
    assert_eq!(w["metric"]["job"], "exporter");
    assert_eq!(w["metric"]["instance"], instance.as_str());
    assert_eq!(w["metric"]["color"], "blue");
    assert_eq!(w["metric"]["__name__"], "exporter_widgets_total");
    let n: f64 = w["value"][1].as_str().unwrap().parse().unwrap();
    assert!(n >= 10.0 && n % 10.0 == 0.0, "a value the exporter served: {n}");
    assert_eq!(temperature["data"]["result"][0]["value"][1], "42.5");
    assert_eq!(up["data"]["result"][0]["value"][1], "1");
    assert_eq!(up["data"]["result"][0]["metric"]["job"], "exporter");
}

/// OTLP metrics read back under their Prometheus names: unit suffixes,
/// `_total`, histogram buckets, `job`/`instance`, scope labels and
/// `target_info`.
#[test]
fn otlp_metrics_appear_under_prometheus_names() {
    let dir = tempfile::tempdir().unwrap();
    let skein = Server::start(&dir.path().join("skein"), &[]);
    let client = reqwest::blocking::Client::new();
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 60;
    let t = format!("{}", now_s as u128 * 1_000_000_000);
    let body = serde_json::json!({"resourceMetrics": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "checkout"}},
            {"key": "service.instance.id", "value": {"stringValue": "i-1"}},
            {"key": "host.name", "value": {"stringValue": "h1"}}
        ]},
        "scopeMetrics": [{
            "scope": {"name": "lib", "version": "1.0"},
            "metrics": [
                {"name": "http.server.duration", "unit": "ms", "histogram": {"aggregationTemporality": 2, "dataPoints": [{
                    "attributes": [{"key": "http.route", "value": {"stringValue": "/cart"}}],
                    "timeUnixNano": t, "count": "6", "sum": 42.5,
                    "bucketCounts": ["1", "2", "3"], "explicitBounds": [10, 100]
                }]}},
                {"name": "rpc.latency", "unit": "s", "exponentialHistogram": {"aggregationTemporality": 2, "dataPoints": [{
                    "timeUnixNano": t, "count": "5", "sum": 3.5, "scale": 1,
                    "zeroCount": "1", "zeroThreshold": 0.001,
                    "positive": {"offset": 0, "bucketCounts": ["1", "3"]}
                }]}},
                {"name": "requests", "unit": "{request}", "sum": {"aggregationTemporality": 2, "isMonotonic": true,
                    "dataPoints": [{"timeUnixNano": t, "asInt": "7", "attributes": [
                        {"key": "code", "value": {"intValue": "503"}},
                        {"key": "ok", "value": {"boolValue": false}},
                        {"key": "ratio", "value": {"doubleValue": 0.5}}
                    ]}]}}
            ]
        }]
    }]});
    let r = client
        .post(format!("{}/v1/metrics", skein.otlp_http))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text());
    let ask = |q: &str| {
        let (status, v) = get(
            &client,
            &format!("{}/prometheus/api/v1/query", skein.api),
            &[("query", q.to_string()), ("time", now_s.to_string())],
        );
        assert_eq!(status, 200, "{q}: {v}");
        v["data"]["result"].clone()
    };
    let b = ask("http_server_duration_milliseconds_bucket{le=\"100\"}");
    assert_eq!(b[0]["value"][1], "3", "{b}");
    let m = &b[0]["metric"];
    assert_eq!(
        (
            &m["job"],
            &m["instance"],
            &m["http_route"],
            &m["otel_scope_name"],
            &m["otel_scope_version"]
        ),
        (
            &"checkout".into(),
            &"i-1".into(),
            &"/cart".into(),
            &"lib".into(),
            &"1.0".into()
        ),
        "{m}"
    );
    assert_eq!(ask("http_server_duration_milliseconds_count")[0]["value"][1], "6");
    assert_eq!(ask("http_server_duration_milliseconds_sum")[0]["value"][1], "42.5");
    assert_eq!(
        ask("histogram_quantile(0.5, http_server_duration_milliseconds_bucket)")[0]["value"][1],
        "100"
    );
    // An exponential histogram is a native histogram: OTLP bucket i is
    // Prometheus's i + 1, (2^((i-1)/2), 2^(i/2)] at scale 1.
    let h = ask("rpc_latency_seconds");
    assert_eq!(h[0]["metric"]["job"], "checkout", "{h}");
    assert_eq!(
        h[0]["histogram"][1],
        serde_json::json!({"count": "5", "sum": "3.5", "buckets": [
            [3, "-0.001", "0.001", "1"],
            [0, "1", "1.4142135623730951", "1"],
            [0, "1.4142135623730951", "2", "3"]
        ]}),
        "{h}"
    );
    assert_eq!(ask("histogram_count(rpc_latency_seconds)")[0]["value"][1], "5");
    // Only positive buckets: the zero bucket counts as [0, 0.001]; the
    // bucket 1.5 cuts is interpolated linearly.
    let f = parse_value(&ask("histogram_fraction(0, 1.5, rpc_latency_seconds)")[0]["value"][1]);
    let r2 = 2f64.sqrt();
    assert!(close(f, (1.0 + 1.0 + 3.0 * (1.5 - r2) / (2.0 - r2)) / 5.0), "{f}");
    assert_eq!(ask("requests_total{job=\"checkout\"}")[0]["value"][1], "7");
    // Label matchers narrow the scan by attribute postings: a typed
    // attribute is found by its label spelling, as the labels show it.
    for q in [
        "requests_total{code=\"503\"}",
        "requests_total{ok=\"false\"}",
        "requests_total{ratio=\"0.5\"}",
        "requests_total{code=\"503\", ok=\"false\", ratio=\"0.5\"}",
    ] {
        assert_eq!(ask(q)[0]["value"][1], "7", "{q}");
    }
    for q in ["requests_total{code=\"404\"}", "requests_total{ok=\"true\"}"] {
        assert_eq!(ask(q), Value::Array(vec![]), "{q}");
    }
    let ti = ask("target_info");
    assert_eq!(
        (&ti[0]["metric"]["host_name"], &ti[0]["metric"]["job"]),
        (&"h1".into(), &"checkout".into()),
        "{ti}"
    );
    // `info` joins the resource's attributes back on by job and instance.
    let joined = ask("info(requests_total{code=\"503\"})");
    assert_eq!(joined[0]["metric"]["host_name"], "h1", "{joined}");
    assert_eq!(joined[0]["value"][1], "7", "{joined}");
    assert_eq!(ask("info(requests_total, {host_name=\"h2\"})"), Value::Array(vec![]));
    let (_, meta) = get(&client, &format!("{}/prometheus/api/v1/metadata", skein.api), &[]);
    assert_eq!(meta["data"]["requests_total"][0]["type"], "counter", "{meta}");
    assert_eq!(
        meta["data"]["http_server_duration_milliseconds"][0]["type"], "histogram",
        "{meta}"
    );
    assert_eq!(meta["data"]["rpc_latency_seconds"][0]["type"], "histogram", "{meta}");
}
