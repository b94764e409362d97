//! Facts about the machine and the run, recorded with every report.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub load_before: String,
    pub load_after: String,
    pub git_commit: String,
    pub command: String,
    pub date_utc: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub fn load_average() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn command_output(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

impl Machine {
    pub fn probe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let mem_kib: f64 = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let mut commit = command_output("git", &["rev-parse", "--short=12", "HEAD"]);
        if !command_output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            commit.push_str("+dirty");
        }
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            memory_gib: (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: command_output("uname", &["-sr"]),
            load_before: load_average(),
            load_after: String::new(),
            git_commit: commit,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            date_utc: command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        }
    }

    pub fn finish(mut self) -> Machine {
        self.load_after = load_average();
        self
    }
}

/// Latency of `fdatasync` after a 64 KiB append in `dir`, `rounds` times
/// with short pauses: what one group commit costs this disk, and so the
/// floor under ingest latency with durability `fsync`.
pub fn fdatasync_latency(dir: &std::path::Path, rounds: usize) -> Result<crate::stats::Samples, String> {
    use std::io::Write;
    let path = dir.join(format!("skein-bench-fsync-probe-{}", std::process::id()));
    let mut file = std::fs::File::create(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let block = vec![0x5au8; 64 << 10];
    let mut samples = crate::stats::Samples::default();
    let result = (|| {
        for _ in 0..rounds {
            file.write_all(&block).map_err(|e| e.to_string())?;
            let t = std::time::Instant::now();
            file.sync_data().map_err(|e| e.to_string())?;
            samples.push(t.elapsed());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok::<(), String>(())
    })();
    let _ = std::fs::remove_file(&path);
    result.map(|()| samples)
}
