//! Starts the real `skein` binary on free loopback ports with a fresh data
//! directory, for integration tests.

#![allow(dead_code)]

pub mod moto;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The wall clock in Unix nanoseconds.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_skein")
}

pub struct Server {
    child: Option<Child>,
    pub api: String,
    pub otlp_http: String,
    pub grpc: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    args: Vec<String>,
    /// Environment variables of the next start (see `set_env`).
    env: Vec<(String, String)>,
}

impl Server {
    /// Starts a server on `data_dir` with extra flags and waits until ready.
    ///
    /// Ports are probed free, then released for the server to bind: another
    /// test's connection can take one in between (the kernel hands out the
    /// same ephemeral range). A start that fails on a taken port is retried
    /// on fresh ports.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            let (g, h, a) = (free_port(), free_port(), free_port());
            let args: Vec<String> = [
                "serve",
                "--data-dir",
                data_dir.to_str().unwrap(),
                "--otlp-grpc-addr",
                &format!("127.0.0.1:{g}"),
                "--otlp-http-addr",
                &format!("127.0.0.1:{h}"),
                "--api-addr",
                &format!("127.0.0.1:{a}"),
            ]
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().map(|s| s.to_string()))
            .collect();
            // With --tls-cert every port speaks TLS (tests/tls.rs).
            let scheme = if extra.contains(&"--tls-cert") { "https" } else { "http" };
            let mut s = Server {
                child: None,
                api: format!("{scheme}://127.0.0.1:{a}"),
                otlp_http: format!("{scheme}://127.0.0.1:{h}"),
                grpc: format!("{scheme}://127.0.0.1:{g}"),
                data_dir: data_dir.to_path_buf(),
                log: data_dir.with_extension("log"),
                args,
                env: Vec::new(),
            };
            match s.try_spawn() {
                Ok(()) => return s,
                Err(log) if attempt < ATTEMPTS && log.contains("Address already in use") => continue,
                Err(log) => panic!("{log}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn spawn(&mut self) {
        if let Err(log) = self.try_spawn() {
            panic!("{log}");
        }
    }

    /// Starts the binary and waits until it is ready; on failure, what it
    /// logged during this start.
    fn try_spawn(&mut self) -> Result<(), String> {
        let logged_before = self.log_text().len();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(bin())
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SKEIN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        self.wait_ready().map_err(|e| {
            let text = self.log_text();
            format!("{e}:\n{}", text.get(logged_before..).unwrap_or(&text))
        })
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        // Readiness only: a TLS server's certificate is checked by the
        // tests themselves.
        let client = reqwest::blocking::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("skein exited during start ({status})"));
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.api)).send()
                && r.status().is_success()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("skein did not become ready".into())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGTERM and wait for exit.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap()
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Sets (`Some`) or removes (`None`) an environment variable for the
    /// next `restart`.
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.env.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.env.push((key.to_string(), v.to_string()));
        }
    }

    /// Starts the binary again without waiting for it to be ready (for a
    /// start that is expected to die).
    pub fn spawn_unchecked(&mut self) {
        assert!(self.child.is_none(), "stop or kill first");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(bin())
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SKEIN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Waits for the running binary to exit by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        child.wait().unwrap()
    }

    /// Starts again on the same data dir and ports.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop or kill first");
        self.spawn();
    }

    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let r = reqwest::blocking::get(format!("{}{}", self.api, path)).unwrap();
        let status = r.status();
        let v: serde_json::Value = r.json().unwrap();
        assert!(status.is_success(), "GET {path}: {status} {v}");
        v
    }

    /// Peak resident memory of the server so far (VmHWM), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap()
            * 1024
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
