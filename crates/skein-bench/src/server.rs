//! A `skein serve` process under test: free loopback ports, a fresh data
//! directory, readiness, stats and peak memory from /proc.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct SkeinProcess {
    child: Child,
    pub api: String,
    pub otlp_http: String,
    pub grpc: String,
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl SkeinProcess {
    pub fn start(bin: &Path, extra: &[String]) -> Result<SkeinProcess, String> {
        let tmp = tempfile::Builder::new()
            .prefix("skein-bench-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let data_dir = tmp.path().join("data");
        let mut p = SkeinProcess::start_at(bin, &data_dir, extra)?;
        p._tmp = Some(tmp);
        Ok(p)
    }

    /// Starts on `data_dir` (kept after the process: restarts reuse it).
    pub fn start_at(bin: &Path, data_dir: &Path, extra: &[String]) -> Result<SkeinProcess, String> {
        if !bin.exists() {
            return Err(format!(
                "skein binary {} not found: build it first (cargo build --release -p skein) or pass --skein-bin",
                bin.display()
            ));
        }
        let data_dir = data_dir.to_path_buf();
        let (g, h, a) = (free_port()?, free_port()?, free_port()?);
        let log = std::fs::File::create(data_dir.with_extension("log")).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("serve")
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--otlp-grpc-addr", &format!("127.0.0.1:{g}")])
            .args(["--otlp-http-addr", &format!("127.0.0.1:{h}")])
            .args(["--api-addr", &format!("127.0.0.1:{a}")])
            .args(extra)
            .env("SKEIN_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("start {}: {e}", bin.display()))?;
        let mut p = SkeinProcess {
            child,
            api: format!("http://127.0.0.1:{a}"),
            otlp_http: format!("http://127.0.0.1:{h}"),
            grpc: format!("http://127.0.0.1:{g}"),
            data_dir,
            _tmp: None,
        };
        p.wait_ready()?;
        Ok(p)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let http = reqwest::blocking::Client::new();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("skein exited during start: {status}"));
            }
            if http
                .get(format!("{}/readyz", self.api))
                .send()
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err("skein did not become ready in 120 s".into())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where the load generator sends to.
    pub fn target(&self) -> crate::load::Target {
        crate::load::Target {
            otlp_http: self.otlp_http.clone(),
            grpc: self.grpc.clone(),
            api: self.api.clone(),
        }
    }

    pub fn stats(&self) -> Result<Value, String> {
        get_json(&format!("{}/api/v1/stats", self.api))
    }

    /// Waits until no flush or compaction has happened for a few seconds.
    pub fn wait_settled(&self) -> Result<Value, String> {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_message("waiting for compaction to settle");
        let deadline = Instant::now() + Duration::from_secs(900);
        let mut last = (u64::MAX, u64::MAX, u64::MAX);
        let mut stable_since = Instant::now();
        loop {
            let s = self.stats()?;
            let now = (
                s["parts"].as_u64().unwrap_or(0),
                s["compactions"].as_u64().unwrap_or(0),
                s["flushes"].as_u64().unwrap_or(0),
            );
            let busy = s["compacting"].as_bool().unwrap_or(false)
                || s["frozen_tiers"].as_u64().unwrap_or(0) > 0
                || s["text_index_backlog_parts"].as_u64().unwrap_or(0) > 0;
            if now != last || busy {
                last = now;
                stable_since = Instant::now();
            } else if stable_since.elapsed() >= Duration::from_secs(8) || Instant::now() > deadline {
                pb.finish_and_clear();
                return Ok(s);
            }
            pb.tick();
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// VmHWM: the peak resident set of the server process.
    pub fn peak_rss_bytes(&self) -> u64 {
        proc_status_kib(self.pid(), "VmHWM:") * 1024
    }

    pub fn rss_bytes(&self) -> u64 {
        proc_status_kib(self.pid(), "VmRSS:") * 1024
    }

    /// CPU seconds (user + system) the server process has used so far, all
    /// threads: what an A/B of two builds compares when the machine's
    /// other load moves throughput.
    pub fn cpu_seconds(&self) -> f64 {
        proc_cpu_seconds(self.pid())
    }

    /// SIGTERM and wait (the server flushes before exiting).
    pub fn stop(mut self) -> Result<(), String> {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("skein exited with {status}"));
        }
        Ok(())
    }
}

impl Drop for SkeinProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn proc_status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of process `pid` from /proc/PID/stat (0 when unreadable).
pub fn proc_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name, in parentheses, may hold spaces: fields count from
    // after its closing parenthesis (state is field 3; utime, stime 14, 15).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / per_second
}

fn rusage() -> Option<libc::rusage> {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    (unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } == 0).then_some(u)
}

/// CPU seconds (user + system) this process has used, all threads.
pub fn process_cpu_seconds() -> f64 {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    rusage().map_or(0.0, |u| secs(u.ru_utime) + secs(u.ru_stime))
}

/// Page faults served without I/O (first touches of memory), so far.
pub fn minor_faults() -> i64 {
    rusage().map_or(0, |u| u.ru_minflt)
}

/// The JSON of a successful GET of `url`, within reqwest's default timeout.
pub fn get_json(url: &str) -> Result<Value, String> {
    let client = reqwest::blocking::Client::builder()
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    get_json_within(&client, url)?.ok_or_else(|| format!("GET {url}: no answer within the client's timeout"))
}

/// The JSON of a successful GET of `url`, or `None` when it does not answer
/// within `client`'s timeout.
pub fn get_json_within(client: &reqwest::blocking::Client, url: &str) -> Result<Option<Value>, String> {
    let r = match client.get(url).send() {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return Ok(None),
        Err(e) => return Err(format!("GET {url}: {e}")),
    };
    let status = r.status();
    let v: Value = match r.json() {
        Ok(v) => v,
        Err(e) if e.is_timeout() => return Ok(None),
        Err(e) => return Err(format!("GET {url}: {e}")),
    };
    if !status.is_success() {
        return Err(format!("GET {url}: {status} {v}"));
    }
    Ok(Some(v))
}

/// Bytes under a directory.
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                total += dir_bytes(&p);
            } else if let Ok(m) = e.metadata() {
                total += m.len();
            }
        }
    }
    total
}
