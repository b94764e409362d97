//! The durability proof the SIGKILL test cannot give: a killed process
//! loses nothing the kernel holds, so that test passes with `--durability
//! none` too. Here `strace` records the server's system calls while it
//! takes ingest, and the trace must show that
//! - every acknowledgement (`HTTP/1.1 200` written to a client) comes after
//!   an `fdatasync` of the WAL that finished after the WAL write it covers;
//! - concurrent writers share fsyncs (far fewer `fdatasync`s than acks).
//!
//! (With concurrent writers an ack cannot be matched to its frame in the
//! trace, since frames are compressed; ordering is proved on sequential
//! requests, sharing on concurrent ones.)
//!
//! `strace` is installed by test.sh; the test fails, never skips, without it.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use prost::Message;
use skein_model::corpus::Corpus;
use skein_model::otlp::spans_to_otlp;

/// One finished system call of the trace.
#[derive(Debug, Clone)]
struct Call {
    tid: u32,
    name: String,
    /// The first argument as strace decodes it with `-yy`: a path for
    /// files, `TCP:[…]` for sockets.
    target: String,
    args: String,
    start: f64,
    end: f64,
}

/// Parses `strace -f -ttt -T -yy` output, joining `<unfinished ...>` lines
/// with their `<... resumed>` halves.
fn parse(text: &str) -> Vec<Call> {
    let mut open: HashMap<u32, (String, String, f64)> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        // strace pads the thread id (`4515  1796…`): split on runs of spaces.
        let Some((tid, rest)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Some((ts, rest)) = rest.trim_start().split_once(' ') else {
            continue;
        };
        let (Ok(tid), Ok(ts)) = (tid.trim().parse::<u32>(), ts.parse::<f64>()) else {
            continue;
        };
        let duration = |s: &str| {
            s.rsplit_once('<')
                .and_then(|(_, d)| d.trim_end_matches('>').parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = resumed.split_once(" resumed>") else {
                continue;
            };
            if let Some((n, head, start)) = open.remove(&tid)
                && n == name
            {
                // The resumed line is stamped when the call returns, and
                // its duration is the whole call's: it ended at `start +
                // duration`, not a duration after the resumed stamp (which
                // once put a WAL write's end past the fdatasync after it).
                let args = format!("{head}{tail}");
                out.push(call(tid, &n, &args, start, start + duration(tail)));
            }
            continue;
        }
        let Some((name, args)) = rest.split_once('(') else {
            continue;
        };
        if let Some(head) = args.strip_suffix(" <unfinished ...>") {
            open.insert(tid, (name.to_string(), head.to_string(), ts));
        } else {
            out.push(call(tid, name, args, ts, ts + duration(args)));
        }
    }
    out.sort_by(|a, b| a.start.total_cmp(&b.start));
    out
}

fn call(tid: u32, name: &str, args: &str, start: f64, end: f64) -> Call {
    let target = args.split([',', ')']).next().unwrap_or("").to_string();
    Call {
        tid,
        name: name.to_string(),
        target,
        args: args.to_string(),
        start,
        end,
    }
}

fn is_wal(c: &Call) -> bool {
    c.target.contains("/wal/") && c.target.contains(".wal")
}

/// A `200` OTLP/HTTP answer (protobuf, unlike `/readyz`'s JSON) written
/// on a connection to the OTLP/HTTP port. strace names a socket's
/// addresses only when its socket-diagnostics query succeeds, so an
/// undecoded socket (`socket:[inode]`) counts too.
fn is_ack(c: &Call, port: u16) -> bool {
    matches!(c.name.as_str(), "write" | "writev" | "sendto" | "sendmsg")
        && (c.target.contains(&format!("127.0.0.1:{port}->")) || c.target.contains("socket:["))
        && c.args.contains("HTTP/1.1 200")
        && c.args.contains("x-protobuf")
}

/// `skein serve` under strace; the trace is complete once it has stopped.
struct Traced {
    strace: Child,
    trace: std::path::PathBuf,
    otlp_http: String,
    port: u16,
}

impl Traced {
    fn start(dir: &Path, durability: &str) -> Traced {
        let trace = dir.join("trace.txt");
        let (g, h, a) = (free_port(), free_port(), free_port());
        let strace = Command::new("strace")
            .args(["-f", "-qq", "-ttt", "-T", "-yy", "-s", "160", "-o"])
            .arg(&trace)
            .args([
                "-e",
                "trace=pwrite64,pwritev,write,writev,fdatasync,fsync,sendto,sendmsg",
            ])
            .arg(common::bin())
            .args(["serve", "--data-dir", dir.join("data").to_str().unwrap()])
            .args(["--otlp-grpc-addr", &format!("127.0.0.1:{g}")])
            .args(["--otlp-http-addr", &format!("127.0.0.1:{h}")])
            .args(["--api-addr", &format!("127.0.0.1:{a}")])
            .args(["--durability", durability])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("strace is missing: ./test.sh installs it (apt-get install strace)");
        let api = format!("http://127.0.0.1:{a}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !reqwest::blocking::get(format!("{api}/readyz")).is_ok_and(|r| r.status().is_success()) {
            assert!(Instant::now() < deadline, "skein under strace did not become ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        Traced {
            strace,
            trace,
            otlp_http: format!("http://127.0.0.1:{h}"),
            port: h,
        }
    }

    /// Stops the server (SIGTERM to strace's child) and returns the trace.
    fn finish(mut self) -> Vec<Call> {
        let pid = self.strace.id();
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for child in children.split_whitespace() {
            // SAFETY: signalling our own grandchild, the traced server.
            unsafe { libc::kill(child.parse().unwrap(), libc::SIGTERM) };
        }
        self.strace.wait().unwrap();
        parse(&std::fs::read_to_string(&self.trace).unwrap())
    }
}

fn batch(c: &Corpus, i: u64) -> Vec<u8> {
    spans_to_otlp(&c.spans(i * 2..i * 2 + 2)).encode_to_vec()
}

fn send(url: &str, body: Vec<u8>) {
    let r = reqwest::blocking::Client::new()
        .post(format!("{url}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "ingest: {}", r.status());
}

fn corpus() -> Corpus {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    Corpus::with_shape(100_000, 5, 4, 8, now)
}

/// For each ack: the WAL write before it that no fdatasync finished
/// between it and the ack covers, if any (an unsynced acknowledgement).
fn unsynced_acks(calls: &[Call], port: u16) -> Vec<String> {
    let mut bad = Vec::new();
    for ack in calls.iter().filter(|c| is_ack(c, port)) {
        let Some(last_write) = calls
            .iter()
            .filter(|c| c.name.starts_with("pwrite") && is_wal(c) && c.end <= ack.start)
            .max_by(|a, b| a.end.total_cmp(&b.end))
        else {
            bad.push(format!("ack at {} with no WAL write before it", ack.start));
            continue;
        };
        let synced = calls.iter().any(|c| {
            c.name == "fdatasync" && c.target == last_write.target && c.start >= last_write.end && c.end <= ack.start
        });
        if !synced {
            bad.push(format!(
                "ack at {:.6} (thread {}) after WAL write at {:.6} to {} with no fdatasync between",
                ack.start, ack.tid, last_write.end, last_write.target
            ));
        }
    }
    bad
}

#[test]
fn a_call_strace_split_in_two_ends_when_it_returned() {
    // A pwrite interrupted by another thread's line, then the fdatasync
    // right after it on the same thread.
    let trace = "\
7 100.000100 pwrite64(14</d/wal/1.wal>, \"x\", 1, 0 <unfinished ...>
8 100.000200 write(3<socket:[1]>, \"y\", 1) = 1 <0.000010>
7 100.001000 <... pwrite64 resumed>) = 1 <0.000900>
7 100.001100 fdatasync(14</d/wal/1.wal>) = 0 <0.000500>
";
    let calls = parse(trace);
    let write = calls.iter().find(|c| c.name == "pwrite64").unwrap();
    let sync = calls.iter().find(|c| c.name == "fdatasync").unwrap();
    assert!((write.start - 100.0001).abs() < 1e-9);
    assert!((write.end - 100.001).abs() < 1e-9, "{}", write.end);
    assert!(sync.start >= write.end);
    assert_eq!(write.target, "14</d/wal/1.wal>");
}

#[test]
fn every_acknowledgement_follows_the_fsync_that_covers_it() {
    let c = corpus();
    let dir = tempfile::tempdir().unwrap();
    let s = Traced::start(dir.path(), "fsync");
    let port = s.port;
    for i in 0..5 {
        send(&s.otlp_http, batch(&c, i));
    }
    let calls = s.finish();
    let acks = calls.iter().filter(|c| is_ack(c, port)).count();
    assert_eq!(acks, 5, "the trace shows {acks} acknowledgements of 5 requests");
    let bad = unsynced_acks(&calls, port);
    assert!(bad.is_empty(), "{bad:#?}");

    // The proof can fail: without fsync the same trace shows acks no
    // fdatasync covers.
    let dir = tempfile::tempdir().unwrap();
    let s = Traced::start(dir.path(), "none");
    let port = s.port;
    for i in 0..5 {
        send(&s.otlp_http, batch(&c, i));
    }
    let calls = s.finish();
    assert_eq!(
        unsynced_acks(&calls, port).len(),
        5,
        "with --durability none every ack should be unsynced"
    );
}

#[test]
fn concurrent_writers_share_fsyncs() {
    let c = std::sync::Arc::new(corpus());
    let dir = tempfile::tempdir().unwrap();
    let s = Traced::start(dir.path(), "fsync");
    let (url, port) = (s.otlp_http.clone(), s.port);
    let writers: Vec<_> = (0..16u64)
        .map(|w| {
            let (c, url) = (c.clone(), url.clone());
            std::thread::spawn(move || {
                for i in 0..15 {
                    send(&url, batch(&c, w * 1000 + i));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let calls = s.finish();
    let acks = calls.iter().filter(|c| is_ack(c, port)).count();
    let fsyncs = calls.iter().filter(|c| c.name == "fdatasync" && is_wal(c)).count();
    assert_eq!(acks, 240, "acknowledgements in the trace");
    eprintln!("{fsyncs} WAL fdatasyncs for {acks} acknowledgements");
    // One fsync per ack would be 240; sharing shows as far fewer (about
    // half with 8 writers here, fewer with 16).
    assert!(
        fsyncs * 4 < acks * 3,
        "{fsyncs} WAL fdatasyncs for {acks} acknowledgements: concurrent writers do not share them"
    );
}
