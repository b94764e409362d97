//! The web UI in a real browser: the real binary with fixture telemetry
//! (an hour of a shop whose payments start failing, logs linked to spans,
//! metrics, LLM sessions, text that is HTML), driven by headless Chromium
//! through playwright-core (tests/conformance/ui/browser.mjs). Every page
//! must load without a console error and show its data; the click path
//! overview → failing operation → trace → its log must work; telemetry
//! text must never run; errors must show the API's message.
//!
//! Also here, over plain HTTP: Prometheus scrapers still get the text
//! exposition at /metrics (browsers get the page), and the UI's files are
//! served with their types, gzip, ETags and a Content-Security-Policy.
//!
//! Chromium (Debian's `chromium`) and playwright-core (npm, in
//! tests/conformance/package.json) are installed by ./test.sh; a missing
//! one fails the test, saying how to install it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::Server;

const CHROMIUM: &str = "/usr/bin/chromium";
/// The browser script gets this long (it takes a few seconds).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(240);

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn require_browser(root: &Path) {
    let install = "./test.sh installs them: apt-get install chromium; npm ci --prefix tests/conformance";
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing; {install}");
    let pw = root.join("tests/conformance/node_modules/playwright-core/package.json");
    assert!(pw.exists(), "{} is missing; {install}", pw.display());
    assert!(
        Command::new("node").arg("--version").output().is_ok(),
        "node is missing; {install}"
    );
}

/// Runs browser.mjs with `args`; panics with its output unless it exits 0.
fn browser(root: &Path, args: &[&str], server: &Server) -> String {
    let started = Instant::now();
    let mut child = Command::new("node")
        .current_dir(root.join("tests/conformance/ui"))
        .arg("browser.mjs")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("node runs");
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(
        out.status.success(),
        "browser.mjs {args:?} failed ({:?}):\n{stdout}\n{stderr}\nserver log:\n{}",
        out.status,
        server.log_text()
    );
    stdout
}

#[test]
fn every_page_shows_its_data_in_a_real_browser() {
    let root = repo_root();
    require_browser(&root);
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), &[]);
    let out = browser(&root, &["check", "--api", &s.api, "--otlp", &s.otlp_http], &s);
    assert!(out.contains("check: ok"), "{out}");
    // The first load's gzipped size, as the script measured it (≤ 300 KB,
    // which it checks itself).
    let line = out.lines().find(|l| l.starts_with("first load:")).unwrap_or_default();
    eprintln!("{line}");

    // The API the charts read, on the fixture's data.
    // Two hours: the fixture's hour, whatever the minute boundaries.
    let series = s.get_json("/api/v1/series/services?last=2h&points=30");
    let payments = series["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["service"] == "payments")
        .unwrap_or_else(|| panic!("{series}"));
    let sum = |v: &serde_json::Value| v.as_array().unwrap().iter().filter_map(|x| x.as_u64()).sum::<u64>();
    assert_eq!(sum(&payments["spans"]), 360, "every payments span, once: {payments}");
    assert_eq!(sum(&payments["errors"]), 30, "{payments}");
    let errs = payments["errors"].as_array().unwrap();
    let p95 = payments["p95_ns"].as_array().unwrap();
    // Whole-minute buckets of five minutes or so: the failing last ten
    // minutes are in the last three, forty minutes ago was quiet.
    let n = p95.len();
    let recent_p95 = p95[n - 3..].iter().filter_map(|v| v.as_u64()).max().unwrap_or(0);
    assert!(
        errs[..n - 4].iter().all(|e| e == 0) && recent_p95 > 5 * p95[n - 8].as_u64().unwrap_or(u64::MAX / 5),
        "errors and latency rise at the end: {payments}"
    );
    let logs = s.get_json("/api/v1/series/logs?last=2h&points=60&severity=warn");
    assert_eq!(sum(&logs["severities"]["error"]), 30, "{logs}");
    assert!(
        logs["severities"].get("info").is_none(),
        "severity=warn leaves info out: {logs}"
    );
    // With a search's filters, the histogram counts the lines that search
    // finds: full text, body substring, attributes, a trace.
    let total = |v: &serde_json::Value| v["severities"].as_object().unwrap().values().map(sum).sum::<u64>();
    let failed = s.get_json("/api/v1/series/logs?last=2h&text=processor%20AND%20timeout");
    assert_eq!(sum(&failed["severities"]["error"]), 30, "{failed}");
    assert_eq!(total(&failed), 30, "only the failed charges: {failed}");
    let one_trace = s.get_json("/api/v1/logs?last=2h&limit=1&service=payments&severity=error");
    let tid = one_trace["logs"][0]["trace_id"].as_str().unwrap().to_string();
    for filters in [
        "text=idempotency".to_string(),
        "text=order%20NOT%20charge".to_string(),
        "q=card%20processor".to_string(),
        "attr.payment.provider=acme-pay-eu".to_string(),
        "service=checkout&text=placed".to_string(),
        format!("trace_id={tid}"),
        "text=nowhere-to-be-found".to_string(),
    ] {
        let hist = s.get_json(&format!("/api/v1/series/logs?last=2h&points=30&{filters}"));
        let list = s.get_json(&format!("/api/v1/logs?last=2h&limit=10000&{filters}"));
        let lines = list["logs"].as_array().unwrap().len() as u64;
        assert!(
            lines > 0 || filters.contains("nowhere"),
            "{filters} finds lines: {list}"
        );
        assert_eq!(
            total(&hist),
            lines,
            "{filters}: the histogram counts the search's lines: {hist}"
        );
    }
    let names = s.get_json("/api/v1/metrics/names");
    let names: Vec<&str> = names["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names, ["http.server.duration", "http.server.requests", "queue.depth"]);
    let bad = reqwest::blocking::get(format!("{}/api/v1/series/logs?points=0", s.api)).unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().unwrap().contains("parameter points"));
}

/// A server with tokens: the UI asks for one once per tab, every view and
/// the live tail (a stream, which EventSource could not send a header
/// with) use it, and a wrong one shows the API's refusal.
#[test]
fn with_tokens_the_page_asks_once_and_every_view_and_the_tail_use_the_token() {
    let root = repo_root();
    require_browser(&root);
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"collector\"\nsecret = \"ingest-secret\"\nscopes = [\"ingest\"]\n\n\
         [[token]]\nname = \"browser\"\nsecret = \"read-secret\"\nscopes = [\"read\"]\n",
    )
    .unwrap();
    let s = Server::start(&dir.path().join("data"), &["--auth-tokens", tokens.to_str().unwrap()]);
    let out = browser(
        &root,
        &[
            "auth",
            "--api",
            &s.api,
            "--otlp",
            &s.otlp_http,
            "--token",
            "read-secret",
            "--ingest-token",
            "ingest-secret",
        ],
        &s,
    );
    assert!(out.contains("auth: ok"), "{out}");
}

#[test]
fn prometheus_keeps_its_metrics_and_browsers_get_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), &[]);
    let http = reqwest::blocking::Client::new();
    let get = |path: &str, accept: Option<&str>| {
        let mut r = http.get(format!("{}{path}", s.api));
        if let Some(a) = accept {
            r = r.header("accept", a);
        }
        r.send().unwrap()
    };
    // Scrapers: Prometheus 2.x/3.x, plain text, curl's */*, nothing.
    for accept in [
        Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        ),
        Some("text/plain;version=0.0.4"),
        Some("*/*"),
        None,
    ] {
        let r = get("/metrics", accept);
        assert_eq!(r.status(), 200, "{accept:?}");
        assert_eq!(
            r.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        let body = r.text().unwrap();
        assert!(body.contains("# TYPE "), "{accept:?}: {body}");
    }
    // The OTLP/HTTP port has no UI: its /metrics is always the exposition.
    let r = http
        .get(format!("{}/metrics", s.otlp_http))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert!(r.text().unwrap().contains("# TYPE "));

    // Browsers: the page, on every route of the UI.
    let html = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    for path in [
        "/",
        "/metrics",
        "/traces",
        "/traces/0123",
        "/logs",
        "/llm",
        "/sessions/s-1",
    ] {
        let r = get(path, Some(html));
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8", "{path}");
        let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert!(
            r.text()
                .unwrap()
                .contains("<script type=\"module\" src=\"/ui/js/app.js\">")
        );
    }
    // A page nothing serves: the UI's own not-found (a 404); the API's
    // unknown routes keep their JSON error.
    let r = get("/nowhere", Some(html));
    assert_eq!(r.status(), 404);
    assert!(r.text().unwrap().contains("/ui/js/app.js"));
    let r = get("/api/v1/nowhere", Some(html));
    assert_eq!(r.status(), 404);
    assert!(r.text().unwrap().contains("\"not_found\""));

    // Files: type, gzip, ETag, a 304 for a current copy.
    let r = http
        .get(format!("{}/ui/js/app.js", s.api))
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/javascript; charset=utf-8");
    assert_eq!(r.headers()["content-encoding"], "gzip");
    assert_eq!(r.headers()["cache-control"], "no-cache");
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let r = http
        .get(format!("{}/ui/js/app.js", s.api))
        .header("if-none-match", &etag)
        .send()
        .unwrap();
    assert_eq!(r.status(), 304);
    let r = http
        .get(format!("{}/ui/vendor/uPlot.iife.min.js", s.api))
        .send()
        .unwrap();
    assert!(r.headers().get("content-encoding").is_none(), "no gzip unless asked");
    assert_eq!(r.status(), 200);
    assert_eq!(get("/ui/nope.js", None).status(), 404);
}
